"""Validators of identifier numbers: check digits, date and code rules, issuer ranges. Pure functions on
ASCII strings; each names the standard it follows."""

from __future__ import annotations

import datetime as dt

# GB/T 2260 province-level codes (first two digits of a mainland resident ID's address code).
PROVINCES = frozenset(
    {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52, 53, 54}
    | {61, 62, 63, 64, 65, 71, 81, 82, 83}
)
# ISO 7064 MOD 11-2 weights for positions 1..17 (GB 11643-1999, 6.2).
_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"  # index: weighted sum mod 11


def id_check_char(first17: str) -> str:
    """Check character (``0``–``9`` or ``X``) of a resident ID number from its first 17 digits.

    GB 11643-1999 §6.2, ISO 7064 MOD 11-2. Raises ``ValueError`` unless given exactly 17 ASCII digits.
    """
    if len(first17) != 17 or not first17.isascii() or not first17.isdigit():
        raise ValueError("need exactly 17 digits")
    total = sum(int(c) * w for c, w in zip(first17, _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11]


_CHINA_TZ = dt.timezone(dt.timedelta(hours=8))  # China Standard Time, where the ID numbers are issued (no DST)


def _date_ok(y: int, m: int, d: int, today: dt.date | None) -> bool:
    try:
        born = dt.date(y, m, d)
    except ValueError:
        return False
    return dt.date(1900, 1, 1) <= born <= (today or dt.datetime.now(_CHINA_TZ).date())


def id18_problems(number: str, *, today: dt.date | None = None) -> list[str]:
    """What is wrong with an 18-character resident ID number (GB 11643-1999); ``[]`` when valid.

    Problems: ``"not 17 digits + check character"``, ``"unknown province code"`` (GB/T 2260),
    ``"invalid birth date"`` (no such date, or outside 1900-01-01 … today), ``"invalid check digit"``.
    """
    if len(number) != 18 or not number[:17].isascii() or not number[:17].isdigit() or number[17] not in "0123456789Xx":
        return ["not 17 digits + check character"]
    problems = []
    if int(number[:2]) not in PROVINCES:
        problems.append("unknown province code")
    if not _date_ok(int(number[6:10]), int(number[10:12]), int(number[12:14]), today):
        problems.append("invalid birth date")
    if id_check_char(number[:17]) != number[17].upper():
        problems.append("invalid check digit")
    return problems


def id_number_valid(number: str, *, today: dt.date | None = None) -> bool:
    """True when ``number`` is a well-formed 18-character mainland resident ID number (``id18_problems``)."""
    return not id18_problems(number, today=today)


def id15_valid(number: str) -> bool:
    """Old 15-digit resident ID (GB 11643-1989): province code, birth date ``YYMMDD`` of 19YY, 3-digit
    order; there is no check digit."""
    if len(number) != 15 or not number.isascii() or not number.isdigit():
        return False
    return int(number[:2]) in PROVINCES and _date_ok(
        1900 + int(number[6:8]), int(number[8:10]), int(number[10:12]), None
    )


def luhn_valid(digits: str) -> bool:
    """True when the ASCII digit string passes the Luhn (mod 10) check of ISO/IEC 7812-1 Annex B.

    Spaces and dashes are ignored; any other non-digit, or no digits at all, gives False.
    """
    digits = digits.replace(" ", "").replace("-", "")
    if not digits or not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# Issuer identification ranges (ISO/IEC 7812 IIN, as published by the schemes): (first, last prefix of
# equal length, allowed lengths).
_BIN_RANGES: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("62", "62", (16, 17, 18, 19)),  # China UnionPay
    ("4", "4", (13, 16, 19)),  # Visa
    ("51", "55", (16,)),  # Mastercard
    ("2221", "2720", (16,)),  # Mastercard 2-series
    ("34", "34", (15,)),  # American Express
    ("37", "37", (15,)),
    ("3528", "3589", (16, 17, 18, 19)),  # JCB
    ("6011", "6011", (16, 19)),  # Discover
    ("644", "649", (16, 19)),
    ("65", "65", (16, 19)),
    ("300", "305", (14, 16)),  # Diners Club
    ("36", "36", (14, 16)),
    ("6013", "6013", (16, 19)),  # Bank of China Great Wall (pre-UnionPay domestic range)
)


def card_issuer(digits: str) -> str | None:
    """The scheme whose IIN range and length fit ``digits`` (ASCII digits), or None."""
    names = (
        "UnionPay",
        "Visa",
        "Mastercard",
        "Mastercard",
        "Amex",
        "Amex",
        "JCB",
        "Discover",
        "Discover",
        "Discover",
        "Diners",
        "Diners",
        "BOC",
    )
    for (lo, hi, lengths), name in zip(_BIN_RANGES, names, strict=True):
        if len(digits) in lengths and lo <= digits[: len(lo)] <= hi:
            return name
    return None


def hkid_valid(value: str) -> bool:
    """Hong Kong identity card number ``A123456(3)`` / ``AB123456(9)``: one or two letters, six digits and
    a check character (0–9 or A) — weighted sum mod 11 (Immigration Department scheme; a single letter
    counts as a leading space of value 36)."""
    v = "".join(c for c in value.upper() if c.isalnum())
    if not 8 <= len(v) <= 9 or not v[-7:-1].isdigit():
        return False
    letters, digits, check = v[:-7], v[-7:-1], v[-1]
    if not letters.isalpha() or not letters.isascii():
        return False
    chars = ([36] if len(letters) == 1 else []) + [ord(c) - 55 for c in letters] + [int(d) for d in digits]
    total = sum(c * w for c, w in zip(chars, range(9, 1, -1), strict=True))
    want = (11 - total % 11) % 11
    return check == ("A" if want == 10 else str(want))


_TW_LETTERS = "ABCDEFGHJKLMNPQRSTUVXYWZIO"  # values 10..35 in this order (Ministry of the Interior)


def twid_valid(value: str) -> bool:
    """Taiwan national identification number: a letter, 1/2 (sex) or 8/9 (new resident certificate), 8
    digits; weighted sum of the letter's two digits and the rest (weights 1,9,8,…,1) divisible by 10."""
    if len(value) != 10 or not value[0].isalpha() or not value[1:].isdigit() or value[1] not in "1289":
        return False
    n = _TW_LETTERS.find(value[0].upper()) + 10
    if n < 10:
        return False
    total = n // 10 + (n % 10) * 9 + sum(int(d) * w for d, w in zip(value[1:9], range(8, 0, -1), strict=True))
    return (total + int(value[9])) % 10 == 0


def ssn_valid(value: str) -> bool:
    """US Social Security number ``AAA-GG-SSSS`` (SSA rules since 2011): area not 000, 666 or 900–999;
    group not 00; serial not 0000."""
    d = value.replace("-", "").replace(" ", "")
    if len(d) != 9 or not d.isdigit():
        return False
    area, group, serial = int(d[:3]), int(d[3:5]), int(d[5:])
    return area not in (0, 666) and area < 900 and group != 0 and serial != 0


_NINO_BAD_PREFIXES = frozenset({"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"})


def nino_valid(value: str) -> bool:
    """UK National Insurance number ``AB123456C`` (HMRC NIM39110): first letter not D F I Q U V, second
    not D F I O Q U V, prefix not BG GB NK KN TN NT ZZ, suffix A–D."""
    v = value.replace(" ", "").upper()
    if len(v) != 9 or not v[2:8].isdigit():
        return False
    a, b, suffix = v[0], v[1], v[8]
    return (
        a not in "DFIQUV"
        and b not in "DFIOQUV"
        and v[:2] not in _NINO_BAD_PREFIXES
        and suffix in "ABCD"
        and a.isalpha()
        and b.isalpha()
    )


_VERHOEFF_D = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 2, 3, 4, 0, 6, 7, 8, 9, 5),
    (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
    (3, 4, 0, 1, 2, 8, 9, 5, 6, 7),
    (4, 0, 1, 2, 3, 9, 5, 6, 7, 8),
    (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
    (6, 5, 9, 8, 7, 1, 0, 4, 3, 2),
    (7, 6, 5, 9, 8, 2, 1, 0, 4, 3),
    (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
    (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
)
_VERHOEFF_P = (
    (0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 5, 7, 6, 2, 8, 3, 0, 9, 4),
    (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
    (8, 9, 1, 6, 0, 4, 3, 5, 2, 7),
    (9, 4, 5, 3, 1, 2, 6, 8, 7, 0),
    (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
    (2, 7, 9, 3, 8, 0, 6, 4, 1, 5),
    (7, 0, 4, 6, 9, 1, 3, 2, 5, 8),
)


def aadhaar_valid(value: str) -> bool:
    """Indian Aadhaar number: 12 digits, first 2–9, Verhoeff check digit (UIDAI)."""
    d = value.replace(" ", "").replace("-", "")
    if len(d) != 12 or not d.isdigit() or d[0] in "01":
        return False
    c = 0
    for i, ch in enumerate(reversed(d)):
        c = _VERHOEFF_D[c][_VERHOEFF_P[i % 8][int(ch)]]
    return c == 0


def krrn_valid(value: str) -> bool:
    """South Korean resident registration number ``YYMMDD-SXXXXXC``: a real birth date (century from the
    sex digit S: 1/2 → 1900s, 3/4 → 2000s) and the check digit (weights 2–9,2–5; (11 - sum mod 11) mod 10)."""
    d = value.replace("-", "")
    if len(d) != 13 or not d.isdigit() or d[6] not in "1234":
        return False
    century = 1900 if d[6] in "12" else 2000
    if not _date_ok(century + int(d[:2]), int(d[2:4]), int(d[4:6]), None):
        return False
    total = sum(int(c) * w for c, w in zip(d[:12], (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5), strict=True))
    return (11 - total % 11) % 10 == int(d[12])
