"""Detectors of identifiers written in words: postal addresses and dates of birth (person names:
``names.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from .numbers import _DIGIT, Hit

# --- postal addresses -------------------------------------------------------------------------------------
_PROVINCES = (
    "北京",
    "天津",
    "上海",
    "重庆",
    "河北",
    "山西",
    "辽宁",
    "吉林",
    "黑龙江",
    "江苏",
    "浙江",
    "安徽",
    "福建",
    "江西",
    "山东",
    "河南",
    "湖北",
    "湖南",
    "广东",
    "海南",
    "四川",
    "贵州",
    "云南",
    "陕西",
    "甘肃",
    "青海",
    "台湾",
    "内蒙古",
    "广西",
    "西藏",
    "宁夏",
    "新疆",
    "香港",
    "澳门",
)
_ADDR_LABEL = r"(?:住址|住所地|住所|地址|现住|住|户籍地|居住地|居住于|寄往|送达地址|家住|通讯地址|联系地址)[\s:：]{0,2}"
_CN = r"[\u4e00-\u9fff]"
_ADDR_LABELS = (
    "住所地",
    "住址",
    "住所",
    "地址",
    "现住",
    "户籍地",
    "居住地",
    "居住于",
    "寄往",
    "送达地址",
    "家住",
    "通讯地址",
    "联系地址",
)
_ADDR_RE = re.compile(
    r"(?:(?:"
    + "|".join(sorted(_ADDR_LABELS, key=len, reverse=True))
    + r"|(?<=[，,。；;\s])住)[\s:：]{0,2}(?:为|是|在)?"
    r"|(?=" + "|".join(_PROVINCES) + "))"
    r"(?P<addr>(?:" + _CN + r"{2,4}?(?:省|自治区|特别行政区))?"
    r"(?:" + _CN + r"{2,5}?(?:市|自治州|地区|盟))?"
    r"(?:" + _CN + r"{1,6}?(?:区|县|旗|市))?"
    r"(?:" + _CN + r"{1,6}?(?:镇|乡|街道))?"
    r"(?:" + _CN + r"{1,8}?(?:村|社区|小区|开发区|园区))?"
    r"[\u4e00-\u9fff0-9]{1,10}?(?:路|街|大道|道|巷|胡同|弄|里|村)(?:[一二三四五六七八九十]段)?[0-9]{1,5}(?:-[0-9]{1,5})?号"
    r"(?:院|大院)?(?:[0-9A-Z]{1,4}(?:栋|幢|座|号楼|楼))?(?:[0-9]{1,3}单元)?(?:[0-9]{1,5}(?:室|房|号))?)"
)
_EN_ADDR_RE = re.compile(
    r"\b\d{1,5} (?:[A-Z][a-z]+ ){1,3}(?:Street|Avenue|Road|Boulevard|Lane|Drive|Court|Way|Place|Terrace|Close|"
    r"(?:St|Ave|Rd|Blvd|Ln|Dr|Ct|Pl)\.?)(?![A-Za-z])(?:,? (?:Apt|Suite|Unit|Flat)\.? ?[0-9A-Z]{1,5})?"
    r"(?:, [A-Z][a-z]+(?: [A-Z][a-z]+)?)?(?:, [A-Z]{2} \d{5}(?:-\d{4})?)?"
)


# International addresses, anchored at their postcode. UK: the postcode format of the Royal Mail (outward
# code ``A9``/``A9A``/``A99``/``AA9``/``AA9A``/``AA99``, inward code ``9AA``); US: a USPS state or territory
# code and a ZIP (+4); India: a 6-digit PIN code after a dash; Germany: street + number, 5-digit
# Postleitzahl and the town. What comes before the anchor runs back to the house number (``Flat 3, 12``,
# ``H.No. 12-2-831``, ``No. 45``) over at most four comma-separated parts of capitalised words (a PIN code
# is taken as 6 digits: forms carry mistyped ones with a leading 0 too).
_CAP = r"[A-ZÀ-ÖØ-Þ][\w'’.\-]*"
_WORDS = rf"{_CAP}(?: {_CAP}){{0,3}}"
_PART = r"[A-Za-z0-9][\w'’.\-]*(?: [A-Za-z0-9][\w'’.\-]*){0,3}"
_US_STATES = frozenset(
    re.findall(
        r"\w+",
        "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM NY"
        " NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY DC AS GU MP PR VI FM MH PW AA AE AP",
    )
)
_UK_ADDR_RE = re.compile(
    rf"(?<![\w])(?:(?:Flat|Apartment|Unit) \d{{1,4}}[A-Z]?, )?\d{{1,5}}[A-Z]?,? {_WORDS}(?:, {_WORDS}){{1,3}},? "
    r"[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}(?![\w])"
)
_US_ADDR_RE = re.compile(
    rf"(?<![\w])\d{{1,6}} {_WORDS}(?:,? (?:Apt|Suite|Unit|Ste|#)\.? ?[0-9A-Z]{{1,6}})?, {_WORDS}, "
    r"(?P<state>[A-Z]{2}) \d{5}(?:-\d{4})?(?![\w-])"
)
_IN_ADDR_RE = re.compile(
    r"(?<![\w])(?:(?:H\. ?No\.|House No\.|Flat No\.|Plot No\.|Door No\.|No\.) ?)?\d[\dA-Z/\-]{0,12},"
    rf"(?: {_PART},){{0,4}} {_PART} ?- ?\d{{6}}(?![\d])"
)
# What makes a comma-separated run ending in 6 digits an Indian address: a house-number label or a locality
# word in it, or an address label before it (``Volume 2 - 123456`` is none).
_IN_HINT_RE = re.compile(
    r"\b(?:H\. ?No|House No|Flat No|Plot No|Door No|No\.)|\b(?:Nagar|Road|Marg|Street|Cross|Colony|Layout|Lane|Chowk"
    r"|Ganj|Zila|Path|Sector|Main|Circle|Bagh|Puram|Vihar|Enclave|Halli|Pally|Gali|Mohalla|Block|Phase|Market)\b"
)
_IN_LABEL_RE = re.compile(r"[Aa]ddress|residing at|resident of|R/o")
_UK_POSTCODE_RE = re.compile(r"[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}(?![\w])")
_US_ZIP_RE = re.compile(r"\b[A-Z]{2} \d{5}(?:-\d{4})?(?![\w-])")
_IN_PIN_RE = re.compile(r" ?- ?\d{6}(?![\d])")
_DE_PLZ_RE = re.compile(r", \d{5} [A-ZÄÖÜ]")
_DE_SUFFIX = (
    r"(?i:straße|strasse|str\.|weg|platz|allee|gasse|ring|damm|ufer|chaussee|steig|pfad|markt|hof"
    r"|berg|tor|promenade|stieg|zeile|garten|park|kai|wall|graben|feld|bogen|anger|winkel|twiete|kamp)"
)
# A street: one word ending in a street word (``Lindenstraße``, ``Walter-Beyer-Ring``); right after a field
# separator also two words (``Alte Landstraße``, ``Koch IIgasse``) — elsewhere a German noun may stand before it.
_DE_STREET = rf"[A-ZÄÖÜ][\wäöüß.\-]*{_DE_SUFFIX}"
_DE_ADDR_RE = re.compile(
    rf"(?<![\w])(?:(?:Am|An der|Im|In der|Auf der|Unter den) [A-ZÄÖÜ][\wäöüß.\-]*|{_DE_STREET}"
    rf"|(?:(?<=, )|(?<=: )|(?<=\n))[A-ZÄÖÜ][\wäöüß\-]* [\wäöüß.\-]*{_DE_SUFFIX}) "
    r"\d{1,4}[a-z]?(?:[-/]\d{1,4}[a-z]?)?, \d{5} (?:Bad )?[A-ZÄÖÜ][\wäöüß\-]*(?:\.(?=\w))?[\wäöüß\-]*"
    r"(?:(?: (?:am|an der|im|in der|ob der|bei|vor der)) [A-ZÄÖÜ][\wäöüß\-]+| \([A-ZÄÖÜ][\wäöüß.\-]+\)"
    r"|(?<=er) [A-ZÄÖÜ][\wäöüß\-]+)?"
)


def detect_address(work: str) -> Iterator[Hit]:
    """Postal addresses down to a house number: a Chinese address starts at a province name or right after
    an address label (``住址``, ``住所地``, ``现住`` …) and runs through optional province / city / district /
    town / village levels to a road (路, 街, 大道, 巷, 胡同, 弄 …) with a number and ``号``, then optional
    building, unit and room (also after ``地址是``, with a road section ``二段``); region names alone
    (``北京市海淀区``) and document numbers stay. An English address is a house number, one to three
    capitalised words and a street type, optional unit, city and ``ST 12345`` state + ZIP. UK, US, Indian
    and German addresses are anchored at their postcodes (Royal Mail postcode, USPS state + ZIP, PIN code
    with a locality word or an address label, street + number + Postleitzahl + town) and run back to the
    house number."""
    if "号" in work:
        for m in _ADDR_RE.finditer(work):
            yield Hit("ADDRESS", m.start("addr"), m.end("addr"), "address:cn-pattern", 0.9)
    if _DIGIT.search(work) is not None:
        for m in _EN_ADDR_RE.finditer(work):
            yield Hit("ADDRESS", m.start(), m.end(), "address:en-pattern", 0.85)
        for s, e, _ in _ending_at(_UK_ADDR_RE, _UK_POSTCODE_RE, work):
            yield Hit("ADDRESS", s, e, "address:uk-postcode", 0.85)
        for s, e, m in _ending_at(_US_ADDR_RE, _US_ZIP_RE, work):
            if m.group("state") in _US_STATES:
                yield Hit("ADDRESS", s, e, "address:us-zip", 0.85)
        for s, e, m in _ending_at(_IN_ADDR_RE, _IN_PIN_RE, work):
            if _IN_HINT_RE.search(m.group()) or _IN_LABEL_RE.search(work[max(0, s - 30) : s]):
                yield Hit("ADDRESS", s, e, "address:in-pin", 0.8)
        if _DE_PLZ_RE.search(work) is not None:
            for m in _DE_ADDR_RE.finditer(work):
                yield Hit("ADDRESS", m.start(), m.end(), "address:de-plz", 0.85)


def _ending_at(
    pattern: re.Pattern[str], anchor: re.Pattern[str], work: str
) -> Iterator[tuple[int, int, re.Match[str]]]:
    """``(start, end, match)`` of the longest match of ``pattern`` that ends where a match of ``anchor`` (the
    postcode) ends, looked for only in the 200 characters before each anchor (the full patterns are slow to
    try at every position of a long text)."""
    last_end = -1
    for a in anchor.finditer(work):
        lo = max(0, a.start() - 200, last_end)
        window = work[lo : a.end()]
        m = _at_end(pattern).search(window)
        if m is not None and (m.start() or lo == 0 or not work[lo - 1].isalnum()):
            last_end = a.end()
            yield lo + m.start(), lo + m.end(), m


@cache
def _at_end(pattern: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(f"(?:{pattern.pattern})\\Z", pattern.flags)


# --- dates of birth ------------------------------------------------------------------------------------------
_MONTHS = (
    r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec|Januar|Februar|März|Mai|Juni|Juli|Oktober|Dezember)"
    r"[a-z]*\.?"
)
_DATE = (
    r"(?:(?:19|20)\d{2}年\d{1,2}月(?:\d{1,2}日)?|(?:19|20)\d{2}[-/.]\d{1,2}[-/.]\d{1,2}"
    r"|\d{1,2}[/.\-]\d{1,2}[/.\-](?:19|20)\d{2}|" + _MONTHS + r" \d{1,2}, (?:19|20)\d{2}"
    r"|\d{1,2}\.? " + _MONTHS + r" (?:19|20)\d{2})"
)
_DOB_BEFORE_RE = re.compile(
    r"(?:出生日期|出生年月日?|生日|出生于|生于|出生时间|DOB|D\.O\.B\.?|[Dd]ate of [Bb]irth|[Bb]irth ?[Dd]ate"
    r"|[Bb]orn(?: on)?|Geburtsdatum|Geb\.-Datum|[Gg]eb\.|[Gg]eboren(?: am)?)"
    r"\s*[:：]?\s*(?P<date>" + _DATE + ")"
)
_DOB_HINT_RE = re.compile(r"生|DOB|D\.O\.B|irth|orn|eburt|eb\.")  # cheap: the labels' letters
_DOB_AFTER_RE = re.compile(r"(?P<date>" + _DATE + r")\s*(?:出生|生人|生)(?![产效活存命])")


def detect_birth_date(work: str) -> Iterator[Hit]:
    """Dates of birth, only with context: after ``出生日期``/``生日``/``出生于``/``DOB``/``Date of birth``/
    ``born on`` …, or before ``出生`` / ``生`` (``1985年6月12日出生``, as judgments write it). Any other date
    stays. Formats: ``1990年3月7日`` (day optional), ``1990-03-07`` / ``/`` / ``.``, ``07/03/1990``,
    ``March 7, 1990``, ``7 March 1990``."""
    if not _DIGIT.search(work) is not None:
        return
    if _DOB_HINT_RE.search(work) is None:
        return
    for m in _DOB_BEFORE_RE.finditer(work):
        yield Hit("BIRTH_DATE", m.start("date"), m.end("date"), "dob:label", 0.95)
    if "生" in work:
        for m in _DOB_AFTER_RE.finditer(work):
            yield Hit("BIRTH_DATE", m.start("date"), m.end("date"), "dob:born", 0.9)
