"""The held-out de-identification set (``deid_heldout/``): its test part is frozen (SHA-256 in ``FROZEN``),
every label is an exact span of its text, and the generator never rewrites the frozen part."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections import Counter
from pathlib import Path

HERE = Path(__file__).parent / "deid_heldout"
TEST = HERE / "test.jsonl"
DEV = HERE / "dev.jsonl"


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_test_part_is_the_frozen_file() -> None:
    want = (HERE / "FROZEN").read_text(encoding="utf-8").split()
    assert want[1] == "test.jsonl"
    assert hashlib.sha256(TEST.read_bytes()).hexdigest() == want[0]


def test_every_label_is_an_exact_span_and_the_parts_do_not_share_a_text() -> None:
    test, dev = _records(TEST), _records(DEV)
    for r in test + dev:
        for t, s, e, value in r["spans"]:
            assert r["text"][s:e] == value, (r["id"], t)
        spans = sorted((s, e) for _, s, e, _ in r["spans"])
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans)), r["id"]  # no overlaps
    assert not {r["text"] for r in test} & {r["text"] for r in dev}
    assert {r["part"] for r in test} == {"test"} and {r["part"] for r in dev} == {"dev"}
    shapes = Counter((r["shape"], r["source"]) for r in test)
    for shape in ("zh-chat", "zh-customer", "zh-medical", "zh-hr", "zh-court", "log"):
        assert shapes[(shape, "template")] >= 24 and shapes[(shape, "hand")] >= 3, shape
    for shape in ("gb-letter-form", "de-letter-form", "in-letter-form", "us-letter-form"):
        assert shapes[(shape, "template")] >= 24 and shapes[(shape, "hand")] >= 3, shape


def test_the_generator_leaves_the_frozen_part_alone(tmp_path: Path, monkeypatch: object) -> None:
    import sys

    sys.path.insert(0, str(HERE))
    try:
        import generate
    finally:
        sys.path.remove(str(HERE))
    before = TEST.read_bytes()
    for name in ("FROZEN", "handwritten.txt"):
        (tmp_path / name).write_bytes((HERE / name).read_bytes())
    (tmp_path / "test.jsonl").write_bytes(before)
    monkeypatch.setattr(generate, "HERE", tmp_path)  # type: ignore[attr-defined]
    monkeypatch.setattr(generate, "FROZEN", tmp_path / "FROZEN")  # type: ignore[attr-defined]
    assert generate.main([]) == 0
    assert (tmp_path / "test.jsonl").read_bytes() == before
    assert (tmp_path / "dev.jsonl").read_bytes() == DEV.read_bytes()  # dev is reproducible from the seed


def _threshold_ok(scores: dict[str, tuple[int, int, int]]) -> dict[str, tuple[float, float]]:
    """Types below 99 % recall or 97 % precision, with their figures."""
    low = {}
    for t, (tp, fp, fn) in scores.items():
        recall = tp / (tp + fn) if tp + fn else 1.0
        precision = tp / (tp + fp) if tp + fp else 1.0
        if recall < 0.99 or precision < 0.97:
            low[t] = (round(recall, 4), round(precision, 4))
    return low


def test_the_frozen_test_part_scores_with_exact_counts_per_type() -> None:
    """Recall and precision per type on the frozen part only (the dev part tuned the detector). The first
    score of this part, before changes informed by it, is in ``deid_heldout/FIRST_LOOK.txt``; what happened
    after, and the misses left, in ``deid_heldout/ADJUDICATION.md``. No label of the frozen part was changed."""
    from datasets.deid.evaluate import score, table

    scores, errors = score(_records(TEST))
    print("\n" + table(scores))
    assert scores == {
        "EMAIL": (89, 0, 0),
        "IP": (50, 0, 0),
        "ID_NUMBER": (18, 0, 0),
        "NATIONAL_ID": (43, 0, 0),
        "BANK_CARD": (40, 0, 0),
        "PASSPORT": (16, 0, 0),
        "PHONE": (178, 0, 0),
        "NAME": (583, 0, 5),
        "ADDRESS": (47, 0, 0),
        "BIRTH_DATE": (37, 0, 0),
        "LICENSE_PLATE": (16, 0, 0),
    }
    assert _threshold_ok(scores) == {}
    assert sorted((e["error"], e["type"], e["span"]) for e in errors) == [
        ("FN", "NAME", "严冬"),
        ("FN", "NAME", "敬杨"),
        ("FN", "NAME", "方正"),
        ("FN", "NAME", "申丹"),
        ("FN", "NAME", "雷雨"),
    ]


def test_the_dev_part_scores_with_exact_counts_per_type() -> None:
    from datasets.deid.evaluate import score

    scores, _ = score(_records(DEV))
    assert scores == {
        "EMAIL": (13, 0, 0),
        "IP": (20, 0, 0),
        "ID_NUMBER": (37, 0, 0),
        "NATIONAL_ID": (28, 0, 0),
        "BANK_CARD": (30, 0, 0),
        "PASSPORT": (5, 0, 0),
        "PHONE": (123, 0, 0),
        "NAME": (387, 0, 3),
        "ADDRESS": (70, 0, 0),
        "BIRTH_DATE": (55, 0, 0),
        "LICENSE_PLATE": (16, 0, 0),
    }
    assert _threshold_ok(scores) == {}
