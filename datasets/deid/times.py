"""Date and time shapes that are never an identifier number (pure ``re``).

Systems print a timestamp at the start of every line of a log file and a chat export, and people write
dates and times all through records; their digit runs look like phone numbers (``2024-03-15 14`` is a
plausible digit run of 10 digits with separators). ``datetime_spans`` finds them so the phone detector
skips them; a date of birth is still a finding, by its own detector and only with its context
(``text.detect_birth_date``), which runs before the phones.

Shapes (ISO 8601 and what log libraries print): ``YYYY-MM-DD`` / ``/`` / ``.`` with an optional time — an
hour alone (``2024-03-15 14``, a log prefix cut at the hour), ``HH:MM``, ``HH:MM:SS`` with fractions, a
``T`` separator, ``Z`` or an offset; compact ``YYYYMMDD HHMMSS``; a clock time ``HH:MM[:SS[.fff]]``
anywhere; ``DD.MM.YYYY``, ``DD-MM-YYYY``, ``MM/DD/YYYY`` and ``DD/MM/YYYY``; the common log format
``15/Mar/2024:14:23:05 +0800``; Chinese ``14时30分``/``14点30``.
"""

from __future__ import annotations

import re

_Y = r"(?:19|20)\d{2}"
_M = r"(?:0?[1-9]|1[0-2])"
_D = r"(?:0?[1-9]|[12]\d|3[01])"
_H = r"(?:[01]?\d|2[0-3])"
_MON = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_FRACTION = r"(?:[.,]\d{1,9})?"
_ZONE = r"(?:Z|\s?[+-](?:0\d|1[0-4]):?[0-5]\d)?"
_SHAPES = (
    rf"{_Y}(?P<s>[-/.]){_M}(?P=s){_D}(?:(?:T|\s{{1,2}}){_H}(?::[0-5]\d(?::[0-5]\d{_FRACTION})?)?{_ZONE})?",
    rf"{_Y}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])[ T_]?(?:[01]\d|2[0-3])[0-5]\d(?:[0-5]\d)?",
    rf"{_H}:[0-5]\d(?::[0-5]\d{_FRACTION})?{_ZONE}",
    rf"{_D}(?P<s2>[./-]){_M}(?P=s2){_Y}",
    rf"{_M}/{_D}/{_Y}",
    rf"{_D}/{_MON}/{_Y}(?::\d{{2}}){{3}}(?:\s[+-]\d{{4}})?",
    rf"{_H}[时点](?:[0-5]?\d分?)?",
)
_DATETIME_RE = re.compile(r"(?=[0-9])(?<![0-9])(?:" + "|".join(_SHAPES) + r")(?![0-9])")  # digits first: fast


def datetime_spans(work: str) -> list[tuple[int, int]]:
    """``[(start, end)]`` of every date or time shape in ``work`` (see the module docstring), in order."""
    return [m.span() for m in _DATETIME_RE.finditer(work)]


def mask_datetimes(work: str, fill: str = "\ue001") -> str:
    """``work`` with every date or time shape overwritten by ``fill`` (same length: offsets are kept)."""
    spans = datetime_spans(work)
    if not spans:
        return work
    parts: list[str] = []
    pos = 0
    for s, e in spans:
        parts.append(work[pos:s])
        parts.append(fill * (e - s))
        pos = e
    parts.append(work[pos:])
    return "".join(parts)
