"""The streaming dataset pipeline: bad uploads, de-identified shards, round trips, exact statistics,
retries, and the corpora folder's document counts. Pure: run with ``-p no:django``."""

from __future__ import annotations

import hashlib
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from datasets.pipeline import (
    MAX_REPORTED_ERRORS,
    PipelineError,
    corpus_files,
    count_documents,
    deduplicate,
    deidentify_file,
    load_tokenizer,
    read_corpus_folder,
    run_pipeline,
    statistics,
    train_tokenizer,
    validate,
    write_shards,
)
from instances.runtime.shards import ShardSet

CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "corpora")
CORPUS_COUNTS = {
    "legal/legal_zh_lawrefbook.jsonl": 1589,
    "finance/finance_zh_lawrefbook.jsonl": 242,
    "medical/medical_en_medquad.jsonl": 5486,
    "medical/medical_zh_lawrefbook.jsonl": 153,
}
needs_corpora = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"corpora folder {CORPORA} not present")

# Identifiers planted in the test corpus, in the notation written and as bare digits.
PII = {
    "ID_NUMBER": ["11010519491231002X", "440308199003071235"],
    "PHONE": ["13812345678", "139-1234-5678", "+86 150 1234 5678", "010-62345678"],
    "EMAIL": ["zhang.san@example.com", "li_si@mail.example.org"],
    "BANK_CARD": ["6222021234567890128", "4111 1111 1111 1111"],
}


def _write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text(
        "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs),
        encoding="utf-8",
    )
    return path


def _filler() -> list[str]:
    """Some real text (first documents of the legal corpus, cut short) or a fixed stand-in."""
    legal = CORPORA / "legal" / "legal_zh_lawrefbook.jsonl"
    if legal.is_file():
        out = []
        with open(legal, encoding="utf-8") as fh:
            for _ in range(12):
                out.append(json.loads(fh.readline())["text"][:3000])
        return out
    return ["第一条 为了保护公民的合法权益，根据宪法，制定本法。The parties agree as follows.\n" * 40] * 12


def _pii_corpus(tmp_path: Path) -> Path:
    filler = _filler()
    docs = []
    for i, text in enumerate(filler):
        docs.append({"id": f"f{i}", "title": f"文档{i}", "text": text})
    docs += [
        {
            "id": "p1",
            "title": "客户资料",
            "text": f"{filler[0][:500]}\n客户身份证号{PII['ID_NUMBER'][0]}，手机13812345678。",
        },
        {
            "id": "p2",
            "text": f"联系电话：139-1234-5678，邮箱 zhang.san@example.com。{filler[1][:400]}",
        },
        {
            "id": "p3",
            "text": "Contact +86 150 1234 5678 or li_si@mail.example.org, office 010-62345678.",
        },
        {
            "id": "p4",
            "text": f"退款至银行卡 6222021234567890128 或 4111 1111 1111 1111，证件 {PII['ID_NUMBER'][1]}",
        },
        {
            "id": "p5",
            "text": "无效编号 110105194912310021 和订单号 2023061512345678901 保留。",
        },
        {
            "id": "dup",
            "title": "重复",
            "text": "  " + filler[2].replace("\n", " \n ") + "  ",
        },
        {"id": "eot", "text": "文本中出现 <|endoftext|> 字样也不能切断文档。"},
    ]
    return _write_jsonl(tmp_path / "upload.jsonl", docs)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("pipeline")
    upload = _pii_corpus(tmp)
    seen: list[tuple[str, int, int]] = []
    reports = run_pipeline(
        upload,
        tmp / "work",
        fmt="jsonl",
        vocab_size=600,
        keep_identified=True,
        on_progress=lambda s, d, t: seen.append((s, d, t)),
    )
    return {
        "tmp": tmp,
        "upload": upload,
        "work": tmp / "work",
        "reports": reports,
        "progress": seen,
    }


def _decoded_documents(shards: Path) -> tuple[list[list[int]], list[str]]:
    s = ShardSet(shards, verify=True)
    ids = s.tokens(0, len(s)).tolist()
    tok = load_tokenizer(shards / s.index["tokenizer"])
    docs: list[list[int]] = []
    cur: list[int] = []
    for t in ids:
        if t == s.eos_id:
            docs.append(cur)
            cur = []
        else:
            cur.append(t)
    assert cur == []  # the stream ends with an eos
    return docs, [tok.decode(d, skip_special_tokens=False) for d in docs]


def _texts(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line]


# --- de-identified shards -----------------------------------------------------------------------


def test_no_planted_identifier_survives_in_the_shards(finished: dict[str, Any]) -> None:
    _, decoded = _decoded_documents(finished["work"] / "shards")
    everything = "\n".join(decoded)
    squeezed = everything.replace(" ", "").replace("-", "")
    for values in PII.values():
        for value in values:
            assert value not in everything
            assert value.replace(" ", "").replace("-", "").lstrip("+") not in squeezed
    for placeholder in ("[ID_NUMBER]", "[PHONE]", "[EMAIL]", "[BANK_CARD]"):
        assert placeholder in everything
    # look-alikes stay: an ID-shaped number with a wrong check digit and no ID label, an order number
    assert "110105194912310021" in everything
    assert "2023061512345678901" in everything


def test_deidentify_report_counts_each_type(finished: dict[str, Any]) -> None:
    report = finished["reports"]["deidentify"]
    assert report["replacements"] == {
        "EMAIL": 2,
        "IP": 0,
        "ID_NUMBER": 2,
        "NATIONAL_ID": 0,
        "BANK_CARD": 2,
        "PASSPORT": 0,
        "PHONE": 4,
        "NAME": 0,
        "ADDRESS": 0,
        "BIRTH_DATE": 0,
        "LICENSE_PLATE": 0,
    }
    assert report["total_replacements"] == 10
    assert report["documents_changed"] == 4
    assert report["documents"] == 19


@needs_corpora  # its exact counts come from the real legal corpus (the stand-in text repeats itself)
def test_shards_round_trip_to_the_same_token_ids(finished: dict[str, Any]) -> None:
    work = finished["work"]
    texts = _texts(work / "deduplicated.jsonl")
    tok = load_tokenizer(work / "tokenizer.json")
    tok.encode_special_tokens = True
    expected = [tok.encode(t, add_special_tokens=False).ids for t in texts]
    docs, decoded = _decoded_documents(work / "shards")
    assert docs == expected
    assert decoded == texts  # byte-level BPE decodes to the exact text
    s = ShardSet(work / "shards")
    assert s.index["documents"] == len(texts) == 18
    assert len(s) == sum(len(e) for e in expected) + len(texts)


def test_a_literal_endoftext_in_a_document_is_not_an_eos(
    finished: dict[str, Any],
) -> None:
    texts = _texts(finished["work"] / "deduplicated.jsonl")
    docs, decoded = _decoded_documents(finished["work"] / "shards")
    i = next(i for i, t in enumerate(texts) if "<|endoftext|>" in t)
    assert 0 not in docs[i]
    assert decoded[i] == "文本中出现 <|endoftext|> 字样也不能切断文档。"


@needs_corpora  # its exact counts come from the real legal corpus (the stand-in text repeats itself)
def test_the_tokenizer_has_eos_as_id_zero(finished: dict[str, Any]) -> None:
    tok = load_tokenizer(finished["work"] / "tokenizer.json")
    assert tok.token_to_id("<|endoftext|>") == 0
    assert tok.get_vocab_size() == 600
    assert finished["reports"]["tokenizer"]["eos_id"] == 0


@needs_corpora  # its exact counts come from the real legal corpus (the stand-in text repeats itself)
def test_duplicates_are_dropped_after_whitespace_normalisation(
    finished: dict[str, Any],
) -> None:
    assert finished["reports"]["deduplicate"] == {
        "documents_in": 19,
        "documents_out": 18,
        "duplicates": 1,
        "reused": False,
    }
    ids = [json.loads(x)["id"] for x in (finished["work"] / "deduplicated.jsonl").read_text().splitlines()]
    assert "dup" not in ids and "f2" in ids


def test_progress_is_reported_per_stage_and_ends_at_the_total(
    finished: dict[str, Any],
) -> None:
    seen = finished["progress"]
    stages = [s for s, _, _ in seen]
    assert list(dict.fromkeys(stages)) == [
        "validate",
        "deidentify",
        "deduplicate",
        "tokenizer",
        "shards",
        "statistics",
    ]
    for stage in set(stages):
        calls = [(d, t) for s, d, t in seen if s == stage]
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)
        assert calls[-1][0] == calls[-1][1] > 0


def test_a_second_run_reuses_every_finished_stage(finished: dict[str, Any]) -> None:
    work = finished["work"]
    before = {p.name: p.stat().st_mtime_ns for p in work.iterdir()}
    again = run_pipeline(finished["upload"], work, fmt="jsonl", vocab_size=600, keep_identified=True)
    assert all(r["reused"] for r in again.values())
    assert {p.name: p.stat().st_mtime_ns for p in work.iterdir()} == before
    assert again["statistics"]["tokens"] == finished["reports"]["statistics"]["tokens"]


# --- statistics on a hand-made corpus ----------------------------------------------------------


def test_statistics_are_exact_on_a_hand_made_corpus(tmp_path: Path) -> None:
    docs = _write_jsonl(
        tmp_path / "docs.jsonl",
        [
            {"id": "1", "title": "", "text": "你好，世界"},  # 5 chars, 15 bytes, 4 CJK
            {
                "id": "2",
                "title": "",
                "text": "Hello world",
            },  # 11 chars, 11 bytes, 10 Latin
            {
                "id": "3",
                "title": "",
                "text": "混合 text 文本",
            },  # 10 chars, 18 bytes, 4 CJK, 4 Latin
        ],
    )
    train_tokenizer(docs, tmp_path / "tok.json", vocab_size=300, min_frequency=1)
    index = write_shards(docs, tmp_path / "tok.json", tmp_path / "shards")
    tok = load_tokenizer(tmp_path / "tok.json")
    tokens = sum(len(tok.encode(t).ids) for t in _texts(docs)) + 3
    stats = statistics(docs, tmp_path / "shards", tmp_path / "stats.json")
    files = sorted((tmp_path / "shards").iterdir())
    assert stats == {
        "documents": 3,
        "bytes": 44,
        "characters": 26,
        "tokens": tokens,
        "cjk_characters": 8,
        "latin_letters": 14,
        "language": "zh",
        "files": [
            {
                "file": p.name,
                "bytes": p.stat().st_size,
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
            }
            for p in files
        ],
        "reused": False,
    }
    assert [f["file"] for f in stats["files"]] == [
        "index.json",
        "shard-00000.bin",
        "tokenizer.json",
    ]
    assert index["tokens"] == tokens
    assert json.loads((tmp_path / "stats.json").read_text())["tokens"] == tokens


def test_language_is_english_for_english_text(tmp_path: Path) -> None:
    docs = _write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": "1", "title": "", "text": "Aspirin 阿司匹林 reduces fever."}],
    )
    train_tokenizer(docs, tmp_path / "t.json", vocab_size=300, min_frequency=1)
    write_shards(docs, tmp_path / "t.json", tmp_path / "s")
    stats = statistics(docs, tmp_path / "s", tmp_path / "st.json")
    assert (stats["cjk_characters"], stats["latin_letters"], stats["language"]) == (
        4,
        19,
        "en",
    )


# --- formats -------------------------------------------------------------------------------------


def test_txt_documents_are_separated_by_blank_lines(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes("\ufeff第一段\n第二行\n\n\n第二篇\r\n\r\n  \n第三篇".encode())
    report = validate(src, tmp_path / "out.jsonl", fmt="txt")
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [
        {"id": "1", "title": "", "text": "第一段\n第二行"},
        {"id": "2", "title": "", "text": "第二篇"},
        {"id": "3", "title": "", "text": "第三篇"},
    ]
    assert (report["documents"], report["lines"]) == (3, 8)
    validate(src, tmp_path / "lines.jsonl", fmt="txt", txt_mode="lines")
    assert _texts(tmp_path / "lines.jsonl") == ["第一段", "第二行", "第二篇", "第三篇"]


def test_csv_reads_the_chosen_column_with_quoted_newlines(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(
        'id,title,body,extra\n7,甲,"第一行\n第二行",x\n8,乙,"引号""内""",y\n9,丙,,z\n',
        encoding="utf-8",
    )
    report = validate(src, tmp_path / "out.jsonl", fmt="csv", text_column="body")
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out == [
        {"id": "7", "title": "甲", "text": "第一行\n第二行"},
        {"id": "8", "title": "乙", "text": '引号"内"'},
    ]
    assert (report["documents"], report["empty_documents"]) == (2, 1)


def test_jsonl_bad_lines_may_be_tolerated_and_are_listed(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"text": "好"}\n{"text": 5}\nnot json\n{"id": 3, "text": "行"}\n',
        encoding="utf-8",
    )
    report = validate(src, tmp_path / "out.jsonl", fmt="jsonl", max_bad_lines=5)
    assert report["documents"] == 2
    assert report["bad_lines"] == 2
    assert report["errors"] == [
        {"line": 2, "message": '"text" is not a string'},
        {"line": 3, "message": "invalid JSON: Expecting value (column 1)"},
    ]
    assert _texts(tmp_path / "out.jsonl") == ["好", "行"]


# --- bad uploads: a specific error, and nothing left behind ------------------------------------


def _assert_refused(tmp_path: Path, src: Path, code: str, **kwargs: Any) -> PipelineError:
    dst = tmp_path / "out.jsonl"
    with pytest.raises(PipelineError) as info:
        validate(src, dst, **kwargs)
    err = info.value
    assert (err.stage, err.code) == ("validate", code)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]  # no output, no partial file
    return err


def test_binary_data_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"text": "ok"}\n\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR')
    err = _assert_refused(tmp_path, src, "binary", fmt="jsonl")
    assert (err.line, err.byte_offset) == (4, 23)
    assert str(err) == "validate (line 4): binary data: NUL byte at byte offset 23; upload a UTF-8 text file"


def test_a_pdf_is_refused_as_binary(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
    err = _assert_refused(tmp_path, src, "binary", fmt="txt")
    assert err.message == "this is a PDF document, not a text file; upload UTF-8 text"


def test_a_nul_byte_after_the_first_64_kib_is_found_on_its_line(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(b"text line\n" * 10000 + b"bad\x00line\n")
    err = _assert_refused(tmp_path, src, "binary", fmt="txt")
    assert (err.line, err.byte_offset) == (10001, 100003)


def test_invalid_utf8_is_refused_with_line_and_byte_offset(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes('{"text": "一"}\n{"text": "二"}\n{"text": "'.encode() + "三".encode("gbk") + b'"}\n')
    err = _assert_refused(tmp_path, src, "encoding", fmt="jsonl")
    assert (err.line, err.byte_offset) == (3, 42)
    assert "invalid UTF-8 at byte offset 42 (byte 0xc8)" in err.message


def test_utf16_is_refused_as_an_encoding_error(tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes("你好".encode("utf-16"))
    err = _assert_refused(tmp_path, src, "encoding", fmt="txt")
    assert err.message == "the file is UTF-16 encoded; save it as UTF-8"


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"")
    assert _assert_refused(tmp_path, src, "empty", fmt="jsonl").message == "the file is empty"


def test_a_file_of_blank_documents_is_refused_as_empty(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('\n{"text": "  "}\n\n', encoding="utf-8")
    err = _assert_refused(tmp_path, src, "empty", fmt="jsonl")
    assert err.message == "no documents found (1 empty document(s) skipped)"


def test_a_50_mb_single_line_is_refused_without_reading_it_whole(
    tmp_path: Path,
) -> None:
    src = tmp_path / "in.jsonl"
    with open(src, "wb") as fh:
        fh.write(b'{"text": "')
        block = b"a" * (1024 * 1024)
        fh.writelines(block for _ in range(50))
        fh.write(b'"}\n')
    tracemalloc.start()
    try:
        err = _assert_refused(tmp_path, src, "line_too_long", fmt="jsonl")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert err.line == 1
    assert err.message.startswith("line 1 is longer than the limit of 8388608 bytes")
    assert peak < 20 * 1024 * 1024  # one bounded read (8 MiB + 1), not 50 MB


def test_a_csv_without_the_column_names_the_available_columns(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text("id,title,content\n1,a,b\n", encoding="utf-8")
    err = _assert_refused(tmp_path, src, "missing_column", fmt="csv", text_column="text")
    assert err.message == "column 'text' is not in the CSV header; available columns: 'id', 'title', 'content'"
    assert err.line == 1


def test_json_errors_are_listed_with_line_numbers_and_capped(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    lines = ['{"text": "ok"}'] + ["{bad" if i % 2 else '{"title": "no text"}' for i in range(30)]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _assert_refused(tmp_path, src, "structure", fmt="jsonl")
    assert len(err.errors) == MAX_REPORTED_ERRORS
    assert err.errors[:2] == [
        {"line": 2, "message": 'missing string field "text"'},
        {
            "line": 3,
            "message": "invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        },
    ]
    assert err.line == 2
    assert err.message.startswith("30 line(s) could not be read; first: line 2: missing string field")


def test_a_failed_stage_leaves_no_output_and_the_retry_resumes(tmp_path: Path) -> None:
    upload = _write_jsonl(tmp_path / "up.jsonl", [{"text": f"第{i}篇 文本 text {i}"} for i in range(50)])
    work = tmp_path / "work"
    validate(upload, work / "docs.jsonl", fmt="jsonl")
    deidentify_file(work / "docs.jsonl", work / "deid.jsonl")
    deduplicate(work / "deid.jsonl", work / "dedup.jsonl")
    train_tokenizer(work / "dedup.jsonl", work / "tok.json", vocab_size=300)

    def crash(_: int) -> None:
        raise RuntimeError("worker killed")

    with pytest.raises(RuntimeError):
        write_shards(work / "dedup.jsonl", work / "tok.json", work / "shards", on_tokens=crash)
    assert not (work / "shards").exists()
    assert not [p for p in work.iterdir() if p.name.endswith(".partial")]
    # the retry reuses the finished stages and completes the failed one
    assert deduplicate(work / "deid.jsonl", work / "dedup.jsonl")["reused"] is True
    assert train_tokenizer(work / "dedup.jsonl", work / "tok.json", vocab_size=300)["reused"] is True
    index = write_shards(work / "dedup.jsonl", work / "tok.json", work / "shards")
    assert (index["reused"], index["documents"]) == (False, 50)
    # a changed parameter is a different stage run: it is redone
    assert train_tokenizer(work / "dedup.jsonl", work / "tok.json", vocab_size=320)["reused"] is False


def test_the_identified_copy_is_deleted_unless_kept(tmp_path: Path) -> None:
    upload = _write_jsonl(
        tmp_path / "up.jsonl",
        [{"text": f"电话 1381234567{i} 第{i}篇"} for i in range(10)],
    )
    reports = run_pipeline(upload, tmp_path / "w", fmt="jsonl", vocab_size=300)
    assert not (tmp_path / "w" / "documents.jsonl").exists()
    assert reports["deidentify"]["replacements"]["PHONE"] == 10
    again = run_pipeline(upload, tmp_path / "w", fmt="jsonl", vocab_size=300)
    assert all(r["reused"] for r in again.values())
    assert again["validate"]["documents"] == 10


# --- the corpora folder --------------------------------------------------------------------------


@needs_corpora
def test_corpus_files_have_the_documented_document_counts() -> None:
    found = {f"{domain}/{p.name}": count_documents(p) for domain, p in corpus_files(CORPORA)}
    assert found == CORPUS_COUNTS


@needs_corpora
def test_read_corpus_folder_yields_every_document_with_its_domain() -> None:
    per_domain: dict[str, int] = {}
    first: dict[str, Any] | None = None
    for doc in read_corpus_folder(CORPORA):
        first = first or doc
        per_domain[doc["domain"]] = per_domain.get(doc["domain"], 0) + 1
        assert doc["text"] and isinstance(doc["title"], str) and isinstance(doc["source"], str)
    assert per_domain == {"legal": 1589, "finance": 242, "medical": 5486 + 153}
    assert first is not None and first["title"] == "中华人民共和国刑法"
