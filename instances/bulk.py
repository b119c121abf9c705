"""Set-based INSERT and UPDATE of many rows, each with its own values, in one statement where the database
allows.

Django's ``bulk_update`` writes ``CASE WHEN id = … THEN … END`` per column, which PostgreSQL evaluates
row by row against every branch (quadratic: 2,000 rows × 6 columns took seconds in the scheduler
benchmark), and ``bulk_create`` builds a model object and a placeholder group per row. On PostgreSQL
:func:`rows_update` and :func:`rows_insert` send the rows as one JSON document read by
``json_to_recordset`` (one statement, one parameter, encoded by the C JSON encoder: binding one array per
column cost more in psycopg's Python array quoting than the database's work); elsewhere they fall back to
``CASE`` updates in batches of ``BATCH`` rows and to ``bulk_create``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, cast

from django.db import connection, models
from django.db.models import Case, Value, When
from django.db.models.expressions import RawSQL

BATCH = 500  # rows per CASE update where PostgreSQL is not available


def _json_default(value: Any) -> Any:
    # full precision (DjangoJSONEncoder cuts times to milliseconds); PostgreSQL parses ISO 8601
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(f"cannot write {type(value).__name__} in a bulk row")


def json_document(value: Any) -> str:
    """``value`` as JSON for a ``%s::json`` parameter (datetimes in ISO 8601 at full precision)."""
    return json.dumps(value, default=_json_default)


def text_array(values: Sequence[str]) -> str:
    """A PostgreSQL array literal of ``values`` for a ``%s::text[]`` parameter: one string built here (psycopg
    adapts a list element by element in Python), a constant array to the planner (which estimates by its
    length, unlike an array made from JSON in the query)."""
    quoted = ('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values)
    return "{" + ",".join(quoted) + "}"


def _recordset(
    fields: Sequence[models.Field[Any, Any]],
    columns: Sequence[Sequence[Any]],
    first: Sequence[Any] | None = None,
    first_type: str = "",
) -> tuple[str, str]:
    """(``json_to_recordset(%s::json) AS v(c0 type, …)``, the JSON document): one record per row, keys
    ``k`` (``first``, e.g. the primary key), ``n`` (row index) and ``c0`` … (the columns)."""
    defs = ["n integer"] + ([f"k {first_type}"] if first is not None else [])
    defs += [f"c{i} {f.db_type(connection)}" for i, f in enumerate(fields)]
    names = [f"c{i}" for i in range(len(fields))]
    rows = []
    for n, values in enumerate(zip(*columns, strict=True)):
        row = dict(zip(names, values, strict=True))
        row["n"] = n
        if first is not None:
            row["k"] = first[n]
        rows.append(row)
    return f"json_to_recordset(%s::json) AS v({', '.join(defs)})", json.dumps(rows, default=_json_default)


def rows_insert(model: type[models.Model], count: int, columns: Mapping[str, Sequence[Any]]) -> list[Any]:
    """Insert ``count`` rows: ``columns[name][i]`` for row ``i`` (field names or ``*_id`` attribute names);
    every other concrete field gets its default (evaluated once: the same value on every row). Returns the
    new primary keys in row order. Raises ``ValueError`` for a column of another length than ``count``
    (nothing written)."""
    if any(len(values) != count for values in columns.values()):
        raise ValueError("rows_insert: every column needs one value per row")
    if not count:
        return []
    meta = model._meta
    if connection.vendor != "postgresql":
        objs = model.objects.bulk_create(  # type: ignore[attr-defined]
            [model(**{name: values[i] for name, values in columns.items()}) for i in range(count)]
        )
        return [o.pk for o in objs]
    given = [f for f in meta.concrete_fields if f.name in columns or f.attname in columns]
    source, document = _recordset(given, [columns[f.name] if f.name in columns else columns[f.attname] for f in given])
    head, constants = insert_select(model, {f.attname: f"v.c{i}" for i, f in enumerate(given)})
    sql = f'{head} FROM {source} ORDER BY v.n RETURNING "{meta.pk.column}"'
    with connection.cursor() as cur:  # the constants' placeholders come first (SELECT list), the rows after
        cur.execute(sql, [*constants, document])
        return [row[0] for row in cur.fetchall()]


def insert_select(
    model: type[models.Model], exprs: Mapping[str, str], values: Mapping[str, Any] | None = None
) -> tuple[str, list[Any]]:
    """``INSERT INTO <table> (<columns>) SELECT <expressions>`` for ``model`` (PostgreSQL), for the caller
    to append its ``FROM …``: ``exprs`` maps field or ``*_id`` attribute names to SQL expressions over that
    FROM clause, ``values`` to one value for every row; every other concrete field but an automatic primary
    key gets its default (evaluated once). Returns the SQL and the parameters of its SELECT list, in order."""
    values = values or {}
    names, reads, constants = [], [], []
    for f in model._meta.concrete_fields:
        expr = exprs.get(f.attname, exprs.get(f.name))
        if expr is not None:
            reads.append(expr)
        elif f.primary_key and f.attname not in values:
            continue
        else:  # one value for every row
            value = values[f.attname] if f.attname in values else values.get(f.name, f.get_default())
            if f.db_type(connection) == "jsonb":
                value = json.dumps(value, default=_json_default)
            reads.append(f"%s::{f.db_type(connection)}")
            constants.append(value)
        names.append(f'"{f.column}"')
    return f'INSERT INTO "{model._meta.db_table}" ({", ".join(names)}) SELECT {", ".join(reads)}', constants


def pk_in(pks: Sequence[int]) -> Any:
    """The right-hand side of ``pk__in=`` for a long list of integer keys: on PostgreSQL one JSON parameter
    unpacked by the database (a list of 10,000 placeholders costs more to build and parse than the query
    itself), elsewhere the list."""
    if connection.vendor != "postgresql":
        return list(pks)
    return RawSQL("SELECT value::bigint FROM json_array_elements_text(%s::json)", [json.dumps(list(pks))])


def rows_update(
    model: type[models.Model],
    pks: Sequence[Any],
    columns: Mapping[str, Sequence[Any]],
    *,
    where: Mapping[str, Any] | None = None,
) -> list[Any] | None:
    """Set ``columns[name][i]`` on the row ``pks[i]`` for every column, where the row also matches ``where``
    (equality on other fields, e.g. ``{"status": "scheduling"}``: a compare-and-set). Field names, not
    column names. Returns the primary keys of the rows updated on PostgreSQL (``UPDATE … RETURNING``),
    ``None`` elsewhere. Raises ``ValueError`` for a column list of another length than ``pks``; nothing is
    written then."""
    if any(len(values) != len(pks) for values in columns.values()):
        raise ValueError("rows_update: every column needs one value per primary key")
    if not pks or not columns:
        return [] if connection.vendor == "postgresql" else None
    meta = model._meta
    where = dict(where or {})
    if connection.vendor == "postgresql":
        fields = [cast(models.Field, meta.get_field(name)) for name in columns]  # concrete columns only
        source, document = _recordset(fields, list(columns.values()), pks, meta.pk.db_type(connection) or "bigint")
        sets = [f'"{f.column}" = v.c{i}' for i, f in enumerate(fields)]
        conditions = [f'"{meta.db_table}"."{meta.pk.column}" = v.k']
        params: list[Any] = [document]
        for name, value in where.items():
            conditions.append(f'"{meta.db_table}"."{cast(models.Field, meta.get_field(name)).column}" = %s')
            params.append(value)
        sql = (
            f'UPDATE "{meta.db_table}" SET {", ".join(sets)} FROM {source} '  # noqa: S608
            f'WHERE {" AND ".join(conditions)} RETURNING "{meta.db_table}"."{meta.pk.column}"'
        )
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [row[0] for row in cur.fetchall()]
    for start in range(0, len(pks), BATCH):
        batch = pks[start : start + BATCH]
        updates = {
            name: Case(
                *[
                    When(pk=pk, then=Value(v, output_field=cast(models.Field, meta.get_field(name))))
                    for pk, v in zip(batch, values[start : start + BATCH], strict=True)
                ],
                output_field=cast(models.Field, meta.get_field(name)),
            )
            for name, values in columns.items()
        }
        model.objects.filter(pk__in=batch, **where).update(**updates)  # type: ignore[attr-defined]
    return None
