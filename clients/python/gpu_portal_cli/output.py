"""How the CLI prints: aligned tables for people, JSON for programs, a status line on stderr for waits."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, TextIO

Column = tuple[str, str] | tuple[str, str, Callable[[Any], str]]
"""(header, key in the row dict[, formatter]) — the key may be dotted (``license_version.number``)."""


def dig(row: Any, key: str) -> Any:
    """``row["a"]["b"]`` for ``key="a.b"``; ``None`` where a level is missing."""
    for part in key.split("."):
        if not isinstance(row, dict):
            return None
        row = row.get(part)
    return row


def cell(value: Any) -> str:
    """One table cell: ``-`` for nothing, lists comma-joined, ISO times as ``YYYY-MM-DD HH:MM:SS ZONE`` in this
    machine's time zone (``TZ`` chooses another), labelled (:func:`zone_label`; the API sends them with their
    offset)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(cell(v) for v in value) or "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    if len(text) >= 19 and text[4] == "-" and text[10] == "T" and text[13] == ":":
        try:
            local = datetime.fromisoformat(text).astimezone()
            return f"{local.strftime('%Y-%m-%d %H:%M:%S')} {zone_label(local)}"
        except ValueError:
            pass
    return text.replace("\n", " ")


def zone_label(moment: datetime) -> str:
    """The zone of an aware time as people read it: its abbreviation (``CST``, ``UTC``, ``CET``) where the zone
    has one, else its offset (``UTC+04:00``; zones whose abbreviation is a number, ``+04``)."""
    name = moment.tzname() or ""
    if name.isalpha():
        return name
    offset = moment.strftime("%z") or "+0000"
    return f"UTC{offset[:3]}:{offset[3:5]}"


def table(
    rows: Iterable[dict[str, Any]], columns: Sequence[Column], *, out: TextIO | None = None, empty: str = "(none)"
) -> None:
    """Print ``rows`` as left-aligned columns under upper-case headers (two spaces apart)."""
    out = out or sys.stdout
    grid = [[c[0].upper() for c in columns]]
    for row in rows:
        grid.append([c[2](dig(row, c[1])) if len(c) == 3 else cell(dig(row, c[1])) for c in columns])  # type: ignore[misc]
    if len(grid) == 1:
        print(empty, file=out)
        return
    widths = [max(len(r[i]) for r in grid) for i in range(len(columns))]
    for r in grid:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip(), file=out)


def emit_json(data: Any, *, out: TextIO | None = None) -> None:
    """Machine output: one JSON document on stdout (UTF-8 text as is)."""
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str), file=out or sys.stdout)


class StatusLine:
    """Progress of a wait on stderr (stdout stays clean for ``--json``): rewritten in place on a terminal,
    one line per change otherwise (logs, CI)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.last = ""

    def show(self, text: str) -> None:
        if text == self.last:
            return
        self.last = text
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


def human_bytes(n: Any) -> str:
    if not isinstance(n, int):
        return cell(n)
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(n)  # pragma: no cover


CHECKPOINT_COLUMNS = [
    ("id", "id"),
    ("step", "step"),
    ("loss", "loss"),
    ("size", "size_bytes", human_bytes),
    ("complete", "complete"),
    ("rolled back", "rolled_back"),
    ("attempt", "attempt"),
    ("created", "created_at"),
]


def cny(micros: Any) -> str:
    """Integer micro-CNY as ``12.50 CNY`` (exact decimal: no float; at least two places)."""
    if not isinstance(micros, int):
        return cell(micros)
    if micros == 0:
        return "free"
    whole, _, frac = f"{Decimal(micros).scaleb(-6):f}".partition(".")
    return f"{whole}.{frac.rstrip('0').ljust(2, '0')} CNY"
