"""De-identification on the project's labelled synthetic set and on evasions, with evidence and options.

The set (``deid_set/deid_set.jsonl``, made by ``deid_set/generate.py``) holds ≥ 50 positives and ≥ 50 hard
negatives per claimed type; the counts below are exact, so a regression of one span fails.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from datasets.deid import PII_TYPES, DeidOptions, deidentify, deidentify_with_findings, find_pii
from datasets.deid.evaluate import load_set, score, table

SET = Path(__file__).parent / "deid_set" / "deid_set.jsonl"


def test_the_set_has_enough_positives_and_hard_negatives_per_type() -> None:
    records = load_set(SET)
    kinds = Counter((r["type"], r["kind"]) for r in records)
    for t in PII_TYPES:
        assert kinds[(t, "positive")] >= 50, t
        assert kinds[(t, "negative")] >= 50, t
    for r in records:  # every label is an exact span of its text
        for t, s, e, value in r["spans"]:
            assert r["text"][s:e] == value and t == r["type"]


def test_every_type_reaches_its_recall_and_precision_with_exact_counts() -> None:
    scores, errors = score(load_set(SET))
    print("\n" + table(scores))
    assert errors == []
    assert scores == {
        "EMAIL": (56, 0, 0),
        "IP": (54, 0, 0),
        "ID_NUMBER": (62, 0, 0),
        "NATIONAL_ID": (54, 0, 0),
        "BANK_CARD": (52, 0, 0),
        "PASSPORT": (52, 0, 0),
        "PHONE": (64, 0, 0),
        "NAME": (60, 0, 0),
        "ADDRESS": (56, 0, 0),
        "BIRTH_DATE": (56, 0, 0),
        "LICENSE_PLATE": (56, 0, 0),
    }
    for tp, fp, fn in scores.values():
        assert tp / (tp + fn) >= 0.99 and tp / (tp + fp) >= 0.97


def test_a_labelled_id_with_a_wrong_check_digit_is_replaced_and_reported() -> None:
    text = "身份证号：110105194912310021，已登记"
    [f] = find_pii(text)
    assert (f.type, f.value, f.rule, f.note) == ("ID_NUMBER", "110105194912310021", "id18:label", "invalid check digit")
    assert f.confidence == 0.75
    assert deidentify(text)[0] == "身份证号：[ID_NUMBER]，已登记"
    assert find_pii("编号 110105194912310021，已登记") == []  # no label, no replacement


def test_an_english_medical_text_keeps_its_toll_free_numbers() -> None:
    text = (
        "Contact the National Cancer Institute at 1-800-422-6237, the Information Center at 18004516434 "
        "or call NIH at (800) 411-1222. The clinic's own line is +1 212-555-0199."
    )
    new, counts = deidentify(text)
    assert counts == Counter({"PHONE": 1})
    assert "1-800-422-6237" in new and "18004516434" in new and "(800) 411-1222" in new
    assert new.endswith("is [PHONE].")


def test_hard_negatives_survive() -> None:
    text = (
        "依据第4.2.1.3条和GB/T 2260-2007，原告的诉讼请求成立。被告人李某持有15012345678股，罚款15000000000元；"
        "批号G12345678、发票号码E20231234；2023年1月15日施行；账号 1234567890123452 余额；客服热线 400-810-1234；"
        "沪深300指数；京ICP备12345678号；版本 v1.2.3.4。"
    )
    assert find_pii(text) == []


def test_no_phone_fires_inside_a_foreign_number() -> None:
    text = "Berlin office +49 30 12345678, New York +1 212-555-0187, mobile +49 1512 3456789."
    new, _ = deidentify(text)
    assert new == "Berlin office [PHONE], New York [PHONE], mobile [PHONE]."
    assert [f.rule for f in find_pii(text)] == ["phone:DE", "phone:US", "phone:DE"]


def test_zero_width_and_homoglyph_digits_inside_identifiers_are_found_and_replaced_whole() -> None:
    mobile = "138\u200b1234\u200d5678"
    id_fw = "１１０１０５１９４９１２３１００２Ｘ"
    card = "6222\u20600212\ufeff34567890128"
    arabic = "١٣٨١٢٣٤٥٦٧٨"  # Arabic-Indic digits
    text = f"手机{mobile}，身份证号：{id_fw}，卡号{card}，电话{arabic}。"
    found = find_pii(text)
    assert [(f.type, f.value) for f in found] == [
        ("PHONE", mobile),
        ("ID_NUMBER", id_fw),
        ("BANK_CARD", card),
        ("PHONE", arabic),
    ]
    assert deidentify(text)[0] == "手机[PHONE]，身份证号：[ID_NUMBER]，卡号[BANK_CARD]，电话[PHONE]。"


def test_every_finding_carries_its_evidence() -> None:
    [f] = find_pii("联系电话 138-1234-5678")
    assert f.evidence() == {"type": "PHONE", "start": 5, "end": 18, "rule": "phone:CN", "confidence": 0.97, "note": ""}


def test_allow_list_keeps_the_organizations_own_numbers() -> None:
    options = DeidOptions.build(allow=["+86 138 0000 1111", "hotline@example.com"])
    text = "客服 13800001111，邮箱 HOTLINE@example.com；客户 13912345678"
    new, replaced, allowed = deidentify_with_findings(text, options=options)
    assert new == "客服 13800001111，邮箱 HOTLINE@example.com；客户 [PHONE]"
    assert allowed == 2 and [f.value for f, _ in replaced] == ["13912345678"]


def test_pseudonyms_are_consistent_per_value_within_a_document() -> None:
    options = DeidOptions(style="pseudonym")
    text = "原告王小明，电话13912345678；被告李海涛，电话139-1234-5678；原告王小明于次日致电13800001111。"
    new, _, _ = deidentify_with_findings(text, options=options)
    assert new == ("原告[NAME_1]，电话[PHONE_1]；被告[NAME_2]，电话[PHONE_1]；原告[NAME_1]于次日致电[PHONE_2]。")


def test_hash_placeholders_depend_on_the_key_and_the_value_only() -> None:
    a = DeidOptions(style="hash", hash_key=b"org-1")
    b = DeidOptions(style="hash", hash_key=b"org-2")
    one = deidentify("电话13912345678", options=a)[0]
    assert one == deidentify("电话 139 1234 5678".replace(" ", ""), options=a)[0]
    assert one != deidentify("电话13912345678", options=b)[0]
    assert one.startswith("电话[PHONE:") and len(one) == len("电话[PHONE:12345678]")


def test_an_unknown_placeholder_style_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="unknown placeholder style"):
        DeidOptions(style="stars")


def test_a_single_line_over_the_limit_is_refused_unread_and_nothing_is_written(tmp_path: Path) -> None:
    import pytest

    from datasets.pipeline import PipelineError, validate

    src, dst = tmp_path / "huge.jsonl", tmp_path / "documents.jsonl"
    with open(src, "wb") as fh:  # a 3 MiB single line against a 1 MiB limit stands in for 200 MB vs 8 MiB
        fh.write(b'{"text": "')
        for _ in range(3):
            fh.write(b"13812345678 " * (1024 * 1024 // 12 + 1))
        fh.write(b'"}\n')
    with pytest.raises(PipelineError) as caught:
        validate(src, dst, fmt="jsonl", max_line_bytes=1024 * 1024)
    assert (caught.value.code, caught.value.line) == ("line_too_long", 1)
    assert "longer than" in caught.value.message or "line" in caught.value.message
    assert not dst.exists()
