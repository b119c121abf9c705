"""De-identification of personal data in Chinese and international text (pure Python, no Django).

``deidentify(text)`` replaces personal identifiers with placeholders and counts them::

    >>> deidentify("身份证 11010519491231002X，电话 138-1234-5678")[0]
    '身份证 [ID_NUMBER]，电话 [PHONE]'

``find_pii(text)`` returns the ``Finding``s with their evidence (span, type, rule, confidence, note).
How it works:

1. The text is normalised (``normalize.py``): zero-width and other invisible characters are dropped and
   full-width / other-script digits become ASCII, with an offset map back to the original text, so an
   identifier with ``\\u200b`` or ``１`` between its digits is still found and replaced whole.
2. Detectors run in ``DETECTOR_ORDER``; the span each one finds is masked before the next runs, so an ID
   number is never also a phone or a card. Each detector's rules and sources are in its docstring
   (``numbers.py``: e-mail, IP, ID numbers, national IDs, cards, passports, phones via ``phonenumbers``,
   licence plates, Chinese social-insurance numbers; ``names.py``: people's names by a statistical tagger
   weighed with their context; ``text.py``: addresses, dates of birth; ``times.py``: the timestamps that
   are never phone numbers).
3. Findings whose value is on the ``allow`` list (e.g. the organisation's own hotline) are kept in the
   text and counted as allowed.
4. Each finding is replaced in the chosen ``style``: ``typed`` (``[PHONE]``), ``pseudonym`` (``[PHONE_1]``,
   the same number for the same value within one document) or ``hash`` (``[PHONE:3f9a1c2b]``, a keyed
   BLAKE2b of the canonical value, stable across documents for one key).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from .checks import id_check_char, id_number_valid, luhn_valid
from .names import detect_name
from .normalize import Normalized, normalize
from .numbers import (
    Hit,
    detect_bank_card,
    detect_email,
    detect_id_number,
    detect_ip,
    detect_licence_plate,
    detect_national_id,
    detect_passport,
    detect_phone,
)
from .text import detect_address, detect_birth_date

__all__ = [
    "PII_TYPES",
    "PLACEHOLDERS",
    "PLACEHOLDER_STYLES",
    "DeidOptions",
    "Finding",
    "deidentify",
    "deidentify_with_findings",
    "find_pii",
    "id_check_char",
    "id_number_valid",
    "luhn_valid",
    "normalize",
]

PII_TYPES: tuple[str, ...] = (
    "EMAIL",
    "IP",
    "ID_NUMBER",
    "NATIONAL_ID",
    "BANK_CARD",
    "PASSPORT",
    "PHONE",
    "NAME",
    "ADDRESS",
    "BIRTH_DATE",
    "LICENSE_PLATE",
)
"""Every type the product claims to remove, in report order."""
PLACEHOLDERS: dict[str, str] = {t: f"[{t}]" for t in PII_TYPES}
PLACEHOLDER_STYLES = ("typed", "pseudonym", "hash")

DETECTOR_ORDER: tuple[Callable[[str], Iterator[Hit]], ...] = (
    detect_email,
    detect_ip,  # IPv6 and IPv4 before phones: dotted quads are phone-number candidates too
    detect_id_number,
    detect_national_id,
    detect_bank_card,
    detect_passport,
    detect_birth_date,
    detect_phone,
    detect_licence_plate,
    detect_address,
    detect_name,
)

# Masks a found span for later detectors: U+E000 (Private Use Area) is no digit, letter, dot or dash, and
# no CJK character, so no pattern continues through it.
_MASK = "\ue000"


@dataclass(frozen=True)
class Finding:
    """One identifier found: ``type`` (of ``PII_TYPES``), ``start``/``end`` offsets into the original text
    (``text[start:end] == value``), the ``rule`` that fired (``"id18:checksum"``, ``"phone:DE"``,
    ``"name:label"`` …), ``confidence`` in [0, 1] and a ``note`` on doubts (``"invalid check digit"``)."""

    type: str
    start: int
    end: int
    value: str
    rule: str = ""
    confidence: float = 1.0
    note: str = ""

    def evidence(self) -> dict[str, object]:
        """The finding without its value, for reports: ``{"type", "start", "end", "rule", "confidence", "note"}``."""
        return {
            "type": self.type,
            "start": self.start,
            "end": self.end,
            "rule": self.rule,
            "confidence": self.confidence,
            "note": self.note,
        }


_CANON_DROP = re.compile(r"[\s\-().（）+·•・]")


def canonical(kind: str, value: str) -> str:
    """The value compared for allow-lists and pseudonyms: normalised (``normalize``), separators dropped,
    upper-cased (``138-1234-5678`` == ``13812345678``; e-mail case-insensitive). Phone numbers also lose a
    ``86`` / ``0086`` country code, so ``+86 138…`` matches ``138…``."""
    v = _CANON_DROP.sub("", normalize(value).text).upper()
    if kind == "PHONE":
        v = v.removeprefix("0086") if v.startswith("0086") else v
        if v.startswith("86") and len(v) == 13:
            v = v[2:]
    return v


@dataclass(frozen=True)
class DeidOptions:
    """How to de-identify: ``style`` of ``PLACEHOLDER_STYLES``; ``allow`` — values never replaced (compared
    by ``canonical``: any type); ``hash_key`` — key of the ``hash`` style (bytes, e.g. per organisation)."""

    style: str = "typed"
    allow: frozenset[str] = field(default_factory=frozenset)
    hash_key: bytes = b""

    def __post_init__(self) -> None:
        if self.style not in PLACEHOLDER_STYLES:
            raise ValueError(f"unknown placeholder style {self.style!r}; use one of {', '.join(PLACEHOLDER_STYLES)}")

    @classmethod
    def build(cls, *, style: str = "typed", allow: Iterable[str] = (), hash_key: bytes = b"") -> DeidOptions:
        """Options with ``allow`` given as raw strings (blank entries ignored)."""
        keys = frozenset(_CANON_DROP.sub("", normalize(a.strip()).text).upper() for a in allow if a.strip())
        canon = {k.removeprefix("0086") for k in keys} | {k[2:] for k in keys if k.startswith("86") and len(k) == 13}
        return cls(style=style, allow=frozenset(keys | canon), hash_key=hash_key)

    def fingerprint(self) -> str:
        """A short digest of the options (part of the pipeline's stage key, so a change re-runs the stage)."""
        raw = "\n".join([self.style, *sorted(self.allow)]).encode() + b"\0" + self.hash_key
        return hashlib.sha256(raw).hexdigest()[:16]


DEFAULT_OPTIONS = DeidOptions()


def _scan(norm: Normalized) -> list[Finding]:
    work = norm.text
    findings: list[Finding] = []
    for detect in DETECTOR_ORDER:
        hits = sorted(detect(work), key=lambda h: (h.start, -(h.end - h.start)))
        kept: list[Hit] = []
        last_end = -1
        for h in hits:
            if h.start >= last_end and _MASK not in work[h.start : h.end]:
                kept.append(h)
                last_end = h.end
        if not kept:
            continue
        parts: list[str] = []
        pos = 0
        for h in kept:
            parts.append(work[pos : h.start])
            parts.append(_MASK * (h.end - h.start))
            pos = h.end
            s, e = norm.span(h.start, h.end)
            findings.append(Finding(h.type, s, e, norm.original[s:e], h.rule, h.confidence, h.note))
        parts.append(work[pos:])
        work = "".join(parts)
    findings.sort(key=lambda f: f.start)
    return findings


def find_pii(text: str, *, options: DeidOptions = DEFAULT_OPTIONS) -> list[Finding]:
    """All identifiers in ``text`` not on ``options.allow``, sorted by position, without overlaps."""
    findings = _scan(normalize(text))
    if options.allow:
        findings = [f for f in findings if canonical(f.type, f.value) not in options.allow]
    return findings


def _placeholder(f: Finding, options: DeidOptions, seen: dict[tuple[str, str], str]) -> str:
    if options.style == "typed":
        return PLACEHOLDERS[f.type]
    key = (f.type, canonical(f.type, f.value))
    if key not in seen:
        if options.style == "pseudonym":
            n = sum(1 for k in seen if k[0] == f.type) + 1
            seen[key] = f"[{f.type}_{n}]"
        else:
            digest = hashlib.blake2b(key[1].encode(), key=options.hash_key[:64], digest_size=4).hexdigest()
            seen[key] = f"[{f.type}:{digest}]"
    return seen[key]


def deidentify_with_findings(
    text: str, *, options: DeidOptions = DEFAULT_OPTIONS, pseudonyms: dict[tuple[str, str], str] | None = None
) -> tuple[str, list[tuple[Finding, str]], int]:
    """Replace identifiers; returns ``(new_text, [(finding, placeholder)], allowed)`` where ``allowed``
    counts identifiers kept because of the allow-list. ``pseudonyms`` carries the pseudonym table across
    the fields of one document (title and text)."""
    all_found = _scan(normalize(text))
    findings = [f for f in all_found if canonical(f.type, f.value) not in options.allow] if options.allow else all_found
    allowed = len(all_found) - len(findings)
    if not findings:
        return text, [], allowed
    seen = pseudonyms if pseudonyms is not None else {}
    parts: list[str] = []
    replaced: list[tuple[Finding, str]] = []
    pos = 0
    for f in findings:
        ph = _placeholder(f, options, seen)
        parts.append(text[pos : f.start])
        parts.append(ph)
        replaced.append((f, ph))
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts), replaced, allowed


def deidentify(text: str, *, options: DeidOptions = DEFAULT_OPTIONS) -> tuple[str, Counter[str]]:
    """Replace personal identifiers in ``text`` with placeholders (typed ``[PHONE]`` by default).

    Returns ``(new_text, counts)`` where ``counts`` maps a type of ``PII_TYPES`` to the number of
    replacements (types with none are absent). Pure function; never raises for any ``str``.
    """
    new, replaced, _ = deidentify_with_findings(text, options=options)
    return new, Counter(f.type for f, _ in replaced)
