"""Bad input to the de-identifier with its tagger (issue 28): mixed scripts, zero-width and full-width
evasions, lone surrogates that JSON can carry, very long lines; the pipeline stage writes all or nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from datasets.deid import deidentify, find_pii


def test_zero_width_characters_inside_a_name_and_a_phone_are_replaced_whole() -> None:
    text = "姓名：王\u200b小明，电话138\u200d1234 5678"
    assert [(f.type, f.value) for f in find_pii(text)] == [("NAME", "王\u200b小明"), ("PHONE", "138\u200d1234 5678")]
    assert deidentify(text)[0] == "姓名：[NAME]，电话[PHONE]"


def test_full_width_latin_names_are_found() -> None:
    text = "Ｄｅａｒ Ｍｒｓ Ｐｏｌｌａｒｄ，"
    assert [(f.type, f.value) for f in find_pii(text)] == [("NAME", "Ｐｏｌｌａｒｄ")]


def test_mixed_scripts_in_one_record() -> None:
    text = "Клиент: Иван Петров, 客户：周欢，电话 +7 912 345-67-89；مرحبا 13912345678"
    assert [(f.type, f.value) for f in find_pii(text)] == [
        ("NAME", "周欢"),
        ("PHONE", "+7 912 345-67-89"),
        ("PHONE", "13912345678"),
    ]


def test_a_lone_surrogate_does_not_stop_the_tagger() -> None:
    """JSON may carry ``"\\udc80"``; the tagger (Rust) takes valid Unicode only. Before: UnicodeEncodeError."""
    assert deidentify("姓名：王小明\udc80，电话13812345678") == (
        "姓名：[NAME]\udc80，电话[PHONE]",
        {"NAME": 1, "PHONE": 1},
    )
    assert deidentify("\x00\x01车主王小明说\x7f")[0] == "\x00\x01车主[NAME]说\x7f"


def test_a_very_long_line_is_tagged_in_bounded_pieces() -> None:
    from datasets.deid.names import _SEGMENT, _segments

    filler = "依照本法规定，应当履行义务的单位应当及时办理。" * 8000  # ~184,000 characters, one line
    text = f"原告：李海涛。{filler}车主华桂珍的电话。{filler}证人：欧阳娜娜"
    pieces = list(_segments(text))
    assert max(len(p) for p, _ in pieces) <= _SEGMENT
    assert "".join(p for p, _ in pieces) == text
    assert pieces[0][1] == 0 and all(text[o : o + len(p)] == p for p, o in pieces)
    assert [f.value for f in find_pii(text)] == ["李海涛", "华桂珍", "欧阳娜娜"]


def test_a_lone_surrogate_escape_in_jsonl_is_a_bad_line_with_a_clear_message(tmp_path: Path) -> None:
    """Before: validate crashed with UnicodeEncodeError writing its output (no line, no code)."""
    from datasets.pipeline import PipelineError, validate

    src = tmp_path / "upload.jsonl"
    src.write_text(
        json.dumps({"id": "1", "text": "车主华桂珍，\udc80电话13812345678"})
        + "\n"
        + json.dumps({"text": "好 😀"})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(PipelineError) as caught:
        validate(src, tmp_path / "documents.jsonl", fmt="jsonl")
    assert (caught.value.code, caught.value.line) == ("structure", 1)
    assert str(caught.value).endswith("line 1: a \\udc80 escape without its pair: not valid Unicode")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["upload.jsonl"]  # nothing half-written
    report = validate(src, tmp_path / "documents.jsonl", fmt="jsonl", max_bad_lines=1)
    assert (report["documents"], report["bad_lines"]) == (1, 1)


def test_the_stage_writes_nothing_when_it_fails_half_way(tmp_path: Path, monkeypatch: Any) -> None:
    from datasets.pipeline import PipelineError, deidentify_file, stages, validate

    src = tmp_path / "upload.jsonl"
    src.write_text(
        "".join(json.dumps({"id": str(i), "text": f"车主华桂珍{i}号，电话13812345678"}) + "\n" for i in range(5)),
        encoding="utf-8",
    )
    docs, dst = tmp_path / "documents.jsonl", tmp_path / "deidentified.jsonl"
    validate(src, docs, fmt="jsonl")
    before = sorted(p.name for p in tmp_path.iterdir())
    calls = 0
    real = stages.DeidAccumulator.line

    def failing(self: Any, doc: dict[str, Any]) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise PipelineError("deidentify", "interrupted", code="input")
        return real(self, doc)

    monkeypatch.setattr(stages.DeidAccumulator, "line", failing)
    with pytest.raises(PipelineError, match="interrupted"):
        deidentify_file(docs, dst)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, no temporary file left
    monkeypatch.setattr(stages.DeidAccumulator, "line", real)
    report = deidentify_file(docs, dst)
    assert (report["replacements"]["NAME"], report["replacements"]["PHONE"]) == (5, 5)
