"""Helpers for the few hand-written SQL statements on hot paths (the ledger posting, app-call reservations).

Only table names from model metadata are interpolated, quoted by the backend; every value is a bound
parameter, converted the way the model field would convert it, so the same statement runs on SQLite and
PostgreSQL.
"""

from __future__ import annotations

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
