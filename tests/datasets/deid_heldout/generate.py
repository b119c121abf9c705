"""Generate the held-out de-identification set: ``dev.jsonl`` (for tuning) and ``test.jsonl`` (frozen).

    .venv/bin/python tests/datasets/deid_heldout/generate.py [--dev-only]

Why a second set: ``../deid_set`` was written by the detector's author, one identifier per sentence, from
the same list of labels the detector looks for. This one is built by a different method:

- **Document shapes, not sentences**: templates of records as they are written in the field (Chinese chat
  logs exported from a messenger, customer records, medical notes, HR records, court filings; UK, German,
  Indian and US forms and letters; log files of servers and applications). A record holds several
  identifiers and a lot of text that only looks like one (timestamps, order and case numbers, amounts,
  versions, ports, masked numbers, hotlines, statute citations, organisation and place names, the names of
  public figures in citations of law).
- **Values from Faker** (``zh_CN``, ``en_GB``, ``de_DE``, ``en_IN``, ``en_US``; seeded): person names,
  streets, cities, postcodes, e-mail addresses, card numbers, resident ID numbers. Phone numbers are
  Faker's, kept only when valid in their country's numbering plan (``phonenumbers``; real numbers are);
  where Faker has no valid generator (UK National Insurance, US SSN, Aadhaar, UnionPay cards, Chinese
  social-insurance numbers in city formats, licence plates) the value is drawn here by the issuer's rules.
- **Hand-written records** (``handwritten.txt``): a few of every shape, written by hand with the markup
  below, for what templates do not vary (two-character names, a name glued to a phone number, names after
  role words, cards with a failed check digit, numbers glued to full-width punctuation …).
- The templates of each shape are split: even-numbered ones fill the dev part, odd-numbered ones the
  test part, so the test part holds sentence shapes that tuning on dev never saw; hand-written records
  alternate between the parts in file order. Different seeds for the two parts.

Markup (templates and ``handwritten.txt``): ``{TYPE:factory}`` inserts a labelled identifier made by
``factory``; ``{factory}`` inserts text that is not an identifier; ``{TYPE:factory#1}`` repeats the
record's first value of that factory (the same speaker twice); in ``handwritten.txt`` ``⟦TYPE|value⟧``
labels a literal value. Label conventions (what a careful person redacting by hand would mark):

- ``NAME``: a person's name (full name, or a given name + family name; an English or German family name
  after Mr/Mrs/Ms/Dr/Herr/Frau); the span is the name alone, without title or honorific. A Chinese
  surname alone with a title (``王老师``, ``李先生``, ``张总``), ``小王``/``老李`` and pseudonyms (``张某``)
  are not labelled, nor are public figures in citations of law (``毛泽东思想``) or names inside
  organisation names.
- ``PHONE``: the number as written, with its country code and extension; masked numbers
  (``138****5678``) and service numbers (400/800, 0800, 1-800) are not labelled.
- ``BANK_CARD``: the whole number in its grouping; ``ID_NUMBER``: mainland resident IDs; ``NATIONAL_ID``:
  US SSN, UK NINO, Aadhaar and Chinese social-insurance numbers in a city's own format.
- ``ADDRESS``: a postal address down to the house number (Chinese: from the province or city through
  the room; UK/US/India/Germany: from the house number or street through the postcode).
- ``BIRTH_DATE``: a date only where it is the person's date of birth.
- ``IP``: every address of a host (a labeller cannot tell a user's machine from a server), except
  loopback and unspecified addresses (``127.0.0.1``, ``::1``, ``0.0.0.0``), which identify nothing.
- Timestamps, dates, order/case/invoice numbers, masked numbers and MAC-like codes are never labelled.

Each record: ``{"id", "part", "shape", "locale", "source": "template" | "hand", "text", "spans": [[type,
start, end, value]]}``. Freezing: ``test.jsonl``'s SHA-256 is in ``FROZEN`` beside this file and asserted by
``tests/datasets/test_deid_heldout.py``; this script refuses to overwrite a frozen ``test.jsonl`` (it writes
``dev.jsonl`` only, or nothing with ``--check``). Made with Faker 40.63.0 and phonenumbers as installed.
"""

# ruff: noqa: E501 - templates read better on one line
from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path

import phonenumbers
from faker import Faker

HERE = Path(__file__).parent
FROZEN = HERE / "FROZEN"
SEEDS = {"dev": 20261202, "test": 20261203}
LOCALES = ("zh_CN", "en_GB", "de_DE", "en_IN", "en_US")
# Dates are drawn relative to this day, not today, so the parts regenerate byte for byte.
ANCHOR = dt.datetime(2024, 12, 1, 12, 0, 0, tzinfo=dt.UTC)
_PERSONAL = (
    phonenumbers.PhoneNumberType.MOBILE,
    phonenumbers.PhoneNumberType.FIXED_LINE,
    phonenumbers.PhoneNumberType.FIXED_LINE_OR_MOBILE,
)


class Values:
    """Value factories of one part (``rng`` and one seeded Faker per locale)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.fk = {}
        for i, loc in enumerate(LOCALES):
            f = Faker(loc)
            f.seed_instance(seed * 10 + i)
            self.fk[loc] = f

    # --- helpers -----------------------------------------------------------------------------------
    def d(self, n: int) -> str:
        return "".join(self.rng.choice("0123456789") for _ in range(n))

    def pick(self, *options: str) -> str:
        return self.rng.choice(options)

    # --- names ---------------------------------------------------------------------------------------
    def zh_name(self) -> str:
        return self.fk["zh_CN"].name()

    def zh_name2(self) -> str:  # a two-character name
        f = self.fk["zh_CN"]
        for _ in range(50):
            n = f.name()
            if len(n) == 2:
                return n
        return f.last_name() + f.first_name()[:1]

    def zh_surname(self) -> str:
        return self.fk["zh_CN"].last_name()

    def en_name(self, loc: str) -> str:
        f = self.fk[loc]
        return f"{f.first_name()} {f.last_name()}"

    def gb_name(self) -> str:
        return self.en_name("en_GB")

    def de_name(self) -> str:
        return self.en_name("de_DE")

    def in_name(self) -> str:
        return self.en_name("en_IN")

    def us_name(self) -> str:
        return self.en_name("en_US")

    def gb_last(self) -> str:
        return self.fk["en_GB"].last_name()

    def de_last(self) -> str:
        return self.fk["de_DE"].last_name()

    def us_last(self) -> str:
        return self.fk["en_US"].last_name()

    def in_last(self) -> str:
        return self.fk["en_IN"].last_name()

    # --- phones --------------------------------------------------------------------------------------
    def _valid_phone(self, loc: str, region: str) -> phonenumbers.PhoneNumber:
        f = self.fk[loc]
        for _ in range(200):
            raw = f.phone_number()
            try:
                num = phonenumbers.parse(raw, region)
            except phonenumbers.NumberParseException:
                continue
            kind = phonenumbers.number_type(num)
            if phonenumbers.is_valid_number(num) and kind in _PERSONAL and not num.extension:
                return num
        raise RuntimeError(f"no valid {region} number from Faker {loc}")

    def _fmt(self, num: phonenumbers.PhoneNumber) -> str:
        style = self.rng.random()
        if style < 0.45:
            return phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.NATIONAL)
        if style < 0.85:
            return phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
        return phonenumbers.format_number(num, phonenumbers.PhoneNumberFormat.E164)

    def gb_phone(self) -> str:
        return self._fmt(self._valid_phone("en_GB", "GB"))

    def de_phone(self) -> str:
        return self._fmt(self._valid_phone("de_DE", "DE"))

    def in_phone(self) -> str:
        return self._fmt(self._valid_phone("en_IN", "IN"))

    def us_phone(self) -> str:
        num = self._valid_phone("en_US", "US")
        nat = str(num.national_number)
        return self.pick(
            f"({nat[:3]}) {nat[3:6]}-{nat[6:]}",
            f"{nat[:3]}-{nat[3:6]}-{nat[6:]}",
            f"+1 {nat[:3]}-{nat[3:6]}-{nat[6:]}",
            f"{nat[:3]}.{nat[3:6]}.{nat[6:]}",
        )

    def cn_mobile_digits(self) -> str:
        num = self._valid_phone("zh_CN", "CN")
        while phonenumbers.number_type(num) != phonenumbers.PhoneNumberType.MOBILE:
            num = self._valid_phone("zh_CN", "CN")
        return str(num.national_number)

    def mobile(self) -> str:
        """A mainland mobile as people write it: plain, 3-4-4 with dashes or spaces, with +86."""
        m = self.cn_mobile_digits()
        return self.pick(
            m,
            m,
            m,
            f"{m[:3]}-{m[3:7]}-{m[7:]}",
            f"{m[:3]} {m[3:7]} {m[7:]}",
            f"+86 {m}",
            f"+86-{m[:3]}-{m[3:7]}-{m[7:]}",
        )

    def mobile_plain(self) -> str:
        return self.cn_mobile_digits()

    def landline(self) -> str:
        """A mainland landline: area code (3 or 4 digits) + 7/8-digit number, with or without separators."""
        area, local = self.pick(
            ("010", 8),
            ("021", 8),
            ("020", 8),
            ("0755", 8),
            ("0571", 8),
            ("025", 8),
            ("028", 8),
            ("027", 8),
            ("0512", 8),
            ("0731", 8),
            ("0898", 8),
            ("0371", 8),
        )
        for _ in range(100):
            n = self.rng.choice("2345678") + self.d(local - 1)
            num = phonenumbers.parse(area + n, "CN")
            if phonenumbers.is_valid_number(num):
                break
        return self.pick(
            f"{area}-{n}", f"{area}{n}", f"({area}){n}", f"（{area}）{n}", f"{area} {n}", f"{area}-{n[:4]}-{n[4:]}"
        )

    def landline_local(self) -> str:
        """A landline without its area code (8 digits, as written on a form of one city)."""
        n = self.rng.choice("2345678") + self.d(7)
        return self.pick(n, f"{n[:4]}-{n[4:]}", f"{n[:4]} {n[4:]}")

    # --- numbers of identity ------------------------------------------------------------------------
    def id18(self) -> str:
        return self.fk["zh_CN"].ssn()

    def id18_grouped(self) -> str:
        v = self.id18()
        return self.pick(f"{v[:6]} {v[6:14]} {v[14:]}", f"{v[:6]}-{v[6:14]}-{v[14:]}", v)

    def si_number(self) -> str:
        """A Chinese social-insurance number in a city's own format (after its label): Shenzhen 社保电脑号
        (9 digits), Guangzhou 个人电脑号 (10 digits), a card number of the national social-security card
        (a letter + 8 digits), a medical-insurance number (12 digits)."""
        return self.pick(
            self.d(1).replace("0", "6") + self.d(8),
            "1" + self.d(9),
            self.rng.choice("ABCDEFGHJK") + self.d(8),
            "1" + self.d(11),
        )

    def ssn(self) -> str:
        while True:
            a = self.rng.randint(1, 899)
            if a != 666:
                return f"{a:03d}-{self.rng.randint(1, 99):02d}-{self.rng.randint(1, 9999):04d}"

    def nino(self) -> str:
        first = self.rng.choice("ABCEGHJKLMNOPRSTWXYZ")
        second = self.rng.choice("ABCEGHJKLMNPRSTWXYZ")
        while first + second in {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}:
            second = self.rng.choice("ABCEGHJKLMNPRSTWXYZ")
        body = self.d(6)
        suffix = self.rng.choice("ABCD")
        return self.pick(
            f"{first}{second}{body}{suffix}", f"{first}{second} {body[:2]} {body[2:4]} {body[4:]} {suffix}"
        )

    def aadhaar(self) -> str:
        d_ = (
            (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 2, 3, 4, 0, 6, 7, 8, 9, 5), (2, 3, 4, 0, 1, 7, 8, 9, 5, 6),
            (3, 4, 0, 1, 2, 8, 9, 5, 6, 7), (4, 0, 1, 2, 3, 9, 5, 6, 7, 8), (5, 9, 8, 7, 6, 0, 4, 3, 2, 1),
            (6, 5, 9, 8, 7, 1, 0, 4, 3, 2), (7, 6, 5, 9, 8, 2, 1, 0, 4, 3), (8, 7, 6, 5, 9, 3, 2, 1, 0, 4),
            (9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
        )  # fmt: skip
        p = (
            (0, 1, 2, 3, 4, 5, 6, 7, 8, 9), (1, 5, 7, 6, 2, 8, 3, 0, 9, 4), (5, 8, 0, 3, 7, 9, 6, 1, 4, 2),
            (8, 9, 1, 6, 0, 4, 3, 5, 2, 7), (9, 4, 5, 3, 1, 2, 6, 8, 7, 0), (4, 2, 8, 6, 5, 7, 3, 9, 0, 1),
            (2, 7, 9, 3, 8, 0, 6, 4, 1, 5), (7, 0, 4, 6, 9, 1, 3, 2, 5, 8),
        )  # fmt: skip
        inv = (0, 4, 3, 2, 1, 5, 6, 7, 8, 9)
        body = self.rng.choice("23456789") + self.d(10)
        c = 0
        for i, ch in enumerate(reversed(body)):
            c = d_[c][p[(i + 1) % 8][int(ch)]]
        v = body + str(inv[c])
        return self.pick(f"{v[:4]} {v[4:8]} {v[8:]}", v, f"{v[:4]}-{v[4:8]}-{v[8:]}")

    def passport_cn(self) -> str:
        return "E" + self.d(8)

    def passport_gb(self) -> str:
        return self.d(9)

    def plate(self) -> str:
        prov = self.rng.choice("京津沪渝冀豫云辽黑湘皖鲁苏浙赣鄂桂甘晋陕吉闽贵粤川")
        office = self.rng.choice("ABCDEFGHJK")
        tail = "".join(self.rng.choice("0123456789ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(2)) + self.d(3)
        return self.pick(f"{prov}{office}{tail}", f"{prov}{office}·{tail}", f"{prov}{office}{tail}")

    # --- cards ---------------------------------------------------------------------------------------
    def _luhn_complete(self, body: str) -> str:
        total = 0
        for i, c in enumerate(reversed(body)):
            v = int(c)
            if i % 2 == 0:
                v *= 2
                if v > 9:
                    v -= 9
            total += v
        return body + str((10 - total % 10) % 10)

    def _group(self, digits: str) -> str:
        style = self.rng.random()
        if style < 0.4:
            return digits
        sep = self.pick(" ", " ", "-")
        if len(digits) == 15:
            return sep.join([digits[:4], digits[4:10], digits[10:]])
        return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))

    def unionpay(self) -> str:
        prefix = self.pick("622202", "622848", "621700", "622588", "622609", "621226", "623668", "622262")
        length = self.pick("16", "19", "19")
        return self._group(self._luhn_complete(prefix + self.d(int(length) - 7)))

    def unionpay_bad_luhn(self) -> str:
        """A 19-digit card of a known Chinese issuer prefix whose check digit fails."""
        good = self._luhn_complete(self.pick("622202", "622848", "621700", "622588") + self.d(12))
        bad = good[:-1] + str((int(good[-1]) + self.rng.randint(1, 9)) % 10)
        return self._group(bad)

    def card(self) -> str:
        f = self.fk["en_US"]
        return self._group(
            f.credit_card_number(card_type=self.pick("visa16", "mastercard", "amex", "discover", "jcb16"))
        )

    # --- addresses -----------------------------------------------------------------------------------
    def zh_address(self) -> str:
        f = self.fk["zh_CN"]
        prov = self.pick("广东省", "浙江省", "江苏省", "四川省", "湖北省", "山东省", "河南省", "福建省", "")
        city = f.city_name() + "市"
        dist = f.district() + "区"
        road = f.street_name().rstrip("街路") + self.pick("路", "街", "大道", "路")
        no = f"{self.rng.randint(1, 999)}号"
        rest = self.pick(
            "",
            f"{self.rng.randint(1, 30)}栋{self.rng.randint(1, 4)}单元{self.rng.randint(1, 30)}0{self.rng.randint(1, 6)}室",
            f"{self.rng.randint(1, 20)}号楼{self.rng.randint(1, 30)}0{self.rng.randint(1, 4)}室",
            "",
        )
        return prov + city + dist + road + no + rest

    def zh_address_city(self) -> str:
        """A municipality's address: 北京市朝阳区…路…号."""
        f = self.fk["zh_CN"]
        city = self.pick("北京市", "上海市", "天津市", "重庆市")
        dist = self.pick("朝阳区", "海淀区", "浦东新区", "徐汇区", "和平区", "渝中区", "西城区", "静安区")
        road = f.street_name().rstrip("街路") + self.pick("路", "街", "大街", "路")
        return f"{city}{dist}{road}{self.rng.randint(1, 300)}号{self.pick('', f'{self.rng.randint(1, 30)}号楼{self.rng.randint(1, 9)}0{self.rng.randint(1, 9)}室')}"

    def gb_address(self) -> str:
        f = self.fk["en_GB"]
        return f"{self.pick('', 'Flat ' + str(self.rng.randint(1, 30)) + ', ')}{self.rng.randint(1, 250)} {f.street_name()}, {f.city()}, {f.postcode()}"

    def de_address(self) -> str:
        f = self.fk["de_DE"]
        return f"{f.street_name()} {self.rng.randint(1, 180)}{self.pick('', '', 'a', 'b')}, {f.postcode()} {f.city()}"

    def in_address(self) -> str:
        f = self.fk["en_IN"]
        return f"{self.pick('H.No. ', 'Flat No. ', '')}{self.rng.randint(1, 400)}, {f.street_name()}, {f.city()} - {f.postcode()}"

    def us_address(self) -> str:
        f = self.fk["en_US"]
        return f"{f.building_number()} {f.street_name()}, {f.city()}, {f.state_abbr()} {f.zipcode()}"

    # --- e-mail, IP, dates -----------------------------------------------------------------------------
    def email(self) -> str:
        loc = self.rng.choice(LOCALES)
        return self.fk[loc].email() if self.rng.random() < 0.6 else self.fk[loc].free_email()

    def ipv4(self) -> str:
        return self.fk["en_US"].ipv4_public()

    def ntp_server(self) -> str:
        return self.pick("203.107.6.88", "120.25.115.20", "182.92.12.11")

    def ipv6(self) -> str:
        return self.fk["en_US"].ipv6()

    def _dob(self):
        return self.fk["en_US"].date_between(
            start_date=ANCHOR.date() - dt.timedelta(days=90 * 365), end_date=ANCHOR.date() - dt.timedelta(days=18 * 365)
        )

    def dob_iso(self) -> str:
        return self._dob().isoformat()

    def dob_zh(self) -> str:
        b = self._dob()
        return f"{b.year}年{b.month}月{b.day}日"

    def dob_gb(self) -> str:
        b = self._dob()
        return self.pick(f"{b.day:02d}/{b.month:02d}/{b.year}", b.strftime("%-d %B %Y"))

    def dob_us(self) -> str:
        b = self._dob()
        return self.pick(f"{b.month:02d}/{b.day:02d}/{b.year}", b.strftime("%B %-d, %Y"))

    def dob_de(self) -> str:
        b = self._dob()
        return f"{b.day:02d}.{b.month:02d}.{b.year}"

    # --- text that is not an identifier ------------------------------------------------------------
    TS_STYLES = (
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%d %H:%M:%S,{ms3}",
        "%Y-%m-%dT%H:%M:%S.{ms3}+08:00",
        "%Y-%m-%d %H:%M",
        "%Y/%m/%d %H:%M:%S",
        "%Y-%m-%dT%H:%M:%SZ",
        "%Y%m%d %H%M%S",
        "%Y-%m-%d %H",
    )

    def begin_record(self) -> None:
        """One timestamp style per record (a log or a chat export prints one), references cleared."""
        self.ts_style = self.rng.choice(self.TS_STYLES)
        self.refs: dict[str, str] = {}

    def ts(self) -> str:
        """A log or chat timestamp in the record's style."""
        t = self.fk["en_US"].date_time_between(start_date=ANCHOR - dt.timedelta(days=3 * 365), end_date=ANCHOR)
        return t.strftime(self.ts_style).replace("{ms3}", self.d(3))

    def ts_syslog(self) -> str:
        return (
            self.fk["en_US"]
            .date_time_between(start_date=ANCHOR - dt.timedelta(days=365), end_date=ANCHOR)
            .strftime("%b %d %H:%M:%S")
        )

    def ts_clf(self) -> str:
        return (
            self.fk["en_US"]
            .date_time_between(start_date=ANCHOR - dt.timedelta(days=365), end_date=ANCHOR)
            .strftime("%d/%b/%Y:%H:%M:%S +0800")
        )

    def hhmm(self) -> str:
        return f"{self.rng.randint(0, 23):02d}:{self.rng.randint(0, 59):02d}"

    def hhmmss(self) -> str:
        return f"{self.hhmm()}:{self.rng.randint(0, 59):02d}"

    def date(self) -> str:
        t = self.fk["en_US"].date_between(start_date=ANCHOR.date() - dt.timedelta(days=5 * 365), end_date=ANCHOR.date())
        return self.pick(
            t.isoformat(), f"{t.year}年{t.month}月{t.day}日", t.strftime("%Y/%m/%d"), t.strftime("%Y.%m.%d")
        )

    def date_en(self) -> str:
        t = self.fk["en_US"].date_between(start_date=ANCHOR.date() - dt.timedelta(days=2 * 365), end_date=ANCHOR.date())
        return self.pick(t.strftime("%-d %B %Y"), t.strftime("%d/%m/%Y"), t.isoformat())

    def date_de(self) -> str:
        t = self.fk["de_DE"].date_between(start_date=ANCHOR.date() - dt.timedelta(days=2 * 365), end_date=ANCHOR.date())
        return self.pick(t.strftime("%d.%m.%Y"), t.strftime("%-d. %B %Y"))

    def order(self) -> str:
        return self.pick(self.d(18), "E" + self.d(16), self.d(14), "SO" + self.d(10))

    def tracking(self) -> str:
        return self.pick("SF" + self.d(13), "YT" + self.d(13), "JD" + self.d(15), "7" + self.d(11))

    def amount(self) -> str:
        return self.pick(
            f"{self.rng.randint(1, 99999)}.{self.d(2)}",
            str(self.rng.randint(100, 9_999_999)),
            f"{self.rng.randint(1, 999)},{self.d(3)}.{self.d(2)}",
        )

    def qty(self) -> str:
        return str(self.rng.randint(1, 500))

    def small(self) -> str:
        return str(self.rng.randint(1, 30))

    def age(self) -> str:
        return str(self.rng.randint(18, 95))

    def hr(self) -> str:
        return str(self.rng.randint(52, 118))

    def pid(self) -> str:
        return str(self.rng.randint(100, 65000))

    def port(self) -> str:
        return str(self.rng.randint(1024, 65535))

    def uid(self) -> str:
        return str(self.rng.randint(10000, 99999999))

    def ms(self) -> str:
        return str(self.rng.randint(1, 9999))

    def masked(self) -> str:
        m = self.cn_mobile_digits()
        return self.pick(f"{m[:3]}****{m[7:]}", f"{m[:3]}****{m[7:]}", f"****{self.d(4)}", f"{m[:3]}******{m[9:]}")

    def case_no(self) -> str:
        return f"（{self.rng.randint(2018, 2025)}）{self.pick('京0105', '沪0115', '粤0304', '浙0102', '川01')}{self.pick('民初', '民终', '刑初', '执')}{self.rng.randint(100, 39999)}号"

    def hotline(self) -> str:
        return self.pick("400-820-8820", "95588", "95533", "400 610 1234", "800-820-1234", "12345", "4008208820")

    def version(self) -> str:
        return f"{self.rng.randint(1, 9)}.{self.rng.randint(0, 20)}.{self.rng.randint(0, 99)}"

    def emp_no(self) -> str:
        return self.pick("E" + self.d(5), "HR-" + self.d(6), self.d(6))

    def bed(self) -> str:
        return f"{self.rng.randint(1, 40)}床"

    def inpatient(self) -> str:
        return self.pick("ZY" + self.d(10), self.d(8), "MZ" + self.d(9))

    def org_zh(self) -> str:
        return self.fk["zh_CN"].company()

    def org_en(self) -> str:
        return self.fk[self.rng.choice(("en_GB", "en_US", "de_DE", "en_IN"))].company()

    def city_zh(self) -> str:
        return self.fk["zh_CN"].city_name()

    def level(self) -> str:
        return self.pick("INFO", "INFO", "WARN", "ERROR", "DEBUG")

    def http(self) -> str:
        return self.pick("200", "200", "304", "404", "500", "201")

    def path(self) -> str:
        return self.pick(
            "/api/v1/orders",
            "/login",
            "/api/v2/users/profile",
            "/static/app.js",
            "/checkout/confirm",
            "/api/v1/payments/callback",
        )

    def nhs_like(self) -> str:  # a reference number in a letter (not an identifier of a person's own)
        return self.pick("REF/" + self.d(6), "Our ref: " + self.d(4) + "/" + self.d(2), "Claim " + self.d(8))


# --- templates per shape -------------------------------------------------------------------------------
# Each entry: (shape, locale, template). Template lines are joined with "\n" when given as a tuple.
T = list[tuple[str, str, str]]

ZH_CHAT: list[str] = [
    "{ts} {NAME:zh_name#1}\n在吗？我的快递单号{tracking}一直没到\n{ts} 客服小美\n您好，请提供一下收件人手机号\n{ts} {NAME:zh_name#1}\n{PHONE:mobile}",
    "[{ts}] {NAME:zh_name#1}: 明天下午{hhmm}在公司楼下见\n[{ts}] {NAME:zh_name#2}: 好的，到了打我电话{PHONE:mobile}\n[{ts}] {NAME:zh_name#1}: OK",
    "{ts} {NAME:zh_name2#1}：王老师，孩子今天发烧请假一天\n{ts} 王老师：收到，注意休息\n{ts} {NAME:zh_name2#1}：谢谢老师",
    "{NAME:zh_name} {ts}\n房子还在吗？我想周六{hhmm}去看\n房东{NAME:zh_name} {ts}\n在的，地址是{ADDRESS:zh_address}，到了给我打电话{PHONE:mobile}",
    "{ts} 群主{NAME:zh_name#1}\n@所有人 本周团建费用每人{amount}元，转给{NAME:zh_name2}，收款卡号{BANK_CARD:unionpay}\n{ts} {NAME:zh_name}\n已转",
    "[{ts}] 店长{NAME:zh_name#1}：订单{order}已经发货，顺丰{tracking}\n[{ts}] 买家：好的谢谢\n[{ts}] 店长{NAME:zh_name#1}：有问题联系售后{hotline}",
    "{ts}\n{NAME:zh_name#1}：你把身份证号发我一下，帮你订票\n{ts}\n{NAME:zh_name#2}：{ID_NUMBER:id18}，手机{PHONE:mobile}\n{ts}\n{NAME:zh_name#1}：好",
    "{ts} 司机{NAME:zh_name2}\n我到小区门口了，车牌{LICENSE_PLATE:plate}，白色的\n{ts} 乘客\n马上下来，{hhmm}前到",
    "{ts} {NAME:zh_name#1}：会议改到{hhmm}，会议号{uid}\n{ts} {NAME:zh_name#2}：收到\n{ts} {NAME:zh_name#3}：我可能晚{small}分钟\n{ts} {NAME:zh_name#1}：没事",
    "【{ts}】{NAME:zh_name#1}：医生说下周复查，挂号费{amount}元\n【{ts}】{NAME:zh_name#2}：我帮你约了{NAME:zh_name}医生，诊室电话{PHONE:landline}",
]
ZH_CUSTOMER: list[str] = [
    "客户姓名：{NAME:zh_name}\n联系电话：{PHONE:mobile}\n身份证号：{ID_NUMBER:id18}\n地址：{ADDRESS:zh_address}\n登记时间：{ts}\n备注：客户于{date}来电咨询，订单{order}",
    "会员编号 {uid} | 姓名 {NAME:zh_name} | 手机 {PHONE:mobile} | 邮箱 {EMAIL:email} | 注册时间 {ts} | 积分 {qty}",
    "工单{order}：用户{NAME:zh_name}反馈快递员{NAME:zh_name2}态度差，用户电话{PHONE:mobile}，已回访。处理时间 {ts}",
    "车主{NAME:zh_name}，车牌号{LICENSE_PLATE:plate}，手机{PHONE:mobile}，保单号{order}，出险时间{ts}，理赔金额{amount}元。",
    "开户申请\n户名：{NAME:zh_name}\n证件号码：{ID_NUMBER:id18_grouped}\n银行卡号：{BANK_CARD:unionpay}\n预留手机：{PHONE:mobile}\n办理网点：{org_zh}",
    "投诉记录：投诉人{NAME:zh_name}（电话{PHONE:mobile}）称其信用卡{BANK_CARD:unionpay}于{date}被盗刷{amount}元，客服{NAME:zh_name}已受理，单号{order}。",
    "收货人：{NAME:zh_name}，{PHONE:mobile}，{ADDRESS:zh_address_city}；订单金额{amount}元；下单时间{ts}。",
    "注册人{NAME:zh_name}，邮箱{EMAIL:email}，于{ts}通过IP {IP:ipv4} 完成实名认证，证件{ID_NUMBER:id18}。",
    "旅客{NAME:zh_name}，护照号{PASSPORT:passport_cn}，航班CA{qty}，{date}出发，紧急联系人{NAME:zh_name}，电话{PHONE:mobile}。",
    "客户{NAME:zh_name}名下储蓄卡 {BANK_CARD:unionpay_bad_luhn} 挂失，办理时间{ts}，经办柜员{emp_no}，客服热线{hotline}。",
    "停车场登记：{LICENSE_PLATE:plate}，入场{ts}，车主{NAME:zh_name2}，电话{PHONE:mobile}，月卡到期{date}。",
    "出入境预约：申请人{NAME:zh_name}，护照号码{PASSPORT:passport_cn}，电子邮箱{EMAIL:email}，预约时间{date} {hhmm}。",
    "物业报修｜业主：{NAME:zh_name}｜房号：{small}栋{qty}室｜电话：{PHONE:mobile}｜车位车牌：{LICENSE_PLATE:plate}｜报修时间：{ts}",
    "账户资料修改：{NAME:zh_name}将绑定邮箱由{EMAIL:email}改为{EMAIL:email}，操作IP {IP:ipv4}，时间{ts}。",
]
ZH_MEDICAL: list[str] = [
    "患者{NAME:zh_name}，女，{age}岁，出生日期：{BIRTH_DATE:dob_iso}，住院号{inpatient}，{bed}。主诉：反复咳嗽{small}天。入院时间{ts}。主治医生：{NAME:zh_name}。",
    "门诊病历\n姓名：{NAME:zh_name}  性别：男  出生日期：{BIRTH_DATE:dob_zh}\n联系电话：{PHONE:mobile}\n就诊时间：{ts}\n诊断：2型糖尿病，予二甲双胍0.5g tid。",
    "{NAME:zh_name2}，男，{BIRTH_DATE:dob_zh}出生，因“胸痛{small}小时”于{ts}急诊入院，既往高血压病史{small}年。家属{NAME:zh_name}，电话{PHONE:mobile}。",
    "护理记录 {ts}：患者{NAME:zh_name}体温38.{small}℃，心率{hr}次/分，血压130/85mmHg，已通知值班医生{NAME:zh_name}。",
    "转诊单：兹有患者{NAME:zh_name}（身份证{ID_NUMBER:id18}，医保号{NATIONAL_ID:si_number}）转至{org_zh}进一步治疗。转诊医生{NAME:zh_name}，{date}。",
    "检验报告  标本号{inpatient}  姓名 {NAME:zh_name}  年龄 {age}岁  送检时间 {ts}  白细胞 6.{qty}×10^9/L  审核：{NAME:zh_name}",
    "出院小结：患者{NAME:zh_name}于{date}入院，{date}出院，共住院{small}天。出院后{small}周复诊，咨询电话{PHONE:landline}。",
    "预约挂号成功：就诊人{NAME:zh_name}，就诊卡号{inpatient}，{date} {hhmm} 心内科{NAME:zh_name}主任医师，请提前{small}分钟到达。",
]
ZH_HR: list[str] = [
    "员工档案\n工号：{emp_no}\n姓名：{NAME:zh_name}\n出生日期：{BIRTH_DATE:dob_iso}\n身份证号：{ID_NUMBER:id18}\n社保电脑号：{NATIONAL_ID:si_number}\n工资卡：{BANK_CARD:unionpay}\n入职日期：{date}",
    "{NAME:zh_name}，工号{emp_no}，{date}入职，岗位：销售经理，直属上级{NAME:zh_name}，手机{PHONE:mobile}，邮箱{EMAIL:email}。",
    "离职交接单：离职员工{NAME:zh_name}（{emp_no}）将客户资料移交给同事{NAME:zh_name2}，交接日期{date}，部门负责人签字：{NAME:zh_name}",
    "社保增员：{NAME:zh_name}，个人编号{NATIONAL_ID:si_number}，缴费基数{amount}元，参保日期{date}，联系电话{PHONE:mobile}。",
    "面试安排：候选人{NAME:zh_name}，{date} {hhmm}，面试官{NAME:zh_name}、{NAME:zh_name2}，候选人电话{PHONE:mobile}，简历编号{uid}。",
    "报销单 {order}：报销人{NAME:zh_name}，金额{amount}元，收款账户{BANK_CARD:unionpay}，审批人{NAME:zh_name}，提交时间{ts}。",
    "劳动合同\n甲方：{org_zh}\n乙方：{NAME:zh_name}  身份证号码：{ID_NUMBER:id18}\n住址：{ADDRESS:zh_address}\n联系电话：{PHONE:mobile}\n合同期限自{date}起。",
    "考勤异常：{NAME:zh_name}于{date} {hhmm}打卡，迟到{small}分钟；{NAME:zh_name}于{hhmm}打卡正常。",
]
ZH_COURT: list[str] = [
    "民事起诉状\n原告：{NAME:zh_name}，男，{BIRTH_DATE:dob_zh}出生，汉族，住{ADDRESS:zh_address}，公民身份号码{ID_NUMBER:id18}，联系电话{PHONE:mobile}。\n被告：{NAME:zh_name}，女，汉族，住{ADDRESS:zh_address_city}。\n诉讼请求：判令被告偿还借款{amount}元。",
    "{case_no}\n原告{NAME:zh_name#1}与被告{org_zh}劳动争议一案，本院于{date}立案后，依法适用简易程序，公开开庭进行了审理。原告{NAME:zh_name#1}及其委托诉讼代理人{NAME:zh_name}到庭参加诉讼。",
    "申请人：{NAME:zh_name}，住{ADDRESS:zh_address}。\n被申请人：{NAME:zh_name}，联系电话{PHONE:mobile}。\n申请事项：请求冻结被申请人名下银行卡{BANK_CARD:unionpay}内存款{amount}元。",
    "本院认为，依照《中华人民共和国民法典》第六百六十七条、第六百七十五条及《最高人民法院关于适用〈中华人民共和国民事诉讼法〉的解释》第九十条之规定，判决如下：被告{NAME:zh_name}于本判决生效之日起十日内偿还原告{NAME:zh_name}借款{amount}元。",
    "证人{NAME:zh_name}出庭作证称，{date}其在{city_zh}看见被告驾驶车牌号为{LICENSE_PLATE:plate}的车辆离开。审判长{NAME:zh_name}，书记员{NAME:zh_name2}。",
    "委托书：委托人{NAME:zh_name}现委托{org_zh}律师{NAME:zh_name}为我的诉讼代理人，律师电话{PHONE:landline}。委托日期{date}。",
    "坚持以马克思列宁主义、毛泽东思想、邓小平理论为指导，被告人{NAME:zh_name}，{BIRTH_DATE:dob_zh}生，因涉嫌诈骗罪于{date}被刑事拘留。辩护人{NAME:zh_name}。",
    "执行通知书 {case_no}：被执行人{NAME:zh_name}（身份证号{ID_NUMBER:id18}），应于{date}前履行给付义务{amount}元，申请执行人{NAME:zh_name}。",
]
LOGS: list[str] = [
    "{ts} {level} [main] c.e.auth.LoginService - login ok uid={uid} phone={PHONE:mobile_plain} ip={IP:ipv4} cost={ms}ms\n{ts} {level} [main] c.e.auth.LoginService - session created uid={uid}\n{ts} {level} [http-nio-{port}-exec-{qty}] c.e.order.OrderService - order {order} paid amount={amount}",
    "{ts_syslog} web{qty} sshd[{pid}]: Failed password for invalid user admin from {IP:ipv4} port {port} ssh2\n{ts_syslog} web{qty} sshd[{pid}]: Accepted publickey for deploy from {IP:ipv4} port {port} ssh2\n{ts_syslog} web{qty} systemd[1]: Started Session {qty} of user deploy.",
    '{IP:ipv4} - - [{ts_clf}] "GET {path}?page={qty} HTTP/1.1" {http} {ms} "-" "Mozilla/5.0"\n{IP:ipv4} - - [{ts_clf}] "POST {path} HTTP/1.1" {http} {ms} "-" "okhttp/4.9.{qty}"',
    "[{ts}] {level} PaymentService: charge failed for card {BANK_CARD:card} (order {order}), retry in {small}s\n[{ts}] {level} PaymentService: refund {amount} CNY to order {order} done\n[{ts}] {level} PaymentService: gateway latency {ms}ms",
    "{ts} {level} sms-gateway send template=SMS_{uid} to={PHONE:mobile_plain} status=OK msgid={order}\n{ts} {level} sms-gateway send template=SMS_{uid} to={masked} status=OK\n{ts} {level} sms-gateway quota left {qty}",
    "{ts}|{level}|user-center|update profile uid={uid} email={EMAIL:email} nickname=小{qty} took {ms}ms\n{ts}|{level}|user-center|cache hit ratio 0.9{qty}\n{ts}|{level}|user-center|version {version} started on port {port}",
    'time={ts} level={level} msg="request" method=GET path={path} status={http} latency={ms}ms client_ip={IP:ipv4} trace_id={order}\ntime={ts} level={level} msg="db slow query" took={ms}ms rows={qty}',
    "{ts} {level} kernel: [{ms}.{pid}] eth0: link up, 1000Mbps\n{ts} {level} dhcpd: DHCPACK on {IP:ipv4} to 3c:22:fb:{qty}:1a:0e via eth0\n{ts} {level} ntpd[{pid}]: synchronized to {IP:ntp_server}, stratum 2",
]
GB: list[str] = [
    "Dear {NAME:gb_name},\n\nThank you for your letter of {date_en}. Your claim ({nhs_like}) has been received and will be assessed within 10 working days. If you have any questions please call us on 0800 123 4567 or write to us.\n\nYours sincerely,\n{NAME:gb_name}\nClaims Team",
    "PATIENT REGISTRATION FORM\nName: {NAME:gb_name}\nDate of birth: {BIRTH_DATE:dob_gb}\nAddress: {ADDRESS:gb_address}\nTelephone: {PHONE:gb_phone}\nEmail: {EMAIL:email}\nNational Insurance number: {NATIONAL_ID:nino}\nRegistered on {date_en}",
    "Dear Mrs {NAME:gb_last},\n\nFurther to our telephone conversation on {date_en}, I enclose the tenancy agreement for {ADDRESS:gb_address}. Please sign and return it by {date_en}. The rent of £{amount} is due on the 1st of each month.\n\nKind regards,\n{NAME:gb_name}\nLetting Agent, {org_en}",
    "Employee: {NAME:gb_name}   Payroll no. {emp_no}   NI number: {NATIONAL_ID:nino}   Tax code 1257L   Start date {date_en}   Mobile {PHONE:gb_phone}",
    "Referral letter\n\nRe: {NAME:gb_name}, DOB {BIRTH_DATE:dob_gb}\n\nI would be grateful if you could see this patient, who has had intermittent chest pain for {small} weeks. ECG on {date_en} was normal.\n\nDr {NAME:gb_name}\nGeneral Practitioner",
    "PASSPORT RENEWAL\nFull name (as on your birth certificate): {NAME:gb_name}\nPrevious passport number: {PASSPORT:passport_gb}\nDaytime telephone: {PHONE:gb_phone}\nCountersignatory: {NAME:gb_name}, known to the applicant since {date_en}",
    "Order confirmation {order}\nDeliver to: {NAME:gb_name}, {ADDRESS:gb_address}\nTotal £{amount} paid by card ending 4421 on {date_en}. Questions? Call 0345 600 1234.",
    "Minutes of the residents' meeting, {date_en}. Present: {NAME:gb_name} (chair), {NAME:gb_name}, {NAME:gb_name}. Apologies from Mr {NAME:gb_last}. The next meeting is on {date_en} at {hhmm}.",
]
DE: list[str] = [
    "Sehr geehrte Frau {NAME:de_last},\n\nvielen Dank für Ihre Anfrage vom {date_de}. Wir haben Ihre Kundennummer {uid} geprüft. Bitte rufen Sie uns unter {PHONE:de_phone} an.\n\nMit freundlichen Grüßen\n{NAME:de_name}\nKundenservice",
    "Anmeldung\nName: {NAME:de_name}\nGeburtsdatum: {BIRTH_DATE:dob_de}\nAnschrift: {ADDRESS:de_address}\nTelefon: {PHONE:de_phone}\nE-Mail: {EMAIL:email}",
    "Sehr geehrter Herr {NAME:de_last},\n\nhiermit kündige ich meinen Mietvertrag für die Wohnung {ADDRESS:de_address} fristgerecht zum {date_de}.\n\nMit freundlichen Grüßen\n{NAME:de_name}",
    "Rechnung Nr. {order} vom {date_de}\nKunde: {NAME:de_name}, {ADDRESS:de_address}\nBetrag: {amount} EUR, zahlbar bis {date_de}. Bei Fragen: {PHONE:de_phone}",
    "Arztbrief: Wir berichten über Herrn {NAME:de_name}, geb. {BIRTH_DATE:dob_de}, der sich am {date_de} in unserer Notaufnahme vorstellte. Diagnose: akute Bronchitis. Mit kollegialen Grüßen, Dr. {NAME:de_name}",
    "Protokoll der Sitzung vom {date_de}, Beginn {hhmm} Uhr. Anwesend: {NAME:de_name}, {NAME:de_name}, {NAME:de_name}. Entschuldigt: Frau {NAME:de_last}.",
]
IN: list[str] = [
    "APPLICATION FORM\nName: {NAME:in_name}\nDate of Birth: {BIRTH_DATE:dob_gb}\nAadhaar No.: {NATIONAL_ID:aadhaar}\nMobile: {PHONE:in_phone}\nAddress: {ADDRESS:in_address}\nEmail: {EMAIL:email}",
    "To,\nThe Branch Manager,\n{org_en}\n\nSubject: Request to update mobile number\n\nSir, I, {NAME:in_name}, hold savings account no. {uid}{uid} with your branch. Kindly update my mobile number to {PHONE:in_phone}.\n\nYours faithfully,\n{NAME:in_name}",
    "Dear {NAME:in_name},\nYour booking {order} for {date_en} is confirmed. Please carry your Aadhaar card ({NATIONAL_ID:aadhaar}) for verification. For help call 1800 180 1234.",
    "Rent agreement made on {date_en} between {NAME:in_name} (Owner), residing at {ADDRESS:in_address}, and {NAME:in_name} (Tenant), mobile {PHONE:in_phone}. Monthly rent Rs. {amount}.",
    "Patient: {NAME:in_name}, Age {age}, DOB {BIRTH_DATE:dob_gb}, OPD No. {inpatient}, consulting Dr. {NAME:in_name} on {date_en} at {hhmm}.",
    "KYC update: customer {NAME:in_name}, Aadhaar {NATIONAL_ID:aadhaar}, card {BANK_CARD:card}, registered mobile {PHONE:in_phone}, updated on {ts}.",
]
US: list[str] = [
    "INTAKE FORM\nPatient name: {NAME:us_name}\nDOB: {BIRTH_DATE:dob_us}\nSSN: {NATIONAL_ID:ssn}\nPhone: {PHONE:us_phone}\nAddress: {ADDRESS:us_address}\nInsurance ID {order}\nVisit date {date_en} {hhmm}",
    "Progress note {date_en}: {NAME:us_name} is a {age}-year-old seen for follow-up of hypertension. BP 132/84, HR {hr}. Continue lisinopril 10 mg daily. Return in {small} weeks. Signed, {NAME:us_name}, MD",
    "Dear Mr. {NAME:us_last},\n\nWe have received your payment of ${amount} for invoice {order}. Your card {BANK_CARD:card} was charged on {date_en}. For questions call 1-800-555-0199.\n\nSincerely,\n{NAME:us_name}",
    "Employment verification: {NAME:us_name} (SSN {NATIONAL_ID:ssn}) has been employed by {org_en} since {date_en}. Contact HR at {PHONE:us_phone} or {EMAIL:email}.",
    "Ship to: {NAME:us_name}, {ADDRESS:us_address}. Phone {PHONE:us_phone}. Order {order}, {qty} items, ${amount}.",
    "Emergency contact: {NAME:us_name} (spouse), {PHONE:us_phone}. Patient {NAME:us_name}, born {BIRTH_DATE:dob_us}, allergic to penicillin.",
    "Vehicle registration: owner {NAME:us_name}, {ADDRESS:us_address}, e-mail {EMAIL:email}, registered {date_en}, fee ${amount}.",
    "Travel itinerary for {NAME:us_name}: passport on file, flight UA{qty} departs {date_en} {hhmm}. Questions: {EMAIL:email} or {PHONE:us_phone}.",
]

SHAPES: dict[str, tuple[str, list[str]]] = {
    "zh-chat": ("zh_CN", ZH_CHAT),
    "zh-customer": ("zh_CN", ZH_CUSTOMER),
    "zh-medical": ("zh_CN", ZH_MEDICAL),
    "zh-hr": ("zh_CN", ZH_HR),
    "zh-court": ("zh_CN", ZH_COURT),
    "log": ("en_US", LOGS),
    "gb-letter-form": ("en_GB", GB),
    "de-letter-form": ("de_DE", DE),
    "in-letter-form": ("en_IN", IN),
    "us-letter-form": ("en_US", US),
}
PER_TEMPLATE = {"dev": 5, "test": 8}  # records made from each template of the part

_FIELD = re.compile(r"\{(?:(?P<type>[A-Z_]+):)?(?P<factory>[a-z_0-9]+)(?:#(?P<ref>[0-9]))?\}")
_HAND = re.compile(r"⟦(?P<type>[A-Z_]+)\|(?P<value>[^⟧]+)⟧")


def render(template: str, values: Values) -> tuple[str, list[list[object]]]:
    """Fill ``template``; returns ``(text, spans)``."""
    out: list[str] = []
    spans: list[list[object]] = []
    pos = 0
    length = 0
    values.begin_record()
    for m in _FIELD.finditer(template):
        lit = template[pos : m.start()]
        out.append(lit)
        length += len(lit)
        factory: Callable[[], str] = getattr(values, m.group("factory"))
        ref = f"{m.group('factory')}#{m.group('ref')}" if m.group("ref") else None
        if ref is not None and ref in values.refs:
            value = values.refs[ref]
        else:
            value = factory()
            if ref is not None:
                values.refs[ref] = value
        if m.group("type"):
            spans.append([m.group("type"), length, length + len(value), value])
        out.append(value)
        length += len(value)
        pos = m.end()
    out.append(template[pos:])
    return "".join(out), spans


def parse_hand(text: str) -> tuple[str, list[list[object]]]:
    """``⟦TYPE|value⟧`` markup → ``(text, spans)``."""
    out: list[str] = []
    spans: list[list[object]] = []
    pos = 0
    length = 0
    for m in _HAND.finditer(text):
        lit = text[pos : m.start()]
        out.append(lit)
        length += len(lit)
        value = m.group("value")
        spans.append([m.group("type"), length, length + len(value), value])
        out.append(value)
        length += len(value)
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), spans


def hand_records() -> list[dict[str, object]]:
    """The records of ``handwritten.txt``: blocks separated by a line ``---`` and headed by
    ``# shape locale``; the body is the record's text (``\\n`` kept)."""
    raw = (HERE / "handwritten.txt").read_text(encoding="utf-8")
    records = []
    for block in raw.split("\n---\n"):
        lines = block.strip("\n").split("\n")
        lines = [ln for ln in lines if not ln.startswith(";")]  # ';' lines are comments
        if not lines or not lines[0].startswith("# "):
            continue
        shape, locale = lines[0][2:].split()
        text, spans = parse_hand("\n".join(lines[1:]))
        records.append({"shape": shape, "locale": locale, "source": "hand", "text": text, "spans": spans})
    return records


def build(part: str) -> list[dict[str, object]]:
    values = Values(SEEDS[part])
    want = 0 if part == "dev" else 1
    records: list[dict[str, object]] = []
    for shape, (locale, templates) in SHAPES.items():
        for ti, template in enumerate(templates):
            if ti % 2 != want:
                continue
            for _ in range(PER_TEMPLATE[part]):
                text, spans = render(template, values)
                records.append({"shape": shape, "locale": locale, "source": "template", "text": text, "spans": spans})
    for hi, rec in enumerate(hand_records()):
        if hi % 2 == want:
            records.append(rec)
    for i, rec in enumerate(records):
        rec["id"] = f"{part}-{i:04d}"
        rec["part"] = part
        for t, s, e, v in rec["spans"]:  # type: ignore[attr-defined]
            assert rec["text"][s:e] == v, (rec, t)  # type: ignore[index]
    return records


def dump(records: list[dict[str, object]]) -> bytes:
    keys = ("id", "part", "shape", "locale", "source", "text", "spans")
    return "".join(json.dumps({k: r[k] for k in keys}, ensure_ascii=False) + "\n" for r in records).encode()


def main(argv: list[str]) -> int:
    (HERE / "dev.jsonl").write_bytes(dump(build("dev")))
    test_path = HERE / "test.jsonl"
    data = dump(build("test"))
    if FROZEN.exists():
        frozen = FROZEN.read_text().split()[0]
        if hashlib.sha256(data).hexdigest() != frozen:
            print(
                "test part is frozen: not rewritten (its regenerated form differs from the frozen hash)",
                file=sys.stderr,
            )
        return 0
    if "--dev-only" not in argv:
        test_path.write_bytes(data)
        FROZEN.write_text(f"{hashlib.sha256(data).hexdigest()}  test.jsonl\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
