"""Detectors of identifier numbers and addresses of machines: e-mail, IP, resident and national ID
numbers, bank cards, passports, phone numbers, licence plates.

Each detector is ``detect(work) -> Iterator[Hit]`` over the normalised text (``normalize.py``) in which
spans found by earlier detectors are masked. A ``Hit`` carries its evidence: the rule that fired, a
confidence in [0, 1] and a note (e.g. ``"invalid check digit"``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import NamedTuple

import phonenumbers
from phonenumbers import Leniency, PhoneNumberMatcher, PhoneNumberType

from .checks import (
    aadhaar_valid,
    card_issuer,
    hkid_valid,
    id15_valid,
    id18_problems,
    krrn_valid,
    luhn_valid,
    nino_valid,
    ssn_valid,
    twid_valid,
)
from .times import mask_datetimes


class Hit(NamedTuple):
    """One detection in normalised-text offsets."""

    type: str
    start: int
    end: int
    rule: str
    confidence: float
    note: str = ""


def before(work: str, start: int, n: int) -> str:
    """The ``n`` characters before ``start`` (the context a label sits in)."""
    return work[max(0, start - n) : start]


def after(work: str, end: int, n: int) -> str:
    return work[end : end + n]


def _has(pattern: re.Pattern[str], text: str) -> bool:
    return pattern.search(text) is not None


# A number is a whole token: no ASCII letter or digit on either side, and on the right no ".digit" /
# "-digit" continuation.
_DIGIT = re.compile(r"\d")
_R = r"(?![0-9A-Za-z]|[.\-]\d)"

# --- e-mail ------------------------------------------------------------------------------------------------
_EMAIL_RE = re.compile(
    r"[A-Za-z0-9](?<![A-Za-z0-9._%+\-][A-Za-z0-9])[A-Za-z0-9._%+\-]{0,63}"
    r"@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+(?P<tld>[A-Za-z]{2,24})(?![A-Za-z0-9\-])"
)
# Retina-image and file names (``icon@2x.png``) look like addresses; their "TLD" is a file extension.
_FILE_EXT = frozenset(
    {
        "png",
        "jpg",
        "jpeg",
        "gif",
        "svg",
        "webp",
        "bmp",
        "ico",
        "pdf",
        "js",
        "css",
        "txt",
        "md",
        "py",
        "json",
        "html",
        "htm",
        "xml",
        "zip",
        "gz",
        "tar",
        "mp4",
        "mp3",
        "wav",
        "doc",
        "docx",
    }
)


def detect_email(work: str) -> Iterator[Hit]:
    """``local@domain.tld`` (ASCII, the practical subset of RFC 5322); a file-extension TLD is refused."""
    if "@" not in work:
        return
    for m in _EMAIL_RE.finditer(work):
        if m.group("tld").lower() in _FILE_EXT:
            continue
        yield Hit("EMAIL", m.start(), m.end(), "email:pattern", 0.99)


# --- IP addresses ------------------------------------------------------------------------------------------
_IPV6_HINT = re.compile(r"[0-9A-Fa-f]:[0-9A-Fa-f:]")
_IPV6_RE = re.compile(
    r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[0-9A-Za-z]+)?(?![0-9A-Za-z:])"
)
_IPV4_RE = re.compile(r"\d(?<![0-9A-Za-z.]\d)\d{0,2}\.(?:\d{1,3}\.){2}\d{1,3}(?!\.?\d|[A-Za-z])")
_IP_CONTEXT = re.compile(
    r"IP|[Ii]p|地址|address|[Hh]ost|服务器|server|登录|login|访问|\bfrom\b|\bto\b|源|目的|网关|gateway|DNS|ping"
)
_CLAUSE_BEFORE = re.compile(
    r"(?:第|§|[Ss]ection|[Cc]lause|[Aa]rt(?:icle|\.)?|条款?|款|项|章|节|[Vv]ersion|[Vv]er\.?|版本|[Vv]|见|依据|按照|根据|参照|No\.?)\s*$"
)
_CLAUSE_AFTER = re.compile(r"^\s*(?:条|款|项|节|章|版|部分|规定|要求|之规定|所述)")


def detect_ip(work: str) -> Iterator[Hit]:
    """IPv6 (``ipaddress.IPv6Address``; two or more non-empty groups, so ``::1`` and ``std::vector`` stay)
    and IPv4 (four octets 0–255 without leading zeros). Clause and version numbers (``4.2.1.3``, ``第3.1.2.4
    条``, ``v1.2.3.4``) are also valid IPv4 addresses, so an IPv4 needs either an IP context word within 12
    characters before it, or an octet of 32 or more and no clause/version marker around it."""
    if _has(_IPV6_HINT, work):
        for m in _IPV6_RE.finditer(work):
            addr = m.group().split("%", 1)[0]
            if sum(1 for g in addr.split(":") if g) < 2:
                continue
            try:
                ipaddress.IPv6Address(addr)
            except ValueError:
                continue
            yield Hit("IP", m.start(), m.end(), "ipv6:ipaddress", 0.98)
    if "." not in work:
        return
    for m in _IPV4_RE.finditer(work):
        value = m.group()
        try:
            if ipaddress.IPv4Address(value).is_loopback or value == "0.0.0.0":  # noqa: S104 - compared, not bound
                continue  # identifies no machine but the reader's own
        except ValueError:
            continue
        ctx = before(work, m.start(), 12)
        if _has(_CLAUSE_BEFORE, ctx) or _has(_CLAUSE_AFTER, after(work, m.end(), 6)):
            continue
        if _has(_IP_CONTEXT, ctx):
            yield Hit("IP", m.start(), m.end(), "ipv4:context", 0.97)
        elif max(int(o) for o in value.split(".")) >= 32:
            yield Hit("IP", m.start(), m.end(), "ipv4:octets", 0.85)


# --- mainland resident ID numbers, old and new; HK / Macau / Taiwan; travel permits ----------------------
_ID_LABEL = re.compile(r"身份证|身份号码|证件号|证件号码|公民身份|居民身份|ID\s*(?:No|number|card)|[Ii]dentity")
_ID18_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{5}(?P<s>[ \-]?)(?:\d{8}|\d{4}(?P=s)\d{4})(?P=s)\d{3}[0-9Xx]" + _R)
_ID18_LOOSE_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)(?:[ \-]?\d){16}[ \-]?[0-9Xx]" + _R)
_ID15_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{5}[ \-]?\d{6}[ \-]?\d{3}" + _R)
_HKID_RE = re.compile(r"[A-Z](?<![0-9A-Za-z][A-Z])[A-Z]?\d{6}(?:[(（][0-9A][)）]|[0-9A])" + _R)
_MOID_RE = re.compile(r"[1578](?<![0-9A-Za-z][1578])\d{6}[(（]?\d[)）]?" + _R)
_TWID_RE = re.compile(r"[A-Z](?<![0-9A-Za-z][A-Z])[1289]\d{8}" + _R)
_PERMIT_RE = re.compile(
    r"[0-9CHLMT](?<![0-9A-Za-z][0-9CHLMT])(?:(?<=[HM])\d{8}(?:\d{2})?|(?<=C)[A-Z0-9]\d{7}|(?<=[LT])\d{8}|(?<=\d)\d{7}(?:\d{2})?)"
    + _R
)
_HK_LABEL = re.compile(r"香港|HKID|[Hh]ong ?[Kk]ong|身份证")
_MO_LABEL = re.compile(r"澳门|[Mm]acau|[Mm]acao|BIR")
_PERMIT_LABEL = re.compile(r"通行证|回乡证|台胞证|[Pp]ermit|居住证")


def detect_id_number(work: str) -> Iterator[Hit]:
    """Mainland resident ID numbers (GB 11643-1999) written contiguously or grouped 6-8-4 / 6-4-4-4 with
    one kind of separator (spaces or dashes): valid province code, birth date and MOD 11-2 check digit.
    After an ID label (``身份证号：`` …, within 12 characters) any 17 digits + check character are replaced
    even when invalid, with the note naming what is wrong. Old 15-digit numbers (GB 11643-1989: province,
    YYMMDD, order) need the label, as do 15-digit business numbers that look alike. Hong Kong IDs by their
    check character (bare form after a label only), Taiwan IDs by theirs, Macau IDs and the mainland travel
    permits (``H``/``M`` + 8 or 10 digits, ``C…``, ``L…``, Taiwan compatriot permits) after their labels."""
    if _DIGIT.search(work) is not None:
        for m in _ID18_RE.finditer(work):
            digits = m.group().replace(" ", "").replace("-", "")
            problems = id18_problems(digits)
            labelled = _has(_ID_LABEL, before(work, m.start(), 12))
            if not problems:
                yield Hit("ID_NUMBER", m.start(), m.end(), "id18:checksum", 0.99)
            elif labelled:
                yield Hit("ID_NUMBER", m.start(), m.end(), "id18:label", 0.75, "; ".join(problems))
        for m in _ID18_LOOSE_RE.finditer(work):  # other groupings: always validated
            digits = m.group().replace(" ", "").replace("-", "")
            if not id18_problems(digits):
                yield Hit("ID_NUMBER", m.start(), m.end(), "id18:checksum", 0.97)
        for m in _ID15_RE.finditer(work):
            if id15_valid(m.group().replace(" ", "").replace("-", "")) and _has(_ID_LABEL, before(work, m.start(), 12)):
                yield Hit("ID_NUMBER", m.start(), m.end(), "id15:label", 0.9)
        for m in _MOID_RE.finditer(work):
            if _has(_MO_LABEL, before(work, m.start(), 16)):
                yield Hit("ID_NUMBER", m.start(), m.end(), "macau-id:label", 0.9)
        for m in _PERMIT_RE.finditer(work):
            if _has(_PERMIT_LABEL, before(work, m.start(), 16)):
                yield Hit("ID_NUMBER", m.start(), m.end(), "travel-permit:label", 0.9)
    for m in _HKID_RE.finditer(work):
        bracketed = m.group()[-1] in ")）"
        if hkid_valid(m.group()) and (bracketed or _has(_HK_LABEL, before(work, m.start(), 16))):
            yield Hit("ID_NUMBER", m.start(), m.end(), "hkid:checksum", 0.95)
    for m in _TWID_RE.finditer(work):
        if twid_valid(m.group()):
            yield Hit("ID_NUMBER", m.start(), m.end(), "twid:checksum", 0.95)


# --- other national numbers --------------------------------------------------------------------------------
_SSN_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{2}(?P<s>[ \-])\d{2}(?P=s)\d{4}" + _R)
_SSN_BARE_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{8}" + _R)
_SSN_LABEL = re.compile(r"SSN|[Ss]ocial [Ss]ecurity|社会安全号|社保号")
_SSN_NOT = re.compile(
    r"[Pp]art|[Mm]odel|[Oo]rder|[Ii]nvoice|[Ll]ot|[Bb]atch|[Pp]hone|[Tt]el|[Ff]ax|ISBN|批号|编号|订单|型号|电话|合同"
)
_NINO_RE = re.compile(r"[A-Z](?<![0-9A-Za-z][A-Z])[A-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]" + _R)
_AADHAAR_RE = re.compile(r"[2-9](?<![0-9A-Za-z][2-9])\d{3}(?P<s>[ \-]?)\d{4}(?P=s)\d{4}" + _R)
_AADHAAR_LABEL = re.compile(r"[Aa]adhaar|UIDAI|आधार")
_KRRN_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)\d{5}-[1-4]\d{6}" + _R)


# Chinese social-insurance numbers. Since 2011 the national number (社会保障号码) is the resident ID number
# (found by ``detect_id_number``); cities still print their own: Shenzhen's 社保电脑号 (9 digits), Guangzhou's
# 个人电脑号 (10), the card number of the social-security card (社会保障卡卡号: a letter + 8 digits), medical
# insurance numbers (医保号, 8–12 digits, also in groups of 4). Only after such a label: the shapes alone are
# any number's.
_SI_LABEL_RE = re.compile(
    r"(?:(?:社会保障|社保|医保|医疗保险|参保)(?:卡|个人)?(?:号码|编号|卡号|电脑号|号)|个人电脑号|电脑号"
    r"|(?<=参保)人?编号)[\s:：]{0,3}(?=[0-9A-Z])"
)
# A record's own number field (个人编号, 人员编号) is a social-insurance number in a 社保/医保 record.
_SI_FIELD_RE = re.compile(r"(?:个人编号|人员编号|参保编号)[\s:：]{0,3}(?=[0-9A-Z])")
_SI_CONTEXT_RE = re.compile(r"社保|社会保险|社会保障|医保|医疗保险|参保")
_SI_VALUE_RE = re.compile(r"[A-Z]?\d{4}(?: ?\d{4}){1,2}(?:\d{1,3})?|[A-Z]?\d{8,12}")


def _social_insurance(work: str) -> Iterator[Hit]:
    labels = list(_SI_LABEL_RE.finditer(work))
    labels += [m for m in _SI_FIELD_RE.finditer(work) if _has(_SI_CONTEXT_RE, before(work, m.start(), 40))]
    for lab in labels:
        m = _SI_VALUE_RE.match(work, lab.end())
        if m is None or (m.end() < len(work) and work[m.end()].isalnum() and work[m.end()].isascii()):
            continue
        digits = sum(c.isdigit() for c in m.group())
        if 8 <= digits <= 12:
            yield Hit("NATIONAL_ID", m.start(), m.end(), "cn-social-insurance:label", 0.9)


def detect_national_id(work: str) -> Iterator[Hit]:
    """US SSN (SSA validity rules; ``AAA-GG-SSSS`` unless a part/order/phone word is near, or 9 bare digits
    after an SSN label), UK National Insurance numbers (HMRC prefix rules), Korean resident registration
    numbers (birth date + check digit), Indian Aadhaar numbers (Verhoeff, after an Aadhaar label) and
    Chinese social-insurance numbers in their city formats, after their labels (``社保电脑号``, ``医保号``,
    ``社保卡号``, ``个人编号`` of a 社保 record …; 8–12 digits, optionally a leading letter, in groups of 4)."""
    if not _DIGIT.search(work) is not None:
        return
    if "保" in work or "电脑号" in work:
        yield from _social_insurance(work)
    for m in _SSN_RE.finditer(work):
        ctx = before(work, m.start(), 24)
        if ssn_valid(m.group()) and (_has(_SSN_LABEL, ctx) or not _has(_SSN_NOT, ctx)):
            yield Hit("NATIONAL_ID", m.start(), m.end(), "us-ssn:format", 0.9)
    for m in _SSN_BARE_RE.finditer(work):
        if ssn_valid(m.group()) and _has(_SSN_LABEL, before(work, m.start(), 24)):
            yield Hit("NATIONAL_ID", m.start(), m.end(), "us-ssn:label", 0.9)
    for m in _NINO_RE.finditer(work):
        if nino_valid(m.group()):
            yield Hit("NATIONAL_ID", m.start(), m.end(), "uk-nino:format", 0.9)
    for m in _KRRN_RE.finditer(work):
        if krrn_valid(m.group()):
            yield Hit("NATIONAL_ID", m.start(), m.end(), "kr-rrn:checksum", 0.95)
    for m in _AADHAAR_RE.finditer(work):
        if aadhaar_valid(m.group()) and _has(_AADHAAR_LABEL, before(work, m.start(), 24)):
            yield Hit("NATIONAL_ID", m.start(), m.end(), "in-aadhaar:verhoeff+label", 0.95)


# --- bank cards ----------------------------------------------------------------------------------------------
_CARD_RE = re.compile(
    r"\d(?<![0-9A-Za-z]\d)(?<!\d[ \-]\d)(?:\d{12,18}"
    r"|\d{3}(?P<s1>[ \-])\d{4}(?:(?P=s1)\d{4}){1,2}(?:(?P=s1)\d{1,4})?"
    r"|\d{3}(?P<s2>[ \-])\d{6}(?P=s2)\d{4,5})" + _R
)
_CARD_LABEL = re.compile(
    r"卡号|银行卡|信用卡|借记卡|储蓄卡|贷记卡|银联卡|工资卡|[Cc]ard|CARD|Visa|VISA|Mastercard|MasterCard|Amex|持卡|刷卡|开户行"
    r"|卡\s*[:：]"
)
# 13–19 digits in any grouping of spaces or dashes (``6222 021000 1234 5678 1``, ``622202-1000123456781``).
_CARD_LOOSE_RE = re.compile(r"\d(?<![0-9A-Za-z]\d)(?<!\d[ \-]\d)(?:[ \-]?\d){12,18}" + _R)


def detect_bank_card(work: str) -> Iterator[Hit]:
    """Payment card numbers (ISO/IEC 7812-1 PAN), 13–19 digits, contiguous or grouped 4-4-4-4[-n], 4-6-4/5.

    After a card word within 16 characters (``卡号``, ``信用卡``, ``工资卡``, ``card``, ``Visa`` …) a
    Luhn-valid number is a card, and a Luhn-invalid 16–19-digit one in an issuer's range is still replaced
    with the note ``"fails Luhn"``; after a card word a number in an issuer's range is a card in any other
    grouping of spaces or dashes too (``6222 021000 1234 5678 1``), with or without a valid check digit.
    Without such a word the number must pass Luhn *and* lie in a card scheme's issuer range with a length
    that scheme issues (``checks.card_issuer``), so Luhn-passing account and order numbers outside those
    ranges stay."""
    if not _DIGIT.search(work) is not None:
        return
    for m in _CARD_RE.finditer(work):
        digits = m.group().replace(" ", "").replace("-", "")
        labelled = _has(_CARD_LABEL, before(work, m.start(), 16))
        luhn = luhn_valid(digits)
        if labelled and luhn:
            yield Hit("BANK_CARD", m.start(), m.end(), "card:luhn+label", 0.97)
        elif luhn and card_issuer(digits):
            yield Hit("BANK_CARD", m.start(), m.end(), f"card:luhn+bin({card_issuer(digits)})", 0.9)
        elif labelled and len(digits) >= 16 and card_issuer(digits):
            yield Hit("BANK_CARD", m.start(), m.end(), "card:label", 0.6, "fails Luhn")
    if _has(_CARD_LABEL, work):
        for m in _CARD_LOOSE_RE.finditer(work):  # any other grouping: only after a card word, in an issuer's range
            digits = m.group().replace(" ", "").replace("-", "")
            if card_issuer(digits) and _has(_CARD_LABEL, before(work, m.start(), 16)):
                note = "" if luhn_valid(digits) else "fails Luhn"
                yield Hit("BANK_CARD", m.start(), m.end(), "card:label+bin", 0.8 if not note else 0.6, note)


# --- passports -------------------------------------------------------------------------------------------
_PASSPORT_LABEL = re.compile(r"护照|[Pp]assport|PASSPORT|旅行证")
_PASSPORT_E_RE = re.compile(r"E(?<![0-9A-Za-z]E)[A-HJ-NP-Z]\d{7}" + _R)
_PASSPORT_CTX_RE = re.compile(
    r"[0-9A-Z](?<![0-9A-Za-z][0-9A-Z])(?:(?<=[EG])\d{8}|(?<=[DSP])E\d{7}|(?<=[A-Z])[A-Z]?\d{6,8}|(?<=\d)\d{8})" + _R
)


def detect_passport(work: str) -> Iterator[Hit]:
    """PRC e-passports ``E`` + letter (not I/O) + 7 digits anywhere; ``E``/``G`` + 8 digits, ``DE``/``SE``/
    ``PE`` + 7 digits and other countries' forms (1–2 letters + 6–8 digits, 9 digits) only after a passport
    word within 20 characters — batch and invoice codes have the same shape."""
    for m in _PASSPORT_E_RE.finditer(work):
        yield Hit("PASSPORT", m.start(), m.end(), "passport:cn-e-format", 0.9)
    if _has(_PASSPORT_LABEL, work):
        for m in _PASSPORT_CTX_RE.finditer(work):
            if _has(_PASSPORT_LABEL, before(work, m.start(), 20)):
                yield Hit("PASSPORT", m.start(), m.end(), "passport:label", 0.95)


# --- phone numbers (phonenumbers) ----------------------------------------------------------------------------
_PHONE_CAND = re.compile(
    r"(?<![0-9A-Za-z.\-+/_])(?:\+|[(（]\+?)?\d[\d \-.()（）]{5,24}\d"
    r"(?:\s?(?:转|分机|ext\.?|x)\s?\d{1,6})?(?![0-9A-Za-z]|[.\-][0-9A-Za-z])"
)
_CJK = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]")  # Han, CJK and full-width punctuation
_REGIONS_ZH = ("CN", "HK", "TW", "MO", "US", "GB", "DE", "JP", "KR", "IN", "SG", "FR", "AU")
_REGIONS_EN = ("US", "GB", "DE", "IN", "JP", "KR", "FR", "AU", "CA", "SG", "CN", "HK", "TW")
# Numbers of organisations, not of people: toll-free, premium-rate, shared-cost and UK 03 / universal access
# numbers (libphonenumber's UAN type).
_SERVICE_TYPES = frozenset(
    {PhoneNumberType.TOLL_FREE, PhoneNumberType.PREMIUM_RATE, PhoneNumberType.SHARED_COST, PhoneNumberType.UAN}
)
_UNIT_AFTER = re.compile(
    r"^\s*(?:股|元|万|亿|千|百|%|‰|美元|港元|港币|欧元|日元|人民币|块|吨|件|台|辆|份|张|次|人|户|个|笔|手|kg|KG|t\b|shares|yuan|CNY|RMB|USD)"
)
_MONEY_BEFORE = re.compile(r"(?:¥|￥|\$|€|£|人民币|金额|价款|合计|总计|共计|数量|股份|股数|余额|RMB|CNY|USD)\s*$")
_CN_MOBILE_SHAPE = re.compile(r"1[3-9]\d[ \-]?\d{4}[ \-]?\d{4}$")
_GERMAN = re.compile(r"[äöüß]|\b(?:Telefon|Straße|Herr|Frau|Sehr geehrte|Mit freundlichen|Anschrift|Rufnummer)\b")
_CN_LOCAL_RE = re.compile(r"[2-8]\d{2,3}[ \-]?\d{4}")
_EXT_RE = re.compile(r"(?:\s?(?:转|分机|ext\.?|x)\s?|-)\d{1,6}$")
_NOT_PHONE_LABEL = re.compile(
    r"ISBN|ISSN|[Oo]rder|[Bb]atch|[Ll]ot|[Ii]nvoice|[Ss]erial|[Pp]art|SKU|订单|批号|批次|编号|流水|序列号|单号|代码|备案|备|文号"
)
_PHONE_LABEL = re.compile(
    r"电话|手机|联系|热线|传真|致电|拨打|座机|Tel|TEL|tel|[Pp]hone|[Mm]obile|[Cc]all|[Ff]ax|Mobil|Handy|Rufnummer"
)
_TRANS = str.maketrans("（）", "()")


def detect_phone(work: str) -> Iterator[Hit]:
    """Phone numbers of any country, parsed and validated by ``phonenumbers`` (Google libphonenumber
    metadata). Candidates are runs of digits with spaces, dashes, dots and parentheses, optionally led by
    ``+`` and followed by an extension (``转123``, ``-8001``, ``ext. 12``); each is matched with
    ``PhoneNumberMatcher(leniency=VALID)`` under one region after another, and the first region that finds
    a valid number decides. The home region (CN when Chinese text is within 20 characters, else US) is
    tried first and needs no more; the others (HK, TW, GB, DE, IN, JP, KR, FR, AU …) only for a number
    written with ``+``, after a phone word, or in national form with a trunk ``0`` and separators — so
    8-digit codes are not taken for Hong Kong numbers. A ``+49…`` / ``+1…`` number is one candidate, so
    its country code goes with it. Not personal, so kept: toll-free, premium-rate and shared-cost numbers
    (US 1-800, CN 400/800); digit runs with a unit or money sign around them (``15000000000元``,
    ``12345678901 股``) unless a phone word is within 8 characters before; numbers after ISBN, order,
    batch, serial and similar labels; date and time shapes (``2024-03-15 14``, ``14:02:11``, ISO 8601, log
    prefixes: ``times.py``) are never candidates. In Chinese text a landline written without its area code
    (7–8 digits) counts after a phone word (``座机：87654321``), and a text with German words reads its
    national numbers as German first (``030 61203344`` is Berlin, not a UK 03 number)."""
    if not _DIGIT.search(work) is not None:
        return
    scan = mask_datetimes(work)  # a timestamp is never a phone number (times.py)
    for m in _PHONE_CAND.finditer(scan):
        cand = m.group()
        if sum(c.isdigit() for c in cand) < 7:
            continue
        ctx = before(work, m.start(), 12)
        if _has(_NOT_PHONE_LABEL, ctx):
            continue
        labelled = _has(_PHONE_LABEL, ctx)
        zh = _has(_CJK, work[max(0, m.start() - 20) : m.end() + 20])
        text = cand.translate(_TRANS)
        ext = _EXT_RE.search(text)
        main = text[: ext.start()] if ext else text
        foreign_ok = (
            labelled
            or main.startswith(("+", "(+"))
            or (main.lstrip("(").startswith("0") and any(c in main for c in " -()"))
            or (_CN_MOBILE_SHAPE.match(main) is not None)
        )  # a mainland mobile in English text (US is tried first)
        if zh and labelled and (_CN_LOCAL_RE.fullmatch(text) or _CN_LOCAL_RE.fullmatch(main)):
            # A mainland landline written without its area code (on a form of one city): 7–8 digits after a
            # phone word; phonenumbers cannot validate it without the area code.
            yield Hit("PHONE", m.start(), m.end(), "phone:CN-local+label", 0.9)
            continue
        regions: tuple[str, ...] = _REGIONS_ZH if zh else _REGIONS_EN
        if not zh and _has(_GERMAN, work[max(0, m.start() - 200) : m.end() + 200]):
            regions = ("DE", *(r for r in regions if r != "DE"))  # a German letter's 030 … is Berlin, not UK 03
        for i, region in enumerate(regions):
            if i > 0 and not foreign_ok:
                break
            found = list(PhoneNumberMatcher(text, region, leniency=Leniency.VALID))
            if not found and ext:
                found = list(PhoneNumberMatcher(main, region, leniency=Leniency.VALID))
            if not found:
                continue
            for pm in found:
                start, end = m.start() + pm.start, m.start() + pm.end
                if ext and pm.end == len(main):
                    end = m.end()  # the extension belongs to the number
                if work[start] in "(（" and not any(c in work[start:end] for c in ")）"):
                    start += 1  # an opening parenthesis that the number does not close
                if phonenumbers.number_type(pm.number) in _SERVICE_TYPES:
                    continue
                near_label = labelled or _has(_PHONE_LABEL, before(work, start, 8))
                if not near_label and (
                    _has(_UNIT_AFTER, after(work, end, 8)) or _has(_MONEY_BEFORE, before(work, start, 8))
                ):
                    continue
                rule = f"phone:{phonenumbers.region_code_for_number(pm.number) or region}"
                yield Hit("PHONE", start, end, rule, 0.97 if near_label else 0.92)
            break


# --- licence plates --------------------------------------------------------------------------------------------
_PLATE_RE = re.compile(
    r"[京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼使领][A-HJ-NP-Z][·•・\s]?"
    r"(?P<tail>[A-HJ-NP-Z0-9]{4,6})(?P<suffix>[挂学警港澳领试超])?(?![0-9A-Za-z])"
)


def detect_licence_plate(work: str) -> Iterator[Hit]:
    """Mainland licence plates (GA 36-2018): province abbreviation, issuing-office letter (not I/O), an
    optional separator dot, 5 characters (6 for new-energy plates starting or ending in D/F) with at least
    two digits, and an optional class character (挂, 学, 警, 港, 澳 …)."""
    for m in _PLATE_RE.finditer(work):
        tail = m.group("tail")
        if len(tail) == 4 and not m.group("suffix"):
            continue
        if sum(c.isdigit() for c in tail) < 2:
            continue
        if len(tail) == 6 and not (tail[0] in "DF" or tail[-1] in "DF"):
            continue
        yield Hit("LICENSE_PLATE", m.start(), m.end(), "plate:ga36", 0.9)
