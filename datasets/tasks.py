"""Celery tasks of the datasets app: thin wrappers around ``datasets.services``; each is safe to run twice."""

from __future__ import annotations

import logging
from pathlib import Path

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(name="datasets.tasks.import_corpus")
def import_corpus(path: str, domain: str) -> int | None:
    """Import one corpus file (``services.corpus_import``); returns the version id, None on a corpus error
    (recorded on the dataset). A second run returns the existing version."""
    from datasets.pipeline import PipelineError
    from datasets.services import corpus_import

    try:
        return corpus_import(path=Path(path), domain=domain).pk
    except PipelineError as exc:
        log.error("corpus import of %s failed: %s", path, exc)
        return None


DEFAULT_DEID_CHUNK_BYTES = 64 * 1024 * 1024
"""Uploads whose validated text is larger than ``settings.DATASET_DEID_CHUNK_BYTES`` (default this) are
de-identified in chunks of that size by parallel tasks."""


@shared_task(name="datasets.tasks.upload_stage")
def upload_stage(upload_id: int, stage: str, chunked: bool = True) -> None:
    """Run one pipeline stage of an upload (``services.upload_run_stage``), then enqueue the next one.

    A stage that finished before is reused by the pipeline, so a redelivered or retried task redoes
    nothing; an upload that is not ``processing`` (failed, ready) is left alone. A large ``deidentify``
    stage first fans out (``_deidentify_in_chunks``) and comes back here with ``chunked=False``.
    """
    from datasets.services import upload_run_stage

    if stage == "deidentify" and chunked and _deidentify_in_chunks(upload_id):
        return
    upload_run_stage(upload_id=upload_id, stage=stage)


def _deidentify_in_chunks(upload_id: int) -> bool:
    """Fan the upload's ``deidentify`` stage out as a group of ``upload_deid_chunk`` tasks when its validated
    text is larger than one chunk. No result backend is needed (the embedded broker has none): each chunk
    records its output and report on disk, and the task that finds every chunk finished and wins the
    claim (``pipeline.parallel.claim_merge``) merges them — writing the stage output and report under the
    serial stage key — and enqueues the ordinary stage with ``chunked=False``, which then finds the output
    finished, records the report and enqueues the next stage. A chunk that fails hands over to that same
    ordinary stage (serial, or the error recorded). Returns False when there is nothing to fan out."""
    from celery import group
    from django.conf import settings

    from datasets.choices import UploadStatus
    from datasets.models import Upload
    from datasets.pipeline.common import finished_report
    from datasets.pipeline.parallel import options_to_dict, plan_chunks, reset_claim
    from datasets.pipeline.stages import deid_stage_key
    from datasets.policy import deid_options_for

    upload = Upload.objects.select_related("organization").filter(pk=upload_id).first()
    if upload is None or upload.status != UploadStatus.PROCESSING:
        return False
    src, dst = upload.workdir / "documents.jsonl", upload.workdir / "deidentified.jsonl"
    chunk_bytes = int(getattr(settings, "DATASET_DEID_CHUNK_BYTES", DEFAULT_DEID_CHUNK_BYTES))
    if not src.is_file() or src.stat().st_size <= chunk_bytes:
        return False
    options = deid_options_for(upload.organization)
    if finished_report(dst, deid_stage_key(src, options)) is not None:
        return False
    chunks = [list(c) for c in plan_chunks(src, chunk_bytes)]
    opts = options_to_dict(options)
    reset_claim(dst)  # a merge that died half-way must be claimable again
    group(upload_deid_chunk.s(upload_id, str(src), str(dst), c, chunks, opts) for c in chunks).apply_async()
    log.info("upload %s: de-identifying %d chunks in parallel", upload_id, len(chunks))
    return True


@shared_task(name="datasets.tasks.upload_deid_chunk")
def upload_deid_chunk(upload_id: int, src: str, dst: str, chunk: list, chunks: list, options: dict) -> None:  # type: ignore[type-arg]
    """One chunk of an upload's de-identify stage; the last one to finish merges and moves the upload on."""
    from datasets.pipeline.parallel import claim_merge, deidentify_chunk, finished_chunk_reports, merge_chunks

    try:
        index, start, end = chunk
        deidentify_chunk(src, dst, index, start, end, options)
    except Exception:
        log.exception("upload %s: chunk %s failed; falling back to the serial stage", upload_id, chunk[0])
        if claim_merge(dst):
            upload_stage.delay(upload_id, "deidentify", chunked=False)
        raise
    reports = finished_chunk_reports(src, dst, [tuple(c) for c in chunks], options)
    if reports is not None and claim_merge(dst):
        merge_chunks(src, dst, [tuple(c) for c in chunks], reports, options)
        upload_stage.delay(upload_id, "deidentify", chunked=False)


@shared_task(name="datasets.tasks.deid_chunk")
def deid_chunk(src: str, dst: str, index: int, start: int, end: int, options: dict) -> dict:  # type: ignore[type-arg]
    """De-identify one chunk of a pipeline file (``pipeline.parallel.deidentify_chunk``); idempotent."""
    from datasets.pipeline.parallel import deidentify_chunk

    return deidentify_chunk(src, dst, index, start, end, options)


@shared_task(name="datasets.tasks.deid_merge")
def deid_merge(reports: list, src: str, dst: str, chunks: list, options: dict) -> dict:  # type: ignore[type-arg]
    """Chord callback: join the chunks in order (``pipeline.parallel.merge_chunks``)."""
    from datasets.pipeline.parallel import merge_chunks

    return merge_chunks(src, dst, [tuple(c) for c in chunks], reports, options)
