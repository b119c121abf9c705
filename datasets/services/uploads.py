"""The upload pipeline: store an uploaded corpus, run its stages one Celery task each, record the private
version it becomes."""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify
from django.utils.translation import gettext as _

from datasets import tasks
from datasets.choices import UPLOAD_TRANSITIONS, DeidStatus, Domain, UploadFormat, UploadStatus, Visibility
from datasets.errors import DatasetError, InvalidTransition, UploadRefused
from datasets.models import Upload
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User
from datasets.selectors import versions_mountable_by
from datasets.services.catalog import dataset_create, dataset_version_create, license_version_create
from datasets.services.common import _require_member
from datasets.services.corpus import _first_text, _pipeline_counts, _relative, pipeline_percent
from portal.permissions import Action, authorize

UPLOAD_STAGES = ("validate", "deidentify", "deduplicate", "tokenizer", "shards", "statistics", "finish")
"""Celery runs one task per stage, in this order; ``finish`` records the resulting private version."""

OWN_DATA_LICENSE_TEXT = (
    "Data uploaded by your organization. It stays private to your organization; you confirm that you have the "
    "right to use it for training and that personal data in it may be processed for de-identification."
)
_COPY_CHUNK = 1024 * 1024


def _chunks(file: Any) -> Any:
    """Chunks of an uploaded file: Django's ``UploadedFile.chunks`` or ``read(1 MiB)`` of a binary file."""
    if hasattr(file, "chunks"):
        yield from file.chunks(_COPY_CHUNK)
        return
    while chunk := file.read(_COPY_CHUNK):
        yield chunk


def upload_transition(*, upload: Upload, to: UploadStatus | str, **fields: Any) -> Upload:
    """Move ``upload`` to status ``to`` if ``UPLOAD_TRANSITIONS`` allows it (compare-and-set on the old
    status), saving ``fields`` too; raises ``InvalidTransition`` otherwise. (The signature every transition
    function shares: keyword-only, the object by its noun, ``to``; the caller writes the audit row.)"""
    old = upload.status
    if to not in UPLOAD_TRANSITIONS[old]:
        raise InvalidTransition(f"upload {upload.pk}: {old} → {to} is not allowed")
    fields = {**fields, "status": to, "updated_at": timezone.now()}
    if Upload.objects.filter(pk=upload.pk, status=old).update(**fields) != 1:
        raise InvalidTransition(f"upload {upload.pk} changed status concurrently")
    for key, value in fields.items():
        setattr(upload, key, value)
    return upload


def upload_create(
    *,
    organization: Organization,
    user: User,
    file: Any,
    name: str,
    fmt: UploadFormat | str,
    text_column: str = "",
    keep_original: bool = False,
    domain: Domain | str = Domain.OTHER,
    original_filename: str = "",
    tokenizer_from: int | None = None,
) -> Upload:
    """Store an uploaded corpus under ``DATA_DIR/uploads/<id>/`` and start its pipeline (after commit).

    ``file`` is a Django ``UploadedFile`` (already streamed to a temporary file by the upload handlers) or
    any binary file object; it is copied in 1 MiB chunks, never read whole. Raises ``UploadRefused``
    (nothing stored, no row) for an unknown format, a CSV without ``text_column``, or more than
    ``settings.DATASET_UPLOAD_MAX_BYTES`` bytes (counted while copying) or a ``tokenizer_from`` version the
    organization cannot mount (that version's tokenizer is otherwise copied instead of training one), and
    ``DatasetNotFound`` when ``user`` is not a member.
    """
    _require_member(organization, user)
    authorize(user=user, organization=organization, action=Action.DATASETS_LICENSE)
    limit: int = settings.DATASET_UPLOAD_MAX_BYTES
    if fmt not in UploadFormat.values:
        raise UploadRefused(_("Unknown format %(fmt)s; use JSONL, TXT or CSV.") % {"fmt": fmt})
    if fmt == UploadFormat.CSV and not text_column.strip():
        raise UploadRefused(_("A CSV upload needs the name of the column that holds the text."))
    declared = getattr(file, "size", None)
    too_big = _("The file is larger than the upload limit of %(limit)s bytes.") % {"limit": f"{limit:,}"}
    if declared is not None and declared > limit:
        raise UploadRefused(too_big)
    if tokenizer_from is not None and not versions_mountable_by(organization).filter(pk=tokenizer_from).exists():
        raise UploadRefused(_("That tokenizer is not available to your organization."))
    root = Path(settings.DATA_DIR) / "uploads"
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".incoming-{uuid.uuid4().hex}.partial"
    size = 0
    try:
        with open(partial, "wb") as out:
            for chunk in _chunks(file):
                size += len(chunk)
                if size > limit:
                    raise UploadRefused(too_big)
                out.write(chunk)
        with transaction.atomic():
            upload = Upload.objects.create(
                organization=organization,
                user=user,
                name=name.strip()[:200] or original_filename[:200] or "upload",
                format=fmt,
                text_column=text_column.strip() if fmt == UploadFormat.CSV else "",
                original_filename=original_filename[:255],
                size_bytes=size,
                keep_original=keep_original,
                domain=domain,
                tokenizer_from_id=tokenizer_from,
            )
            final = root / str(upload.pk) / f"original.{fmt}"
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial, final)
            upload.stored_path = _relative(final)
            upload.save(update_fields=["stored_path"])
            audit_log(
                action="datasets.upload_create",
                actor=user,
                organization=organization,
                obj=upload,
                extra={"format": str(fmt), "bytes": size, "keep_original": keep_original},
            )
            transaction.on_commit(lambda: tasks.upload_stage.delay(upload.pk, UPLOAD_STAGES[0]))
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return upload


def upload_retry(*, upload: Upload, user: User) -> Upload:
    """Start a failed upload again from the stage that failed; finished stages are reused, not redone.

    Raises ``UploadRefused`` when the input itself was refused (its file is gone: upload a corrected one)
    and ``InvalidTransition`` unless the upload is ``failed``.
    """
    _require_member(upload.organization, user)
    stage = (upload.error or {}).get("stage") or UPLOAD_STAGES[0]
    if stage == "validate":
        raise UploadRefused(_("This file was refused; correct it and upload it again."))
    with transaction.atomic():
        upload_transition(upload=upload, to=UploadStatus.PROCESSING, stage=stage, error={})
        audit_log(
            action="datasets.upload_retry",
            actor=user,
            organization=upload.organization,
            obj=upload,
            extra={"stage": stage},
        )
        transaction.on_commit(lambda: tasks.upload_stage.delay(upload.pk, stage))
    return upload


def _upload_fail(upload: Upload, error: dict[str, Any]) -> None:
    """Record a failure. A refused input (validate stage) leaves nothing behind: the stage outputs and,
    unless the user asked to keep it, the stored original are removed."""
    if error.get("stage") == "validate":
        shutil.rmtree(upload.workdir, ignore_errors=True)
        if not upload.keep_original and upload.original_path is not None:
            upload.original_path.unlink(missing_ok=True)
            shutil.rmtree(upload.original_path.parent, ignore_errors=True)
            upload.stored_path = ""
    with transaction.atomic():
        upload_transition(upload=upload, to=UploadStatus.FAILED, error=error, stored_path=upload.stored_path)
        audit_log(
            action="datasets.upload_fail",
            actor=None,
            organization=upload.organization,
            obj=upload,
            extra={"stage": error.get("stage"), "code": error.get("code"), "message": error.get("message")},
        )


def upload_run_stage(*, upload_id: int, stage: str) -> Upload | None:
    """Run ``stage`` of an upload's pipeline and enqueue the next one; returns the upload (None if gone).

    The first stage moves ``received`` to ``processing``. Progress is written to ``Upload.stage`` /
    ``percent``. A ``PipelineError`` marks the upload ``failed`` with ``error = PipelineError.as_dict()``
    (stage, code, message, line); any other exception is recorded as stage + "internal error" and re-raised.
    An upload that is not processing (ready, failed) is left alone, so a duplicate task does nothing.
    """
    from datasets import pipeline as p

    upload = Upload.objects.select_related("organization").filter(pk=upload_id).first()
    if upload is None:
        return None
    if upload.status == UploadStatus.RECEIVED and stage == UPLOAD_STAGES[0]:
        upload_transition(upload=upload, to=UploadStatus.PROCESSING, stage=stage, percent=0)
    if upload.status != UploadStatus.PROCESSING:
        return upload
    Upload.objects.filter(pk=upload.pk).update(stage=stage, updated_at=timezone.now())
    work = upload.workdir
    work.mkdir(parents=True, exist_ok=True)
    original = upload.original_path
    # only ``validate`` reads the source, and it refuses a missing one below
    from datasets.policy import deid_options_for

    run = p.PipelineRun(  # only ``validate`` reads the source, and it refuses a missing one below
        original or work,
        work,
        upload.format,  # type: ignore[arg-type]
        upload.text_column or None,
        deid_options=deid_options_for(upload.organization),
        tokenizer_source=upload.tokenizer_from.tokenizer_file if upload.tokenizer_from is not None else None,
        tokenizer_source_version=upload.tokenizer_from_id,
    )
    last = {"percent": -1}
    thread = threading.get_ident()

    def progress(done: int, total: int) -> None:
        percent = pipeline_percent(stage, done, total)
        if percent != last["percent"] and threading.get_ident() == thread:  # see corpus_import
            last["percent"] = percent
            Upload.objects.filter(pk=upload.pk).update(percent=percent, updated_at=timezone.now())

    reports = dict(upload.report or {})
    try:
        if stage == "finish":
            return _upload_finish(upload, reports)
        if stage == "validate" and (original is None or not original.is_file()):
            raise p.PipelineError("validate", "the uploaded file is no longer stored", code="input")
        report = p.run_stage(stage, run, progress)
        # the shard list stays in the shard folder's index, not in the upload's report
        reports[stage] = {k: v for k, v in report.items() if k != "shards"} if stage == "shards" else report
    except p.PipelineError as exc:
        _upload_fail(upload, exc.as_dict())
        return upload
    except Exception as exc:
        _upload_fail(upload, {"stage": stage, "code": "internal", "message": f"internal error: {exc}", "line": None})
        raise
    nxt = UPLOAD_STAGES[UPLOAD_STAGES.index(stage) + 1]
    Upload.objects.filter(pk=upload.pk).update(report=reports, percent=pipeline_percent(stage, 1, 1))
    upload.report = reports
    transaction.on_commit(lambda: tasks.upload_stage.delay(upload.pk, nxt))
    return upload


def _upload_finish(upload: Upload, reports: dict[str, Any]) -> Upload:
    """Record the finished pipeline as a private version of the organization's dataset named like the upload."""
    work = upload.workdir
    stats = json.loads((work / "statistics.json").read_text(encoding="utf-8"))
    source = [
        {
            "file": upload.original_filename or f"upload-{upload.pk}.{upload.format}",
            "bytes": upload.size_bytes,
            "sha256": reports["validate"]["input_sha256"],
        }
    ]
    lv = license_version_create(
        slug="own-data",
        name="Own data (private to the uploading organization)",
        text=OWN_DATA_LICENSE_TEXT,
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    org = upload.organization
    base = slugify(upload.name, allow_unicode=True)[:60] or "upload"
    with transaction.atomic():
        dataset = dataset_create(
            slug=f"org{org.pk}-{base}",
            name=upload.name,
            domain=upload.domain,
            description=_("Uploaded by %(org)s.") % {"org": org.name},
            publisher=org,
            visibility=Visibility.PRIVATE,
            acting_user=upload.user,
        )
        if dataset.publisher_id != org.pk:  # pragma: no cover - slugs are prefixed by the organization id
            raise DatasetError("dataset slug collision")
        version = dataset_version_create(
            dataset=dataset,
            license_version=lv,
            statistics=stats,
            deid_report=reports.get("deidentify", {}),
            deid_status=DeidStatus.DEIDENTIFIED,
            shard_dir=_relative(work / "shards"),
            tokenizer_path=_relative(work / "shards" / "tokenizer.json"),
            source_files=source,
            sample=_first_text(work / "deduplicated.jsonl"),
            pipeline=_pipeline_counts(reports),
            acting_user=upload.user,
        )
        upload_transition(
            upload=upload, to=UploadStatus.READY, stage="finish", percent=100, dataset_version=version, report=reports
        )
        audit_log(
            action="datasets.upload_ready",
            actor=upload.user,
            organization=org,
            obj=upload,
            extra={"version": version.pk, "documents": version.documents},
        )
    # The validated copy still holds personal data; the original goes unless the user asked to keep it.
    (work / "documents.jsonl").unlink(missing_ok=True)
    if not upload.keep_original and upload.original_path is not None:
        shutil.rmtree(upload.original_path.parent, ignore_errors=True)
        Upload.objects.filter(pk=upload.pk).update(stored_path="")
        upload.stored_path = ""
    return upload
