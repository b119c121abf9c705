"""Set-based statements for the hot paths (metering): many rows in one statement on PostgreSQL, in a few
multi-row statements on SQLite. Values are always bound parameters; table and column names come from the
callers' model metadata."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection

try:
    import psycopg
except ImportError:  # SQLite-only installations
    psycopg = None  # type: ignore[assignment]

#: SQLite's limit on bound parameters per statement is 32,766 (since 3.32); stay well under it.
_SQLITE_MAX_PARAMS = 30_000


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def bulk_insert(
    table: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    suffix: str = "",
    returning: str = "",
) -> list[tuple[Any, ...]]:
    """``INSERT INTO table (columns) … suffix RETURNING returning`` for all ``rows``; returns what
    ``RETURNING`` gave (every chunk's rows on SQLite). ``columns`` are (name, PostgreSQL type) pairs: on
    PostgreSQL the rows travel as one array per column through ``unnest`` (one statement for any number of
    rows, https://www.postgresql.org/docs/current/functions-array.html); type ``jsonb`` takes Python objects.
    ``suffix`` is e.g. ``ON CONFLICT (…) DO NOTHING``."""
    if not rows:
        return []
    names = ", ".join(name for name, _ in columns)
    tail = f" {suffix}" + (f" RETURNING {returning}" if returning else "")
    out: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            arrays = []
            for i, (_, kind) in enumerate(columns):
                values = [row[i] for row in rows]
                if kind == "jsonb":
                    values = [json.dumps(v, sort_keys=True, default=str) for v in values]
                arrays.append(values)
            # ``%b``: psycopg sends the arrays in binary, without quoting each text element (several times
            # faster for 100,000 rows; https://www.psycopg.org/psycopg3/docs/basic/params.html#binary-data).
            # Django's cursors bind parameters client-side (quoting every element); a plain psycopg cursor on
            # the same connection and transaction binds server-side.
            unnest = ", ".join(f"%b::{kind}[]" for _, kind in columns)
            with psycopg.Cursor(connection.connection) as raw:
                raw.execute(f"INSERT INTO {table} ({names}) SELECT * FROM unnest({unnest}){tail}", arrays)
                return list(raw.fetchall()) if returning else []
        per = max(1, _SQLITE_MAX_PARAMS // len(columns))
        one = "(" + ", ".join(["%s"] * len(columns)) + ")"
        kinds = [kind for _, kind in columns]
        for start in range(0, len(rows), per):
            chunk = rows[start : start + per]
            params = [
                json.dumps(v, sort_keys=True, default=str) if kinds[i] == "jsonb" else _sqlite_value(v)
                for row in chunk
                for i, v in enumerate(row)
            ]
            cursor.execute(f"INSERT INTO {table} ({names}) VALUES " + ", ".join([one] * len(chunk)) + tail, params)
            if returning:
                out.extend(cursor.fetchall())
    return out


def in_clause(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column = ANY(%s)`` (one array parameter) on PostgreSQL, ``column IN (%s, …)`` on SQLite."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    if not values:
        return "1 = 0", []
    return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)
