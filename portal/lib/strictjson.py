"""JSON parsing that accepts only JSON.

Python's ``json.loads`` also accepts ``NaN``, ``Infinity`` and ``-Infinity``, which RFC 8259 (section 6)
does not allow and which PostgreSQL's ``jsonb`` and SQLite's ``JSON_VALID`` refuse — a request or a
backend answer carrying one would only fail later, when it is stored.
"""

from __future__ import annotations

import json
from typing import Any


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def loads(data: str | bytes) -> Any:
    """``json.loads(data)`` that raises ``ValueError`` (a ``json.JSONDecodeError`` for malformed text) for
    ``NaN`` / ``Infinity`` / ``-Infinity`` too, and ``RecursionError`` for documents nested too deeply."""
    return json.loads(data, parse_constant=_refuse)
