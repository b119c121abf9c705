"""The de-identify stage in chunks (in-process, a process pool, a Celery chord) gives byte-identical output,
report and shards to the serial run, and a finished chunk is not redone."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from datasets.deid import DeidOptions
from datasets.pipeline import deidentify_file, train_tokenizer, validate, write_shards
from datasets.pipeline.parallel import (
    deidentify_chunk,
    deidentify_parallel,
    options_to_dict,
    plan_chunks,
    process_pool_map,
)

SET = Path(__file__).parent / "deid_set" / "deid_set.jsonl"


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 10x corpus: the labelled set's 1231 texts ten times over (12 310 documents), validated."""
    tmp = tmp_path_factory.mktemp("parallel")
    texts = [json.loads(line)["text"] for line in SET.read_text(encoding="utf-8").splitlines()]
    upload = tmp / "upload.jsonl"
    with open(upload, "w", encoding="utf-8") as fh:
        for copy in range(10):
            for i, text in enumerate(texts):
                fh.write(json.dumps({"id": f"{copy}-{i}", "text": f"{text} 第{copy}份"}, ensure_ascii=False) + "\n")
    out = tmp / "documents.jsonl"
    validate(upload, out, fmt="jsonl")
    return out


def test_chunks_cover_the_file_at_line_ends(documents: Path) -> None:
    chunks = plan_chunks(documents, 100_000)
    data = documents.read_bytes()
    assert chunks[0][1] == 0 and chunks[-1][2] == len(data)
    assert all(a[2] == b[1] for a, b in pairwise(chunks))
    assert all(data[e - 1 : e] == b"\n" for _, _, e in chunks)
    assert len(chunks) == 10  # about 1 MB in 100 kB chunks


def test_parallel_output_report_and_shards_equal_the_serial_run(documents: Path, tmp_path: Path, settings: Any) -> None:
    from datasets.pipeline.parallel import celery_deidentify

    options = DeidOptions(style="pseudonym")
    serial = tmp_path / "serial.jsonl"
    expected = deidentify_file(documents, serial, options=options)
    assert expected["documents"] == 12310 and expected["total_replacements"] > 6000
    runs = {
        "in-process": lambda dst: deidentify_parallel(documents, dst, options=options, chunk_bytes=150_000),
        "2 processes": lambda dst: deidentify_parallel(
            documents, dst, options=options, chunk_bytes=150_000, map_fn=process_pool_map(2)
        ),
        "celery chord": lambda dst: celery_deidentify(documents, dst, options=options, chunk_bytes=150_000).get(),
    }
    tokenizer = tmp_path / "tokenizer.json"
    train_tokenizer(serial, tokenizer, vocab_size=600)
    write_shards(serial, tokenizer, tmp_path / "shards-serial", shard_tokens=50_000)
    serial_shards = {p.name: p.read_bytes() for p in (tmp_path / "shards-serial").iterdir()}
    for name, run in runs.items():
        dst = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        report = run(dst)
        assert dst.read_bytes() == serial.read_bytes(), name
        assert {**report, "reused": False} == expected, name
        assert not dst.with_name(dst.name + ".chunks").exists()
        shards = tmp_path / f"shards-{dst.stem}"
        write_shards(dst, tokenizer, shards, shard_tokens=50_000)
        assert {p.name: p.read_bytes() for p in shards.iterdir()} == serial_shards, name
    # the stage key is shared: the serial stage reuses a parallel output
    assert deidentify_file(documents, tmp_path / "in-process.jsonl", options=options)["reused"] is True


def test_a_finished_chunk_is_not_redone_after_a_crash(documents: Path, tmp_path: Path) -> None:
    dst = tmp_path / "deid.jsonl"
    opts = options_to_dict(DeidOptions())
    chunks = plan_chunks(documents, 300_000)
    first = deidentify_chunk(str(documents), str(dst), *chunks[0], opts)  # then the worker "dies"
    part = dst.with_name(dst.name + ".chunks") / f"{0:05d}-{chunks[0][1]}-{chunks[0][2]}.jsonl"
    stamp = part.stat().st_mtime_ns
    assert deidentify_chunk(str(documents), str(dst), *chunks[0], opts) == first
    calls: list[int] = []
    reused: list[bool] = []

    def counting_map(fn: Any, args: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        out = []
        for a in args:
            calls.append(a[2])
            out.append(fn(*a))
            if a[2] == 0:
                reused.append(part.stat().st_mtime_ns == stamp)
        return out

    report = deidentify_parallel(documents, dst, chunk_bytes=300_000, map_fn=counting_map)
    assert calls == list(range(len(chunks)))
    assert reused == [True]  # chunk 0 was not written again
    assert part.exists() is False  # merged and cleaned up
    assert report == {**deidentify_file(documents, tmp_path / "serial.jsonl"), "reused": False}


def test_a_large_upload_is_deidentified_in_parallel_chunks_with_the_same_result(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    import io

    from datasets.services import upload_create

    settings.DATA_DIR = tmp_path / "data"
    settings.DATASET_UPLOAD_MAX_BYTES = 64 * 1024 * 1024
    texts = [json.loads(line)["text"] for line in SET.read_text(encoding="utf-8").splitlines()[:300]]
    data = "".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    results = []
    for chunk_bytes in (10**9, 4096):  # one serial run, one in about 10 chunks
        settings.DATASET_DEID_CHUNK_BYTES = chunk_bytes
        with django_capture_on_commit_callbacks(execute=True):
            upload = upload_create(
                organization=alice_org,
                user=alice,
                file=io.BytesIO(data.encode()),
                name=f"run-{chunk_bytes}",
                fmt="jsonl",
                original_filename="c.jsonl",
            )
        upload.refresh_from_db()
        assert upload.status == "ready"
        results.append(
            (
                upload.report["deidentify"],
                (upload.workdir / "deduplicated.jsonl").read_bytes(),
                {p.name: p.read_bytes() for p in (upload.workdir / "shards").iterdir() if p.name != "tokenizer.json"},
            )
        )
    (serial_report, serial_text, serial_shards), (chunked_report, chunked_text, chunked_shards) = results
    assert serial_report["reused"] is False and chunked_report["reused"] is True  # merged by the chord
    assert {**chunked_report, "reused": False} == serial_report
    assert chunked_text == serial_text
    assert chunked_shards == serial_shards  # tokenizers trained on identical text agree, so do the shards


def test_a_failing_chunk_hands_over_to_the_serial_stage_once(
    settings: Any,
    tmp_path: Path,
    alice: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io

    from datasets.pipeline import parallel
    from datasets.services import upload_create

    settings.DATA_DIR = tmp_path / "data"
    settings.DATASET_UPLOAD_MAX_BYTES = 64 * 1024 * 1024
    settings.DATASET_DEID_CHUNK_BYTES = 4096
    real = parallel.deidentify_chunk
    calls: list[int] = []

    def flaky(src: str, dst: str, index: int, *rest: Any) -> dict[str, Any]:
        calls.append(index)
        if index == 1:
            raise OSError("disk went away")
        return real(src, dst, index, *rest)

    monkeypatch.setattr(parallel, "deidentify_chunk", flaky)
    texts = [json.loads(line)["text"] for line in SET.read_text(encoding="utf-8").splitlines()[:300]]
    data = "".join(json.dumps({"id": str(i), "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(texts))
    with django_capture_on_commit_callbacks(execute=True):
        upload = upload_create(
            organization=alice_org,
            user=alice,
            file=io.BytesIO(data.encode()),
            name="flaky",
            fmt="jsonl",
            original_filename="c.jsonl",
        )
    upload.refresh_from_db()
    assert upload.status == "ready"
    assert upload.report["deidentify"]["reused"] is False  # done by the serial stage after the failure
    assert upload.report["deidentify"]["documents"] == 300
    assert calls[:2] == [0, 1] and len(calls) > 2
