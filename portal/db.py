"""Helpers for the few hand-written SQL statements on hot paths (the ledger posting, app-call reservations).

Only table names from model metadata are interpolated, quoted by the backend; every value is a bound
parameter, converted the way the model field would convert it, so the same statement runs on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from django.db import connection, models


def quoted_table(model: type[models.Model]) -> str:
    """The model's table name, quoted for the default database (``"billing_ledgeraccount"``)."""
    return connection.ops.quote_name(model._meta.db_table)


def db_value(model: type[models.Model], field: str, value: Any) -> Any:
    """``value`` as the database driver takes it for ``model.<field>`` (JSON documents, aware datetimes).

    Source: ``Field.get_db_prep_save`` — what the ORM itself sends for that column.
    """
    model_field = model._meta.get_field(field)
    if not isinstance(model_field, models.Field):
        raise TypeError(f"{model.__name__}.{field} is a relation's reverse side, not a column")
    return model_field.get_db_prep_save(value, connection)


def loaded(instance: models.Model) -> models.Model:
    """Mark an instance built in memory from values just written as a saved row of the default database."""
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


_PORTABLE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("portable_only", default=False)


def set_based_paths() -> bool:
    """True when the rules with two engines take their set-based twin: the database is PostgreSQL and no
    :func:`portable_paths` block is open. The twins asked this: the metering tick (``billing.tick_sql`` vs the
    Python tick of ``billing.metering``), app-call reservation and settlement (``billing.call_sql`` vs
    ``portal.marketplace.calls``), the multi-row status moves (``instances.transitions``) and the scheduling
    pass's move statement (``instances.scheduling_pass``). Statements that only differ in SQL dialect (array
    parameters, ``unnest``) still follow ``connection.vendor``."""
    return connection.vendor == "postgresql" and not _PORTABLE_ONLY.get()


@contextlib.contextmanager
def portable_paths() -> Iterator[None]:
    """Run the block with the portable (Python) twin of every two-engine rule, on any database — how the
    simulator (``tests/simulation``) and the twin tests run one input through both engines on PostgreSQL."""
    token = _PORTABLE_ONLY.set(True)
    try:
        yield
    finally:
        _PORTABLE_ONLY.reset(token)
