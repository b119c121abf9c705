"""Normalisation before detection, with a map back to the original text.

Evasions and notations that hide an identifier from a pattern are undone first: invisible format
characters (zero-width space/joiners, word joiner, BOM, soft hyphen, bidi marks — Unicode category
``Cf`` and U+034F) are dropped; every decimal digit of another script (full-width ``１``, Arabic-Indic
``٣``, Devanagari ``३``, mathematical ``𝟑`` … — category ``Nd``) becomes its ASCII digit; full-width
Latin letters and ``＋ － ． ＠`` become ASCII; no-break, figure and ideographic spaces (``\u3000``) become a
space and hyphens, en dashes and minus signs a ``-``. Chinese punctuation (``，：（）``) is kept as it is.

Only 1→1 substitutions and deletions happen, so the map is a short list of breakpoints: a normalised
offset ``i`` is original offset ``i + delta`` where ``delta`` is the number of characters dropped before
it. ``Normalized.span(start, end)`` turns a normalised span into the original one.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field

# Characters that need work: invisible format characters, non-ASCII decimal digits, full-width Latin
# letters and the few full-width signs that occur inside identifiers.
_NEEDS = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\ufe00-\ufe0f\ufeff\ufff9-\ufffb\uff0b\uff0d\uff0e\uff20\uff21-\uff3a\uff41-\uff5a"
    "\u00a0\u2007\u202f\u3000\u2010-\u2013\u2212\ufe63]|(?![0-9])\\d"
)
_FULLWIDTH_SIGNS = {"\uff0b": "+", "\uff0d": "-", "\uff0e": ".", "\uff20": "@"}
# Spaces and dashes people type between digit groups (no-break and ideographic spaces, hyphens, en dash,
# minus sign): the ASCII space and hyphen-minus that the patterns know. The em dash (``——``) stays.
_SPACES_DASHES = dict.fromkeys("\xa0\u2007\u202f\u3000", " ") | dict.fromkeys("‐‑‒–−﹣", "-")


def _replacement(ch: str) -> str:
    """The normalised form of one character that ``_NEEDS`` matched ("" = drop it)."""
    if ch in _FULLWIDTH_SIGNS:
        return _FULLWIDTH_SIGNS[ch]
    if ch in _SPACES_DASHES:
        return _SPACES_DASHES[ch]
    o = ord(ch)
    if 0xFF21 <= o <= 0xFF3A or 0xFF41 <= o <= 0xFF5A:
        return chr(o - 0xFEE0)
    digit = unicodedata.digit(ch, None)
    if digit is not None and unicodedata.category(ch) == "Nd":
        return str(digit)
    return ""  # a format / invisible character


@dataclass
class Normalized:
    """``text`` as the detectors see it; ``original`` as given. ``changed`` counts characters altered or
    dropped (0: the two strings are identical)."""

    original: str
    text: str
    changed: int = 0
    _breaks: list[int] = field(default_factory=list)  # normalised offsets where delta grows
    _deltas: list[int] = field(default_factory=list)  # delta from that offset on

    def offset(self, i: int) -> int:
        """Original offset of normalised offset ``i`` (``0 <= i <= len(text)``)."""
        k = bisect_right(self._breaks, i)
        return i + (self._deltas[k - 1] if k else 0)

    def span(self, start: int, end: int) -> tuple[int, int]:
        """Original ``(start, end)`` of the normalised span ``[start, end)`` (``end > start``): from the
        first to the last character it covers, so dropped characters inside the span are included."""
        return self.offset(start), self.offset(end - 1) + 1


def normalize(text: str) -> Normalized:
    """Normalise ``text`` for detection (see the module docstring). Linear in ``len(text)``; returns the
    input string itself when there is nothing to change (the common case)."""
    if _NEEDS.search(text) is None:
        return Normalized(text, text)
    parts: list[str] = []
    breaks: list[int] = []
    deltas: list[int] = []
    pos = 0
    out_len = 0
    dropped = 0
    changed = 0
    for m in _NEEDS.finditer(text):
        s = m.start()
        parts.append(text[pos:s])
        out_len += s - pos
        rep = _replacement(m.group())
        changed += 1
        if rep:
            parts.append(rep)
            out_len += 1
        else:
            dropped += 1
            breaks.append(out_len)
            deltas.append(dropped)
        pos = s + 1
    parts.append(text[pos:])
    # Several drops at one normalised offset: keep the last (largest) delta for that offset.
    if breaks:
        b2: list[int] = []
        d2: list[int] = []
        for b, d in zip(breaks, deltas, strict=True):
            if b2 and b2[-1] == b:
                d2[-1] = d
            else:
                b2.append(b)
                d2.append(d)
        breaks, deltas = b2, d2
    return Normalized(text, "".join(parts), changed, breaks, deltas)
