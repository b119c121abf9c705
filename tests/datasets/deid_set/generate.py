"""Generate the labelled de-identification set ``deid_set.jsonl`` (synthetic; run from the repo root):

    .venv/bin/python tests/datasets/deid_set/generate.py

Rules (the file is committed; re-running with the same seed and library versions gives the same file):

- Every value is made up: random digits completed with the real check digit (resident IDs: GB 11643,
  cards: Luhn with a scheme's issuer prefix, HK/Taiwan IDs, SSN, NINO, Aadhaar Verhoeff, Korean RRN), phone
  numbers built from ``phonenumbers``' example number of a region with random trailing digits until
  ``phonenumbers`` calls them valid fixed-line or mobile numbers; names are a random surname of a short
  list plus random given-name characters; addresses combine real province and district names with made-up
  road names and numbers. No record holds real people's data.
- Each record is ``{"id", "type", "kind": "positive" | "negative", "lang": "zh" | "en", "text", "spans":
  [[type, start, end, value]]}``. A positive holds exactly one labelled identifier of its ``type`` (its
  exact span); a negative ("hard negative": something a careless detector would take for that type)
  holds none. Templates contain no other identifier, so any other finding is a false positive.
- Obfuscated variants are part of the positives: full-width digits, zero-width characters between digits,
  grouping with spaces or dashes. Identifiers that are not personal are negatives by rule: service
  numbers (toll-free, 400/800), clause and statute numbers, amounts and quantities, dates that are not
  birth dates, batch/invoice/order codes, Luhn-passing account numbers outside card issuer ranges,
  a bare surname with an honorific (``王先生``), pseudonymised names (``李某``).
- At least 50 positives and 50 negatives per type; seed ``SEED``.
"""

# ruff: noqa: E501 - templates and value tables read better on one line
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import phonenumbers
from phonenumbers import PhoneNumberFormat, PhoneNumberType

SEED = 20261201
OUT = Path(__file__).with_name("deid_set.jsonl")
rng = random.Random(SEED)
records: list[dict] = []

FW = str.maketrans("0123456789", "０１２３４５６７８９")
ZW = "\u200b"


def add(kind: str, typ: str, lang: str, template: str, value: str | None = None) -> None:
    """``template`` holds ``{}`` where ``value`` goes (positives)."""
    if value is None:
        text, spans = template, []
    else:
        pre, post = template.split("{}")
        text = pre + value + post
        spans = [[typ, len(pre), len(pre) + len(value), value]]
    n = sum(1 for r in records if r["type"] == typ and r["kind"] == kind) + 1
    records.append(
        {"id": f"{typ}-{kind[:3]}-{n:03d}", "type": typ, "kind": kind, "lang": lang, "text": text, "spans": spans}
    )


def digits(n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def zw(s: str) -> str:
    i = rng.randrange(1, len(s) - 1)
    return s[:i] + ZW + s[i:]


# --- ID numbers ----------------------------------------------------------------------------------
PROV = [11, 12, 13, 14, 21, 31, 32, 33, 34, 35, 37, 41, 42, 43, 44, 45, 50, 51, 53, 61, 62, 65]
W = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def id18(valid: bool = True) -> str:
    first = f"{rng.choice(PROV)}{rng.randint(1, 99):02d}{rng.randint(1, 30):02d}"
    first += f"{rng.randint(1940, 2005)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{digits(3)}"
    check = "10X98765432"[sum(int(c) * w for c, w in zip(first, W, strict=True)) % 11]
    if not valid:
        check = rng.choice([c for c in "0123456789" if c != check])
    return first + check


def id15() -> str:
    return (
        f"{rng.choice(PROV)}{rng.randint(1, 99):02d}{rng.randint(1, 30):02d}{rng.randint(40, 99)}"
        f"{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{digits(3)}"
    )


def hkid() -> str:
    letter = rng.choice("ACDEGHKPRVYZ")
    d = digits(6)
    total = 36 * 9 + (ord(letter) - 55) * 8 + sum(int(c) * w for c, w in zip(d, range(7, 1, -1), strict=True))
    want = (11 - total % 11) % 11
    return f"{letter}{d}({'A' if want == 10 else want})"


def twid() -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVXYWZIO"
    li = rng.randrange(0, 20)
    n = li + 10
    body = rng.choice("12") + digits(7)
    total = n // 10 + (n % 10) * 9 + sum(int(c) * w for c, w in zip(body, range(8, 0, -1), strict=True))
    return letters[li] + body + str((10 - total % 10) % 10)


def grouped_id(v: str) -> str:
    sep = rng.choice([" ", "-"])
    return sep.join([v[:6], v[6:14], v[14:]]) if rng.random() < 0.5 else sep.join([v[:6], v[6:10], v[10:14], v[14:]])


ID_LABELS = [
    "身份证号：{}",
    "公民身份号码{}，",
    "身份证号码为{}。",
    "居民身份证 {} 已核验",
    "证件号码：{}",
    "其身份证号{}系本人",
]
for _ in range(12):
    add("positive", "ID_NUMBER", "zh", rng.choice(ID_LABELS), id18())
for _ in range(6):
    add("positive", "ID_NUMBER", "zh", rng.choice(["当事人信息 {} 核对无误", "编号{}对应的住户"]), id18())
for _ in range(8):
    add("positive", "ID_NUMBER", "zh", rng.choice(ID_LABELS), grouped_id(id18()))
for _ in range(5):
    add("positive", "ID_NUMBER", "zh", rng.choice(ID_LABELS), id18().translate(FW))
for _ in range(4):
    add("positive", "ID_NUMBER", "zh", rng.choice(ID_LABELS), zw(id18()))
for _ in range(5):
    add(
        "positive", "ID_NUMBER", "zh", rng.choice(["身份证号：{}", "旧身份证号码 {}，", "居民身份证{}（15位）"]), id15()
    )
for _ in range(4):
    add("positive", "ID_NUMBER", "zh", rng.choice(["身份证号：{}", "身份证号码{}"]), id18(valid=False))
for _ in range(4):
    add(
        "positive",
        "ID_NUMBER",
        "zh",
        rng.choice(["香港身份证 {} 持有人", "证件 {}，香港居民", "HKID {} verified"]),
        hkid(),
    )
for _ in range(4):
    add("positive", "ID_NUMBER", "zh", rng.choice(["台湾身份证字号{}，", "統一編號 {} 之申請"]), twid())
for _ in range(3):
    add("positive", "ID_NUMBER", "zh", "澳门居民身份证 {} 有效", f"{rng.choice('157')}{digits(6)}({rng.randint(0, 9)})")
for _ in range(3):
    add("positive", "ID_NUMBER", "zh", "港澳居民来往内地通行证 {}，", rng.choice("HM") + digits(8))
for _ in range(2):
    add("positive", "ID_NUMBER", "zh", "台湾居民来往大陆通行证号码 {}", digits(8))
for _ in range(2):
    add("positive", "ID_NUMBER", "zh", "往来港澳通行证：{}", "C" + digits(8))

for _ in range(14):
    add(
        "negative",
        "ID_NUMBER",
        "zh",
        rng.choice(["订单号 {} 已发货", "流水号{}处理中", "合同编号：{}"]).format(id18(valid=False)),
    )
for _ in range(10):
    add(
        "negative",
        "ID_NUMBER",
        "zh",
        rng.choice(["注册号 {} 的企业", "营业执照注册号{}", "批次 {} 出厂"]).format(id15()),
    )
for _ in range(8):
    code = "91" + digits(6) + "".join(rng.choice("0123456789ABCDEFGHJKLMNPQRTUWXY") for _ in range(10))
    add("negative", "ID_NUMBER", "zh", f"统一社会信用代码 {code}")
for _ in range(8):
    add("negative", "ID_NUMBER", "zh", rng.choice(["发票号码 H{}", "产品编号 M{}", "订单 C{}"]).format(digits(8)))
for _ in range(6):
    add(
        "negative",
        "ID_NUMBER",
        "en",
        rng.choice(["Model A{} ships", "Serial no. B{} and", "SKU G{}9 in stock"]).format(digits(6)),
    )
for _ in range(6):
    add("negative", "ID_NUMBER", "zh", f"共计{digits(18).lstrip('0')}元的交易额")
for _ in range(4):
    add(
        "negative",
        "ID_NUMBER",
        "zh",
        f"第{rng.randint(1, 300)}条 依据 GB 11643-1999 第{rng.randint(1, 9)}.{rng.randint(1, 9)}款",
    )

# --- bank cards ----------------------------------------------------------------------------------


def luhn_complete(prefix: str, length: int) -> str:
    body = prefix + digits(length - len(prefix) - 1)
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return body + str((10 - total % 10) % 10)


def group4(v: str, sep: str = " ") -> str:
    return sep.join(v[i : i + 4] for i in range(0, len(v), 4))


CARD_ZH = ["银行卡号 {} 已冻结", "卡号{}，开户行中国银行", "信用卡{}逾期", "借记卡：{}", "请向{}转账"]
CARD_EN = ["card {} expires", "Visa ending {} on file", "Card number: {}", "charged to Mastercard {}"]
for _ in range(14):
    add("positive", "BANK_CARD", "zh", rng.choice(CARD_ZH), luhn_complete("62" + digits(4), rng.choice([16, 19])))
for _ in range(8):
    add(
        "positive",
        "BANK_CARD",
        "zh",
        rng.choice(CARD_ZH),
        group4(luhn_complete("62" + digits(4), rng.choice([16, 19]))),
    )
for _ in range(6):
    add(
        "positive",
        "BANK_CARD",
        "zh",
        rng.choice(["持卡人信息 卡号{}", "卡号{}"]),
        luhn_complete("622", 19).translate(FW),
    )
for _ in range(4):
    add("positive", "BANK_CARD", "zh", rng.choice(["卡号 {}", "银行卡{}"]), zw(luhn_complete("62", 16)))
for _ in range(8):
    add("positive", "BANK_CARD", "en", rng.choice(CARD_EN), group4(luhn_complete("4", 16), rng.choice([" ", "-"])))
for _ in range(5):
    add("positive", "BANK_CARD", "en", rng.choice(CARD_EN), luhn_complete(str(rng.randint(51, 55)), 16))
for _ in range(3):
    v = luhn_complete(rng.choice(["34", "37"]), 15)
    add("positive", "BANK_CARD", "en", "Amex {} on file", f"{v[:4]} {v[4:10]} {v[10:]}")
for _ in range(4):
    add(
        "positive",
        "BANK_CARD",
        "zh",
        rng.choice(["已向{}汇款", "对方账户 {} 收款"]),
        luhn_complete("62" + digits(4), 19),
    )
for _ in range(20):
    v = luhn_complete(rng.choice(["1", "7", "8", "9", "0", "31", "33"]), rng.choice([16, 19]))
    add(
        "negative",
        "BANK_CARD",
        "zh",
        rng.choice(["账号 {} 余额", "合同编号{}", "流水号：{}", "订单 {} 已付款", "保单号{}"]).format(v),
    )
for _ in range(10):
    v = luhn_complete(rng.choice(["1", "7", "8", "9"]), 16)
    add("negative", "BANK_CARD", "en", rng.choice(["Account {} balance", "Order {} shipped", "Tracking {}"]).format(v))
for _ in range(10):
    v = luhn_complete("2023" + f"{rng.randint(1, 12):02d}", 19)
    add("negative", "BANK_CARD", "zh", f"订单号 {v} 已发货")
for _ in range(10):
    v = luhn_complete("62" + digits(4), 16)
    v = v[:-1] + str((int(v[-1]) + 1) % 10)
    add("negative", "BANK_CARD", "zh", rng.choice(["编号 {} 作废", "单号{}"]).format(v))
for _ in range(5):
    add("negative", "BANK_CARD", "zh", f"人民币{rng.randint(10**12, 10**15)}元整")

# --- phone numbers --------------------------------------------------------------------------------
CN_MOBILE_PREFIX = [
    "130",
    "131",
    "132",
    "133",
    "135",
    "136",
    "137",
    "138",
    "139",
    "150",
    "151",
    "152",
    "155",
    "157",
    "158",
    "159",
    "166",
    "170",
    "176",
    "177",
    "180",
    "181",
    "182",
    "185",
    "186",
    "187",
    "188",
    "189",
    "191",
    "195",
    "198",
    "199",
]


def cn_mobile() -> str:
    return rng.choice(CN_MOBILE_PREFIX) + digits(8)


def valid_number(region: str, typ: int) -> phonenumbers.PhoneNumber:
    ex = phonenumbers.example_number_for_type(region, typ)
    nat = str(ex.national_number)
    while True:
        cand = nat[:-4] + digits(4)
        num = phonenumbers.parse("+" + str(ex.country_code) + cand)
        if phonenumbers.is_valid_number(num) and phonenumbers.number_type(num) in (
            PhoneNumberType.MOBILE,
            PhoneNumberType.FIXED_LINE,
            PhoneNumberType.FIXED_LINE_OR_MOBILE,
        ):
            return num


PH_ZH = ["联系电话{}，请回电", "手机：{}", "如有疑问请致电 {}。", "电话 {} 或", "请拨打{}咨询", "本人手机{}（工作日）"]
PH_EN = ["Call me at {} tomorrow.", "Phone: {}", "Mobile {} (after 6pm)", "Reach the office on {}.", "Tel. {}"]
for _ in range(10):
    m = cn_mobile()
    form = rng.choice(
        [
            m,
            f"{m[:3]}-{m[3:7]}-{m[7:]}",
            f"{m[:3]} {m[3:7]} {m[7:]}",
            f"+86 {m}",
            f"+86-{m[:3]}-{m[3:7]}-{m[7:]}",
            f"0086 {m}",
            f"(+86){m}",
            f"（+86）{m}",
            f"86{m}",
        ]
    )
    add("positive", "PHONE", "zh", rng.choice(PH_ZH), form)
for _ in range(4):
    add("positive", "PHONE", "zh", rng.choice(PH_ZH), cn_mobile().translate(FW))
for _ in range(3):
    add("positive", "PHONE", "zh", rng.choice(PH_ZH), zw(cn_mobile()))
for i in range(10):
    area = rng.choice(["010", "021", "020", "022", "0755", "0571", "028", "027", "025", "0512"])
    local = str(rng.randint(2, 8)) + digits(7 if len(area) == 3 else rng.choice([6, 7]))
    if i < 3:
        local = "1" + local[1:]  # local numbers starting with 1 (phonenumbers accepts them)
    form = rng.choice(
        [
            f"{area}-{local}",
            f"({area}){local}",
            f"（{area}）{local}",
            f"{area} {local}",
            area + local,
            f"+86 {area[1:]} {local}",
        ]
    )
    if phonenumbers.is_valid_number(phonenumbers.parse(area + local, "CN")):
        add("positive", "PHONE", "zh", rng.choice(PH_ZH), form)
for _ in range(3):
    add("positive", "PHONE", "zh", "办公室 {} 转", f"010-6{digits(7)}-{rng.randint(100, 9999)}")
for region in ["US", "GB", "DE", "IN", "JP", "KR", "FR", "AU"]:
    for typ in (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE):
        num = valid_number(region, typ)
        add(
            "positive",
            "PHONE",
            "en",
            rng.choice(PH_EN),
            phonenumbers.format_number(num, PhoneNumberFormat.INTERNATIONAL),
        )
        num = valid_number(region, typ)
        fmt = PhoneNumberFormat.E164 if rng.random() < 0.4 else PhoneNumberFormat.NATIONAL
        add("positive", "PHONE", "en", rng.choice(PH_EN), phonenumbers.format_number(num, fmt))
for region in ["US", "DE", "GB"]:
    num = valid_number(region, PhoneNumberType.MOBILE)
    add(
        "positive",
        "PHONE",
        "zh",
        "德国/美国/英国联系人电话：{}",
        phonenumbers.format_number(num, PhoneNumberFormat.INTERNATIONAL),
    )

for _ in range(10):
    add(
        "negative",
        "PHONE",
        "zh",
        rng.choice(["持有{}股", "注册资本 {}元", "罚款{}元", "发行 {} 股普通股"]).format(cn_mobile()),
    )
for _ in range(10):
    tf = rng.choice(["800", "888", "877", "866", "855"]) + str(rng.randint(2, 9)) + digits(6)
    form = rng.choice(
        [f"1-{tf[:3]}-{tf[3:6]}-{tf[6:]}", f"1{tf}", f"{tf[:3]}-{tf[3:6]}-{tf[6:]}", f"1 ({tf[:3]}) {tf[3:6]}-{tf[6:]}"]
    )
    add(
        "negative",
        "PHONE",
        "en",
        rng.choice(["call the toll-free line at {}.", "Information Center: {} or visit", "reached at {}."]).format(
            form
        ),
    )
for _ in range(6):
    add("negative", "PHONE", "zh", rng.choice(["客服热线 400-{}-{}", "服务电话 800{}{}"]).format(digits(3), digits(4)))
for _ in range(8):
    add(
        "negative",
        "PHONE",
        "zh",
        rng.choice(["订单号 {} 已发货", "流水号{}", "序列号 {}"]).format("20" + digits(rng.choice([12, 14, 16]))),
    )
for _ in range(6):
    y = rng.randint(1990, 2025)
    add(
        "negative",
        "PHONE",
        "zh",
        rng.choice(
            [
                f"日期 {y}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 生效",
                f"见 GB/T {rng.randint(1000, 9999)}-{y}",
                f"{y}-{y + 3}年度计划",
            ]
        ),
    )
for _ in range(6):
    add(
        "negative",
        "PHONE",
        "zh",
        f"第{rng.randint(1, 99)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}条 与 金额 {rng.randint(1, 999)},{digits(3)},{digits(3)}.{digits(2)} 元",
    )
for _ in range(4):
    add(
        "negative",
        "PHONE",
        "zh",
        f"股票代码 {rng.choice(['600', '000', '300'])}{digits(3)}，邮编 {rng.randint(100000, 850000)}",
    )
for _ in range(4):
    add(
        "negative",
        "PHONE",
        "en",
        f"Coordinates 39.{digits(4)}, 116.{digits(4)} and ISBN 978-7-{digits(3)}-{digits(5)}-{rng.randint(0, 9)}",
    )

# --- e-mail ---------------------------------------------------------------------------------------
USERS = [
    "zhang.wei",
    "li_na",
    "wangfang88",
    "chen.jie+news",
    "liu-yang",
    "j.smith",
    "mary.o",
    "k.tanaka",
    "park.j",
    "a.sharma",
    "info.sales",
    "hr2023",
]
DOMAINS = ["example.com", "example.org", "mail.example.cn", "corp.example.com.cn", "example.co.uk", "test.example.de"]
for _ in range(52):
    add(
        "positive",
        "EMAIL",
        rng.choice(["zh", "en"]),
        rng.choice(["邮箱 {}。", "请发送至{}，谢谢", "E-mail: {}", "write to {}, please", "联系邮箱：{}"]),
        f"{rng.choice(USERS)}{rng.choice(['', str(rng.randint(1, 99))])}@{rng.choice(DOMAINS)}",
    )
for _ in range(4):
    add("positive", "EMAIL", "zh", "邮箱：{}", f"{cn_mobile()}@qq.com")
for _ in range(52):
    add(
        "negative",
        "EMAIL",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                f"图标 icon{rng.randint(1, 9)}@2x.png 已更新",
                f"user{rng.randint(1, 99)}@localhost 登录",
                f"请 @张{rng.choice('伟娜敏')} 查看",
                f"依赖 pkg@{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)} 版本",
                f"foo@bar{rng.randint(1, 99)} 无效",
                f"邮箱：（未填写）第{rng.randint(1, 50)}条",
                f"asset logo@{rng.randint(2, 3)}x.jpg",
                "标签 #@# 与 a@b",
            ]
        ),
    )

# --- IP addresses ----------------------------------------------------------------------------------
for _ in range(30):
    v4 = f"{rng.choice([10, 172, 192, 58, 61, 114, 202, 221])}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    add(
        "positive",
        "IP",
        rng.choice(["zh", "en"]),
        rng.choice(["登录IP {}，时间", "from {} at", "服务器地址：{}", "访问来源 {} 被拦截", "host {} down"]),
        v4,
    )
for _ in range(20):
    g = [f"{rng.randint(0, 65535):x}" for _ in range(8)]
    form = rng.choice(
        [":".join(g), f"2001:db8::{g[0]}", f"fe80::{g[1]}:{g[2]}:{g[3]}:{g[4]}", f"2409:8a00:{g[5]}::{g[6]}"]
    )
    add("positive", "IP", "en", rng.choice(["IPv6 {} in logs", "addr {} up", "登录IP {}，时间"]), form)
for _ in range(4):
    add(
        "positive",
        "IP",
        "zh",
        "登录IP {} 异常",
        f"{rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}.{rng.randint(1, 9)}",
    )
for _ in range(56):
    a, b, c, d = (rng.randint(1, 12) for _ in range(4))
    add(
        "negative",
        "IP",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                f"依据第{a}.{b}.{c}.{d}条规定",
                f"见 {a}.{b}.{c}.{d} 款",
                f"{a}.{b}.{c}.{d} 安全要求",
                f"Section {a}.{b}.{c}.{d} applies",
                f"版本 v{a}.{b}.{c}.{d} 发布",
                f"version {a}.{b}.{c}.{d}",
                f"无效地址 {rng.randint(256, 999)}.{a}.{b}.{c}",
                f"会议 {a}:{b}{c}:{d}0 开始",
                "C++ 的 std::vector 与 ::1",
                f"按照{a}.{b}.{c}.{d}的要求",
            ]
        ),
    )

# --- passports -------------------------------------------------------------------------------------
for _ in range(14):
    add(
        "positive",
        "PASSPORT",
        "zh",
        rng.choice(["护照号码{}，", "护照 {} 签发", "持中国护照（{}）入境"]),
        "E" + rng.choice("ABCDFGHJKLMN") + digits(7),
    )
for _ in range(14):
    add(
        "positive",
        "PASSPORT",
        "zh",
        rng.choice(["护照号码{}，", "旧版护照{}", "其护照号：{}"]),
        rng.choice("EG") + digits(8),
    )
for _ in range(6):
    add("positive", "PASSPORT", "zh", "公务护照 {} 有效", rng.choice(["DE", "SE", "PE"]) + digits(7))
for _ in range(12):
    add(
        "positive",
        "PASSPORT",
        "en",
        rng.choice(["Passport No. {} issued", "passport number {}", "PASSPORT: {}"]),
        rng.choice([digits(9), "5" + digits(8), "C" + digits(8), "X" + digits(7)]),
    )
for _ in range(6):
    add("positive", "PASSPORT", "zh", "护照号码：{}", ("E" + digits(8)).translate(FW))
for _ in range(56):
    add(
        "negative",
        "PASSPORT",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                "批号 G{}",
                "发票号码 E{}",
                "产品编号 G{}",
                "Invoice E{} paid",
                "Batch G{} released",
                "订单 E{} 已付款",
                "型号 S{}",
                "检验报告 G{} 合格",
            ]
        ).format(digits(8)),
    )

# --- national IDs ----------------------------------------------------------------------------------


def ssn() -> str:
    return f"{rng.randint(1, 665):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def nino() -> str:
    return rng.choice(["AB", "CE", "JK", "PR", "TW", "HN", "YZ"]) + digits(6) + rng.choice("ABCD")


def aadhaar() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from datasets.deid.checks import aadhaar_valid  # Verhoeff (UIDAI); the one import from the project

    while True:
        v = str(rng.randint(2, 9)) + digits(11)
        if aadhaar_valid(v):
            return f"{v[:4]} {v[4:8]} {v[8:]}"


def krrn() -> str:
    yy, mm, dd = rng.randint(50, 99), rng.randint(1, 12), rng.randint(1, 28)
    body = f"{yy:02d}{mm:02d}{dd:02d}" + rng.choice("12") + digits(5)
    total = sum(int(c) * w for c, w in zip(body, (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5), strict=True))
    return f"{body[:6]}-{body[6:]}{(11 - total % 11) % 10}"


for _ in range(20):
    add(
        "positive",
        "NATIONAL_ID",
        "en",
        rng.choice(["SSN {} on file", "Social Security number: {}", "her SSN is {}."]),
        ssn(),
    )
for _ in range(6):
    add("positive", "NATIONAL_ID", "en", "SSN: {}", ssn().replace("-", ""))
for _ in range(12):
    add("positive", "NATIONAL_ID", "en", rng.choice(["NI number {}", "National Insurance: {}"]), nino())
for _ in range(8):
    add("positive", "NATIONAL_ID", "en", rng.choice(["Aadhaar {} linked", "Aadhaar number: {}"]), aadhaar())
for _ in range(8):
    add("positive", "NATIONAL_ID", "en", rng.choice(["RRN {} registered", "resident registration number {}"]), krrn())
for _ in range(56):
    add(
        "negative",
        "NATIONAL_ID",
        "en",
        rng.choice(
            [
                f"SSN 000-{rng.randint(10, 99)}-{digits(4)} is invalid",
                f"area 666-{rng.randint(10, 99)}-{digits(4)} not issued",
                f"ITIN 9{digits(2)}-{rng.randint(70, 88)}-{digits(4)}",
                f"Part No. {digits(3)}-{digits(2)}-{digits(4)}",
                f"order {digits(9)} shipped",
                f"ISBN 0-{digits(3)}-{digits(5)}-{rng.randint(0, 9)}",
                f"ref GB{digits(6)}A",
                f"code BG{digits(6)}C",
                f"date 12-31-{rng.randint(1990, 2030)}",
                f"Batch {digits(4)} {digits(4)} {digits(4)} cleared",
            ]
        ),
    )

# --- names ------------------------------------------------------------------------------------------
SUR = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐韩冯邓曹彭曾肖田董潘蒋蔡余杜叶程苏魏吕丁沈")
GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰飞鹏辉晨欣宇轩浩然子涵梓琳思雨博文一诺佳怡")


def cn_name() -> str:
    sur = rng.choice(SUR) if rng.random() > 0.08 else rng.choice(["欧阳", "司马", "诸葛", "上官"])
    return sur + "".join(rng.choice(GIVEN) for _ in range(rng.choice([1, 2, 2])))


NAME_ZH = [
    "姓名：{}，性别：男",
    "联系人: {} 电话",
    "联系人{}，",
    "收件人{}（请签收）",
    "原告{}诉被告某公司",
    "被告：{}，男，汉族",
    "申请人{}与被申请人某公司",
    "被申请人：{}。",
    "委托代理人{}，律师",
    "法定代表人：{}，董事长",
    "上诉人（原审原告）：{}，",
    "签名：{}",
    "审判员 {}",
    "尊敬的{}：您好",
    "{}先生：",
    "致{}女士的一封信".replace("致", "亲爱的"),
    "感谢{}同志的帮助",
    "书记员{}\n",
    "患者{}，女，因咳嗽就诊",
    "第三人{}述称",
]
for _ in range(44):
    add("positive", "NAME", "zh", rng.choice(NAME_ZH), cn_name())
EN_FIRST = ["James", "Mary", "Robert", "Linda", "Michael", "Sarah", "David", "Emma", "Arjun", "Yuki", "Min", "Olivia"]
EN_LAST = [
    "Smith",
    "Johnson",
    "Brown",
    "Miller",
    "Davis",
    "Wilson",
    "Taylor",
    "Anderson",
    "Patel",
    "Tanaka",
    "Kim",
    "Walker",
]
for _ in range(12):
    full = f"{rng.choice(EN_FIRST)} {rng.choice(EN_LAST)}"
    add(
        "positive",
        "NAME",
        "en",
        rng.choice(
            [
                "Patient name: {} was admitted",
                "Name: {}",
                "Dear {},",
                "Sincerely,\n{}",
                "Signed: {}",
                "Contact: {} for details",
            ]
        ),
        full,
    )
for _ in range(4):
    add("positive", "NAME", "en", "seen by Dr. {} yesterday", rng.choice(EN_LAST))
for _ in range(56):
    s = rng.choice(SUR)
    add(
        "negative",
        "NAME",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                "原告的诉讼请求依法成立",
                f"被告人{s}某犯盗窃罪",
                "申请人应当提交书面材料",
                "联系人信息请另行填写",
                f"证人{s}某某出庭作证",
                "原告：北京某某科技有限公司",
                f"{s}先生来电咨询",
                "被告方面未到庭",
                "负责人员到场",
                "姓名：（请填写）",
                "Dear Customer,",
                "Name: N/A",
                "申请人方面提出异议",
                f"{s}女士表示同意",
                "法定代表人未出庭",
                "被申请人认为",
                "审判员依法独立审判",
                "原告及其委托代理人到庭",
                "Patient: unknown",
                "签名：（盖章）",
            ]
        ),
    )

# --- addresses --------------------------------------------------------------------------------------
PROVS = [
    ("广东省", "深圳市", "南山区"),
    ("浙江省", "杭州市", "西湖区"),
    ("江苏省", "南京市", "鼓楼区"),
    ("北京市", "", "海淀区"),
    ("上海市", "", "浦东新区"),
    ("四川省", "成都市", "武侯区"),
    ("湖北省", "武汉市", "洪山区"),
    ("山东省", "青岛市", "市南区"),
]
ROADS = ["科技", "中山", "人民", "建设", "解放", "文三", "长江", "和平", "朝阳", "新华", "学院", "滨江"]


def cn_address() -> str:
    p, c, d = rng.choice(PROVS)
    road = rng.choice(ROADS) + rng.choice(["路", "街", "大道"])
    tail = rng.choice(
        [
            "",
            f"{rng.randint(1, 30)}栋",
            f"{rng.randint(1, 30)}栋{rng.randint(1, 6)}单元{rng.randint(101, 2908)}室",
            f"{rng.randint(101, 2908)}室",
        ]
    )
    return f"{p}{c}{d}{road}{rng.randint(1, 999)}号{tail}"


for _ in range(34):
    add(
        "positive",
        "ADDRESS",
        "zh",
        rng.choice(["住址：{}", "现住{}，", "家住{}。", "送达地址：{}", "{}（户籍地）"]),
        cn_address(),
    )
for _ in range(6):
    road = rng.choice(ROADS) + "路"
    add(
        "positive",
        "ADDRESS",
        "zh",
        "住所地{}，",
        f"{rng.choice(['南山区', '西湖区', '海淀区'])}{road}{rng.randint(1, 200)}号",
    )
for _ in range(16):
    a = (
        f"{rng.randint(1, 9999)} {rng.choice(['Oak', 'Maple', 'Cedar', 'Elm', 'Pine', 'Lake View'])} "
        f"{rng.choice(['Street', 'Avenue', 'Road', 'Drive', 'Lane'])}"
    )
    a += rng.choice(
        [
            "",
            f", {rng.choice(['Springfield', 'Riverside', 'Fairview'])}",
            f", {rng.choice(['Springfield', 'Riverside'])}, {rng.choice(['IL', 'CA', 'TX'])} {digits(5)}",
        ]
    )
    add("positive", "ADDRESS", "en", rng.choice(["lives at {}.", "Address: {}", "mail to {} by Friday"]), a)
for _ in range(56):
    p, c, d = rng.choice(PROVS)
    add(
        "negative",
        "ADDRESS",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                f"{p}{c}{d}人民法院审理",
                f"{p}人民政府令第{rng.randint(1, 300)}号",
                f"国发〔{rng.randint(2000, 2025)}〕{rng.randint(1, 99)}号",
                f"来自{p}{c}{d}的代表",
                f"{rng.choice(ROADS)}路沿线绿化",
                f"第{rng.randint(1, 99)}号令",
                "沪深300指数",
                "Route 66 trip",
                f"{p}高级人民法院（{rng.randint(2015, 2024)}）民终{rng.randint(1, 999)}号",
                f"{rng.randint(2, 9)} Street Fighter games",
            ]
        ),
    )

# --- dates of birth ----------------------------------------------------------------------------------
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
for _ in range(56):
    y, m, d = rng.randint(1940, 2010), rng.randint(1, 12), rng.randint(1, 28)
    form, tpl, lang = rng.choice(
        [
            (f"{y}年{m}月{d}日", "{}出生，汉族", "zh"),
            (f"{y}年{m}月{d}日", "出生日期：{}", "zh"),
            (f"{y}-{m:02d}-{d:02d}", "生日 {}", "zh"),
            (f"{y}年{m}月", "{}出生，住", "zh"),
            (f"{y}.{m:02d}.{d:02d}", "出生年月：{}", "zh"),
            (f"{m:02d}/{d:02d}/{y}", "DOB: {}", "en"),
            (f"{MONTHS[m - 1]} {d}, {y}", "Date of birth: {}", "en"),
            (f"{d} {MONTHS[m - 1]} {y}", "born on {} in", "en"),
            (f"{y}-{m:02d}-{d:02d}", "生于{}，", "zh"),
        ]
    )
    add("positive", "BIRTH_DATE", lang, "，男，" + tpl if lang == "zh" and tpl.startswith("{}") else tpl, form)
for _ in range(56):
    y, m, d = rng.randint(1980, 2025), rng.randint(1, 12), rng.randint(1, 28)
    add(
        "negative",
        "BIRTH_DATE",
        rng.choice(["zh", "en"]),
        rng.choice(
            [
                f"{y}年{m}月{d}日施行",
                f"合同于{y}年{m}月{d}日签订",
                f"Effective {MONTHS[m - 1]} {d}, {y}",
                f"{y}-{m:02d}-{d:02d} 发布",
                f"出生率于{y}年下降",
                f"{y}年{m}月{d}日生效",
                f"updated {m:02d}/{d:02d}/{y}",
                f"{y}年{m}月{d}日生产的批次",
            ]
        ),
    )

# --- licence plates -------------------------------------------------------------------------------
PLATE_P = "京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤川"
PLATE_L = "ABCDEFGHJKLMNPQRSTUVWXY"


def plate() -> str:
    p, letter = rng.choice(PLATE_P), rng.choice(PLATE_L)
    kind = rng.random()
    if kind < 0.6:
        tail = "".join(rng.choice("0123456789" + PLATE_L) for _ in range(2)) + digits(3)
    elif kind < 0.8:
        tail = rng.choice("DF") + digits(5)
    else:
        tail = digits(4) + rng.choice("挂学警")
    sep = rng.choice(["", "", "·"])
    return f"{p}{letter}{sep}{tail}"


for _ in range(56):
    add(
        "positive",
        "LICENSE_PLATE",
        "zh",
        rng.choice(["车牌号{}，", "驾驶{}号小型轿车", "车辆（{}）停放", "牌照为 {} 的货车"]),
        plate(),
    )
for _ in range(56):
    add(
        "negative",
        "LICENSE_PLATE",
        "zh",
        rng.choice(
            [
                f"京ICP备{digits(8)}号",
                "沪深300指数上涨",
                "新A股上市",
                f"苏A{digits(4)}（号牌不全）",
                "粤港澳大湾区",
                f"川A 第{rng.randint(1, 9)}批",
                f"鲁{rng.choice(PLATE_L)}{digits(2)}次列车",
                f"浙江{digits(5)}号",
                f"渝A{rng.choice(PLATE_L)}{rng.choice(PLATE_L)}{rng.choice(PLATE_L)}{rng.choice(PLATE_L)}",
            ]
        ),
    )


def main() -> None:
    with open(OUT, "w", encoding="utf-8", newline="\n") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    counts: dict[tuple[str, str], int] = {}
    for r in records:
        counts[(r["type"], r["kind"])] = counts.get((r["type"], r["kind"]), 0) + 1
    for key in sorted(counts):
        print(*key, counts[key], file=sys.stderr)


if __name__ == "__main__":
    main()
