"""SQL run by a migration's database side, per database vendor — for migrations that change the schema in a
cheaper way than the operations Django would derive from the state change (rename an index instead of
dropping and building it again, keep a foreign key instead of dropping and re-validating it), through
``migrations.SeparateDatabaseAndState``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def sql_per_vendor(statements: Mapping[str, Sequence[str]]) -> Callable[[Any, Any], None]:
    """A ``RunPython`` function that executes, in order, ``statements[vendor]`` for the connection's vendor
    (``"postgresql"``, ``"sqlite"``, …) or else ``statements["default"]``. Raises ``KeyError`` when neither
    is given (the migration then fails before it changes anything)."""

    def run(apps: Any, schema_editor: Any) -> None:
        vendor = schema_editor.connection.vendor
        for sql in statements[vendor] if vendor in statements else statements["default"]:
            schema_editor.execute(sql)

    return run
