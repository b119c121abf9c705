"""De-identification on a hand-labelled set: recall and precision per type, asserted exactly.

Each case is a sentence and the identifiers it contains, as ``(type, exact substring)``. The set holds
valid identifiers in several notations and look-alikes that must stay (invalid check digits, impossible
birth dates, Luhn failures, dates, amounts, article and order numbers, versions, times).
Run with ``-s`` to see the table.
"""

from __future__ import annotations

from collections import Counter

import pytest

from datasets.deid import (
    PII_TYPES,
    PLACEHOLDERS,
    deidentify,
    find_pii,
    id_check_char,
    id_number_valid,
    luhn_valid,
)

Case = tuple[str, list[tuple[str, str]]]

ID_VALID = [
    "11010519491231002X",  # the example of GB 11643-1999 itself
    "440308199003071235",
    "310115200112314565",
    "51010719850101001X",
    "65010220000229888X",  # 29 February of a leap year
    "810000197001010052",
    "620102199909093216",
]
ID_INVALID = [
    "110105194912310021",  # wrong check character (should be X)
    "440308199003071234",  # wrong check digit
    "440308199002301235",  # 30 February
    "650102200102298880",  # 29 February of a common year
    "990102199001011234",  # no province 99
    "110105290001011236",  # born in 2900
    "11010519491231002",  # 17 digits
]
CARDS_VALID = [
    "6222021234567890128",
    "6217000000000000004",
    "4111111111111111",
    "5105105105105100",
    "378282246310005",
    "2221000000000009",
]
CARDS_INVALID = [
    "6222021234567890127",
    "4111111111111112",
    "5105105105105101",
    "378282246310006",
]

CASES: list[Case] = [
    # --- resident ID numbers ---------------------------------------------------------------------
    *[(f"身份证号：{v}。", [("ID_NUMBER", v)]) for v in ID_VALID],
    ("居民身份证号码 11010519491231002x 已核验", [("ID_NUMBER", "11010519491231002x")]),
    *[(f"编号{v}有误", []) for v in ID_INVALID],
    # --- phones: mobile in several notations, landlines ---------------------------------------
    ("联系电话13812345678，请回电", [("PHONE", "13812345678")]),
    ("手机：138-1234-5678", [("PHONE", "138-1234-5678")]),
    ("手机 139 1234 5678 或", [("PHONE", "139 1234 5678")]),
    ("Call +86 15012345678 now", [("PHONE", "+86 15012345678")]),
    ("Tel: +86-186-1234-5678.", [("PHONE", "+86-186-1234-5678")]),
    ("拨打 8617712345678 咨询", [("PHONE", "8617712345678")]),
    ("拨打 0086 19912345678 咨询", [("PHONE", "0086 19912345678")]),
    ("(+86)13512345678 是他的号码", [("PHONE", "(+86)13512345678")]),
    ("（+86）13612345678", [("PHONE", "（+86）13612345678")]),
    ("办公室 010-62345678 转", [("PHONE", "010-62345678")]),
    ("电话(0755)23456789，传真", [("PHONE", "(0755)23456789")]),
    ("电话（021）87654321转123", [("PHONE", "（021）87654321转123")]),
    ("热线 0571 87654321。", [("PHONE", "0571 87654321")]),
    ("office +86 10 62345678", [("PHONE", "+86 10 62345678")]),
    ("总机 010-62345678-8001", [("PHONE", "010-62345678-8001")]),
    # --- bank cards (Luhn) -------------------------------------------------------------------------
    *[(f"银行卡号 {v} 已冻结", [("BANK_CARD", v)]) for v in CARDS_VALID],
    ("卡号 6222 0212 3456 7890 128 开户行", [("BANK_CARD", "6222 0212 3456 7890 128")]),
    ("card 4111-1111-1111-1111 expires", [("BANK_CARD", "4111-1111-1111-1111")]),
    ("Amex 3782 822463 10005 on file", [("BANK_CARD", "3782 822463 10005")]),
    *[(f"编号 {v} 无效", []) for v in CARDS_INVALID],
    ("单号 4111 1111 1111 1112 无效", []),
    # --- e-mail ------------------------------------------------------------------------------------
    ("邮箱 zhang.san@example.com.cn。", [("EMAIL", "zhang.san@example.com.cn")]),
    (
        "write to li_si+news@mail.example.org, please",
        [("EMAIL", "li_si+news@mail.example.org")],
    ),
    ("QQ邮箱13812345678@qq.com", [("EMAIL", "13812345678@qq.com")]),
    # --- IP addresses ------------------------------------------------------------------------------
    ("登录IP 192.168.1.100，时间", [("IP", "192.168.1.100")]),
    ("from 8.8.8.8.", [("IP", "8.8.8.8")]),
    ("IPv6 2001:db8::1 in logs", [("IP", "2001:db8::1")]),
    (
        "addr fe80::1ff:fe23:4567:890a%eth0 up",
        [("IP", "fe80::1ff:fe23:4567:890a%eth0")],
    ),
    ("mapped ::ffff:10.0.0.1 seen", [("IP", "::ffff:10.0.0.1")]),
    (
        "full 2001:0db8:85a3:0000:0000:8a2e:0370:7334 end",
        [("IP", "2001:0db8:85a3:0000:0000:8a2e:0370:7334")],
    ),
    # --- passports ---------------------------------------------------------------------------------
    ("护照号码E12345678，", [("PASSPORT", "E12345678")]),
    ("护照 EA1234567 签发", [("PASSPORT", "EA1234567")]),
    ("旧版护照G12345678", [("PASSPORT", "G12345678")]),
    ("公务护照 SE1234567", [("PASSPORT", "SE1234567")]),
    # --- names after a label -------------------------------------------------------------------------
    ("姓名：王小明，性别：男", [("NAME", "王小明")]),
    ("联系人: 欧阳娜娜 电话", [("NAME", "欧阳娜娜")]),
    ("Patient name: Mary Jane Watson was admitted", [("NAME", "Mary Jane Watson")]),
    # --- several in one text ------------------------------------------------------------------------
    (
        "张三（身份证 440308199003071235，手机 13912345678，邮箱 zs@example.com）转账至 6222021234567890128",
        [
            ("ID_NUMBER", "440308199003071235"),
            ("PHONE", "13912345678"),
            ("EMAIL", "zs@example.com"),
            ("BANK_CARD", "6222021234567890128"),
        ],
    ),
    # --- look-alikes that must stay ------------------------------------------------------------------
    ("2023年1月15日施行", []),
    ("日期 2023-01-15 与 2023/01/15", []),
    ("罚款 15000000000元", []),
    ("金额 1,234,567.89 元，合计 ¥12,345.00", []),
    ("依据第一百二十三条和第123条", []),
    ("见 GB 11643-1999 与 GB/T 2260-2007", []),
    ("订单号 2023061512345678901 已发货", []),
    ("订单号 202306151234567890 已发货", []),
    ("流水号 20230615123456 处理中", []),
    ("版本 1.2.3 与 v1.2.3.4 发布", []),
    ("无效地址 256.1.1.1 和 01.02.03.04", []),
    ("会议 12:30:45 开始，比分 3:2", []),
    ("C++ 的 std::vector 与 ::1", []),
    ("统一社会信用代码 91110000600037341L", []),
    ("邮编 100080，传真号码前缀 +86", []),
    ("型号 XE12345678 与 e12345678", []),
    ("长编号 138123456789 不是手机", []),
    ("文号 国发〔2023〕15号", []),
    ("Other Names: Aarskog syndrome", []),
]


def _evaluate(cases: list[Case]) -> dict[str, tuple[int, int, int]]:
    """(true positives, false positives, false negatives) per type over all cases."""
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    for text, expected in cases:
        want = Counter(expected)
        got = Counter((f.type, f.value) for f in find_pii(text))
        for item, n in (got & want).items():
            tp[item[0]] += n
        for item, n in (got - want).items():
            fp[item[0]] += n
        for item, n in (want - got).items():
            fn[item[0]] += n
    return {t: (tp[t], fp[t], fn[t]) for t in PII_TYPES}


def test_it_finds_every_labelled_identifier_and_nothing_else() -> None:
    scores = _evaluate(CASES)
    print(f"\n{'type':10} {'TP':>3} {'FP':>3} {'FN':>3} {'recall':>7} {'precision':>9}")
    for t, (tp, fp, fn) in scores.items():
        recall = tp / (tp + fn) if tp + fn else 1.0
        precision = tp / (tp + fp) if tp + fp else 1.0
        print(f"{t:10} {tp:3} {fp:3} {fn:3} {recall:7.3f} {precision:9.3f}")
    # Exact: every type's recall and precision are 1.0 on this set, with these supports.
    assert scores == {
        "EMAIL": (4, 0, 0),
        "IP": (6, 0, 0),
        "ID_NUMBER": (9, 0, 0),
        "BANK_CARD": (10, 0, 0),
        "PASSPORT": (4, 0, 0),
        "PHONE": (16, 0, 0),
        "NAME": (3, 0, 0),
        "NATIONAL_ID": (0, 0, 0),
        "ADDRESS": (0, 0, 0),
        "BIRTH_DATE": (0, 0, 0),
        "LICENSE_PLATE": (0, 0, 0),
    }


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[c[0][:24] for c in CASES])
def test_each_labelled_case(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(f.type, f.value) for f in find_pii(text)] == expected
    new, counts = deidentify(text)
    assert counts == Counter(t for t, _ in expected)
    for t, value in expected:
        assert value not in new
        assert PLACEHOLDERS[t] in new


def test_placeholders_replace_spans_in_order() -> None:
    text = "身份证 11010519491231002X，电话 138-1234-5678，卡 4111 1111 1111 1111。"
    assert deidentify(text) == (
        "身份证 [ID_NUMBER]，电话 [PHONE]，卡 [BANK_CARD]。",
        Counter({"ID_NUMBER": 1, "PHONE": 1, "BANK_CARD": 1}),
    )


def test_text_without_identifiers_is_returned_unchanged() -> None:
    text = "中华人民共和国刑法\n1979年7月1日 第五届全国人民代表大会第二次会议通过"
    assert deidentify(text) == (text, Counter())
    assert deidentify("") == ("", Counter())


def test_id_check_character_follows_gb_11643() -> None:
    # GB 11643-1999 worked example: 11010519491231002 → X
    assert id_check_char("11010519491231002") == "X"
    assert id_check_char("44030819900307123") == "5"
    with pytest.raises(ValueError):
        id_check_char("1234")
    assert all(id_number_valid(v) for v in ID_VALID)
    assert not any(id_number_valid(v) for v in ID_INVALID)


def test_id_birth_date_must_not_lie_in_the_future() -> None:
    import datetime as dt

    number = "11010520300101" + "123"
    number += id_check_char(number)
    assert not id_number_valid(number)
    assert id_number_valid(number, today=dt.date(2031, 1, 1))


def test_luhn_follows_iso_iec_7812() -> None:
    assert all(luhn_valid(v) for v in CARDS_VALID)
    assert not any(luhn_valid(v) for v in CARDS_INVALID)
    assert luhn_valid("4111 1111-1111 1111")
    assert not luhn_valid("")
    assert not luhn_valid("4111a11111111111")
