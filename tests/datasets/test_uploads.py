"""Uploads through the service and task layer: the pipeline chain, progress, bad inputs, retries, privacy."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

GOOD = (
    "".join(
        json.dumps(
            {"id": str(i), "text": f"第{i}条 患者联系电话 13812345678，邮箱 zhang{i}@example.com。合同编号 {i}。"},
            ensure_ascii=False,
        )
        + "\n"
        for i in range(40)
    )
    + json.dumps(
        {"id": "dup", "text": "第1条 患者联系电话 13812345678，邮箱 zhang1@example.com。合同编号 1。"},
        ensure_ascii=False,
    )
    + "\n"
)


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path / "data"
    settings.DATASET_UPLOAD_MAX_BYTES = 64 * 1024 * 1024


def _upload(
    org: Any, user: Any, data: bytes, *, fmt: str = "jsonl", column: str = "", keep: bool = False, capture: Any
) -> Any:
    from datasets.services import upload_create

    with capture(execute=True):
        upload = upload_create(
            organization=org,
            user=user,
            file=io.BytesIO(data),
            name="我的语料",
            fmt=fmt,
            text_column=column,
            keep_original=keep,
            original_filename=f"corpus.{fmt}",
        )
    upload.refresh_from_db()
    return upload


def _nothing_half_made(settings: Any, upload: Any) -> None:
    from datasets.models import Dataset, DatasetVersion

    assert upload.status == "failed"
    assert upload.dataset_version is None
    assert not upload.workdir.exists()
    assert not (Path(settings.DATA_DIR) / "uploads" / str(upload.pk)).exists()
    assert [p.name for p in (Path(settings.DATA_DIR) / "uploads").iterdir()] == []
    assert Dataset.objects.count() == 0
    assert DatasetVersion.objects.count() == 0


def test_a_good_upload_becomes_a_private_deidentified_version(
    settings: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datasets.selectors import versions_mountable_by
    from instances.runtime.shards import ShardSet

    upload = _upload(alice_org, alice, GOOD.encode(), capture=django_capture_on_commit_callbacks)
    assert (upload.status, upload.stage, upload.percent, upload.error) == ("ready", "finish", 100, {})
    version = upload.dataset_version
    assert version.dataset.visibility == "private"
    assert version.dataset.publisher == alice_org
    assert version.documents == 40  # one exact duplicate dropped
    assert upload.report["validate"]["documents"] == 41
    assert upload.report["deduplicate"]["duplicates"] == 1
    assert upload.report["deidentify"]["replacements"]["PHONE"] == 41
    assert upload.report["deidentify"]["replacements"]["EMAIL"] == 41
    shards = ShardSet(version.shard_path)
    assert len(shards) == version.tokens
    raw = b"".join(p.read_bytes() for p in sorted(version.shard_path.glob("shard-*.bin")))
    from tokenizers import Tokenizer

    text = Tokenizer.from_file(str(version.tokenizer_file)).decode(list(shards.tokens(0, len(shards))))
    assert "13812345678" not in text and "@example.com" not in text
    assert raw  # shards hold data
    # the original and the identified copy are gone; the org can mount its own data without an agreement
    assert upload.stored_path == ""
    assert not (Path(settings.DATA_DIR) / "uploads" / str(upload.pk)).exists()
    assert not (upload.workdir / "documents.jsonl").exists()
    assert list(versions_mountable_by(alice_org)) == [version]


def test_the_original_is_kept_when_asked(
    settings: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    upload = _upload(alice_org, alice, GOOD.encode(), keep=True, capture=django_capture_on_commit_callbacks)
    assert upload.status == "ready"
    assert upload.original_path is not None and upload.original_path.read_bytes() == GOOD.encode()


@pytest.mark.parametrize(
    ("data", "fmt", "column", "code", "message"),
    [
        (b"\x00\x01\x02binary\xff" * 10, "jsonl", "", "binary", "binary data: NUL byte at byte offset 0"),
        (b'{"text": "ok"}\n{"text": "caf\xe9"}\n', "jsonl", "", "encoding", "invalid UTF-8 at byte offset 28"),
        (b"", "txt", "", "empty", "the file is empty"),
        (
            b"id,body\n1,hello\n",
            "csv",
            "text",
            "missing_column",
            "column 'text' is not in the CSV header; available columns: 'id', 'body'",
        ),
    ],
    ids=["binary", "invalid-utf8", "empty", "csv-without-column"],
)
def test_a_bad_upload_fails_with_a_specific_error_and_leaves_nothing(
    settings: Any,
    alice: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
    data: bytes,
    fmt: str,
    column: str,
    code: str,
    message: str,
) -> None:
    upload = _upload(alice_org, alice, data, fmt=fmt, column=column, capture=django_capture_on_commit_callbacks)
    assert upload.error["stage"] == "validate"
    assert upload.error["code"] == code
    assert message in upload.error["message"]
    _nothing_half_made(settings, upload)


def test_a_50_mb_single_line_is_refused(
    settings: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    data = b'{"text": "' + b"a" * (50 * 1024 * 1024) + b'"}\n'
    upload = _upload(alice_org, alice, data, capture=django_capture_on_commit_callbacks)
    assert (upload.error["stage"], upload.error["code"], upload.error["line"]) == ("validate", "line_too_long", 1)
    _nothing_half_made(settings, upload)


def test_an_upload_over_the_size_limit_is_refused_before_anything_is_stored(
    settings: Any, alice: Any, alice_org: Any
) -> None:
    from datasets.models import Upload
    from datasets.services import UploadRefused, upload_create

    settings.DATASET_UPLOAD_MAX_BYTES = 1000
    with pytest.raises(UploadRefused, match="larger than the upload limit of 1,000 bytes"):
        upload_create(organization=alice_org, user=alice, file=io.BytesIO(b"x" * 1001), name="big", fmt="txt")
    assert Upload.objects.count() == 0
    assert list((Path(settings.DATA_DIR) / "uploads").iterdir()) == []


def test_a_csv_upload_needs_a_text_column(alice: Any, alice_org: Any) -> None:
    from datasets.models import Upload
    from datasets.services import UploadRefused, upload_create

    with pytest.raises(UploadRefused, match="column"):
        upload_create(organization=alice_org, user=alice, file=io.BytesIO(b"a,b\n1,2\n"), name="c", fmt="csv")
    assert Upload.objects.count() == 0


def test_a_failed_later_stage_is_retried_without_redoing_finished_ones(
    settings: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    from datasets import pipeline
    from datasets.services import upload_retry

    real = pipeline.train_tokenizer

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise pipeline.PipelineError("tokenizer", "disk full", code="tokenizer")

    monkeypatch.setattr(pipeline, "train_tokenizer", broken)
    upload = _upload(alice_org, alice, GOOD.encode(), capture=django_capture_on_commit_callbacks)
    assert upload.status == "failed"
    assert upload.error == {
        "stage": "tokenizer",
        "code": "tokenizer",
        "message": "disk full",
        "line": None,
        "byte_offset": None,
        "errors": [],
    }
    assert set(upload.report) == {"validate", "deidentify", "deduplicate"}
    finished = {
        name: (upload.workdir / name).stat().st_mtime_ns
        for name in ("documents.jsonl", "deidentified.jsonl", "deduplicated.jsonl")
    }
    monkeypatch.setattr(pipeline, "train_tokenizer", real)
    with django_capture_on_commit_callbacks(execute=True):
        upload_retry(upload=upload, user=alice)
    upload.refresh_from_db()
    assert upload.status == "ready"
    assert upload.error == {}
    assert upload.report["tokenizer"]["reused"] is False
    # the stages that had finished were not run again: their outputs are the same files
    assert (upload.workdir / "deidentified.jsonl").stat().st_mtime_ns == finished["deidentified.jsonl"]
    assert (upload.workdir / "deduplicated.jsonl").stat().st_mtime_ns == finished["deduplicated.jsonl"]


def test_a_refused_retry_is_said_once_on_the_upload_page(
    client: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The page shows the messages of the layout once (it rendered them a second time itself)."""
    upload = _upload(alice_org, alice, b"not json\n", capture=django_capture_on_commit_callbacks)
    assert upload.status == "failed"
    client.force_login(alice)
    response = client.post(f"/o/{alice_org.slug}/datasets/uploads/{upload.pk}/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [(f"/o/{alice_org.slug}/datasets/uploads/{upload.pk}/", 302)]
    assert response.content.decode().count("This file was refused; correct it and upload it again.") == 1
    upload.refresh_from_db()
    assert upload.status == "failed"


@pytest.mark.parametrize(
    ("language", "said"),
    [
        ("en", "Some records are not in the expected form; the details name the first ones."),
        ("zh-hans", "部分记录格式不符；详情中列出了最先出错的几条。"),
    ],
)
def test_a_failed_upload_says_what_went_wrong_in_the_readers_language_with_the_parsers_detail(
    client: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any, language: str, said: str
) -> None:
    upload = _upload(alice_org, alice, b"not json\n", capture=django_capture_on_commit_callbacks)
    assert (upload.status, upload.error["code"], upload.error["line"]) == ("failed", "structure", 1)
    client.force_login(alice)
    html = client.get(f"/o/{alice_org.slug}/datasets/uploads/{upload.pk}/", HTTP_ACCEPT_LANGUAGE=language)
    page = html.content.decode()
    assert said in page
    assert f"<code>{upload.error['message']}</code>" in page
    assert (
        upload.error["message"]
        == "1 line(s) could not be read; first: line 1: invalid JSON: Expecting value (column 1)"
    )
