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


@shared_task(name="datasets.tasks.upload_stage")
def upload_stage(upload_id: int, stage: str) -> None:
    """Run one pipeline stage of an upload (``services.upload_run_stage``), then enqueue the next one.

    A stage that finished before is reused by the pipeline, so a redelivered or retried task redoes
    nothing; an upload that is not ``processing`` (failed, ready) is left alone.
    """
    from datasets.services import upload_run_stage

    upload_run_stage(upload_id=upload_id, stage=stage)


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
