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
    """Start a chord of ``deid_chunk`` tasks over the upload's validated text when it is larger than one
    chunk; its body merges the chunks (writing the stage's output and report under the serial stage key)
    and then runs the ordinary ``deidentify`` stage, which finds the output finished, records the report
    and enqueues the next stage. If a chunk fails, the same ordinary stage runs instead (it de-identifies
    serially, or records the error). Returns False when there is nothing to fan out."""
    from celery import chord
    from django.conf import settings

    from datasets.choices import UploadStatus
    from datasets.models import Upload
    from datasets.pipeline.common import finished_report
    from datasets.pipeline.parallel import options_to_dict, plan_chunks
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
    chunks = plan_chunks(src, chunk_bytes)
    opts = options_to_dict(options)
    then = upload_stage.si(upload_id, "deidentify", chunked=False)
    header = [deid_chunk.s(str(src), str(dst), i, s, e, opts) for i, s, e in chunks]
    body = deid_merge.s(str(src), str(dst), [list(c) for c in chunks], opts) | then
    chord(header)(body.on_error(upload_stage.si(upload_id, "deidentify", chunked=False)))
    log.info("upload %s: de-identifying %d chunks in parallel", upload_id, len(chunks))
    return True


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
