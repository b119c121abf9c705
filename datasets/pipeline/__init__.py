"""The dataset pipeline: upload → validate → de-identify → deduplicate → tokenizer → shards → statistics.

Pure Python (no Django): the Celery tasks call these functions with paths and a progress callback. Every
stage takes input/output paths and ``progress(done_bytes, total_bytes)``, streams its input, writes its
output under a temporary name and renames it on success, and can be called again: a stage whose output
exists and was made from the same inputs and parameters returns its saved report (``"reused": True``).
Errors are ``PipelineError(stage, message, line)`` with a machine-readable ``code``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..deid import DEFAULT_OPTIONS, DeidOptions
from .common import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    MAX_REPORTED_ERRORS,
    PipelineError,
    ProgressFn,
    report_path,
)
from .corpus import (
    CORPORA_ENV,
    DOMAINS,
    corpus_files,
    count_documents,
    default_corpora_dir,
    read_corpus_file,
    read_corpus_folder,
)
from .stages import (
    DEFAULT_VOCAB_SIZE,
    EOS_TOKEN,
    TOKENIZER_FILE,
    deduplicate,
    deidentify_file,
    language_of,
    load_tokenizer,
    new_tokenizer,
    normalize_for_dedup,
    statistics,
    train_tokenizer,
    write_shards,
)
from .validate import FORMATS, validate

__all__ = [
    "CORPORA_ENV",
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DEFAULT_VOCAB_SIZE",
    "DOMAINS",
    "EOS_TOKEN",
    "FORMATS",
    "MAX_REPORTED_ERRORS",
    "STAGES",
    "STAGE_TABLE",
    "TOKENIZER_FILE",
    "PipelineError",
    "PipelineRun",
    "ProgressFn",
    "corpus_files",
    "count_documents",
    "deduplicate",
    "default_corpora_dir",
    "deidentify_file",
    "language_of",
    "load_tokenizer",
    "new_tokenizer",
    "normalize_for_dedup",
    "read_corpus_file",
    "read_corpus_folder",
    "run_pipeline",
    "run_stage",
    "statistics",
    "train_tokenizer",
    "validate",
    "write_shards",
]


@dataclass(frozen=True)
class PipelineRun:
    """One run of the pipeline: its input, parameters and the files each stage reads and writes in ``workdir``
    (``documents.jsonl`` validated, ``deidentified.jsonl``, ``deduplicated.jsonl``, ``tokenizer.json``,
    ``shards/``, ``statistics.json``)."""

    source: Path
    workdir: Path
    fmt: Literal["jsonl", "txt", "csv"]
    text_column: str | None = None
    vocab_size: int = DEFAULT_VOCAB_SIZE
    validate_options: dict[str, Any] = field(default_factory=dict)
    tokenizer_file: Path | None = None  # an existing tokenizer to reuse instead of training one
    deid_options: DeidOptions = DEFAULT_OPTIONS  # the organization's placeholder style and allow-list
    tokenizer_source: Path | None = None  # copy this tokenizer into the workdir instead of training one
    tokenizer_source_version: int | None = None  # the dataset version it comes from (for the report)

    @property
    def documents(self) -> Path:
        return self.workdir / "documents.jsonl"

    @property
    def deidentified(self) -> Path:
        return self.workdir / "deidentified.jsonl"

    @property
    def deduplicated(self) -> Path:
        return self.workdir / "deduplicated.jsonl"

    @property
    def tokenizer(self) -> Path:
        return self.tokenizer_file or self.workdir / TOKENIZER_FILE

    @property
    def shards(self) -> Path:
        return self.workdir / "shards"

    @property
    def statistics(self) -> Path:
        return self.workdir / "statistics.json"


# The one stage table: ``run_pipeline`` (synchronous, corpus import) and the upload pipeline (one Celery task
# per stage, ``datasets.services.upload_run_stage``) both run a stage through it. Each entry names the stage
# function by the package's global, looked up at call time (tests replace one, e.g. ``train_tokenizer``).
STAGE_TABLE: dict[str, Callable[[PipelineRun, ProgressFn | None], dict[str, Any]]] = {
    "validate": lambda r, progress: validate(
        r.source, r.documents, fmt=r.fmt, text_column=r.text_column, progress=progress, **r.validate_options
    ),
    "deidentify": lambda r, progress: deidentify_file(
        r.documents, r.deidentified, options=r.deid_options, progress=progress
    ),
    "deduplicate": lambda r, progress: deduplicate(r.deidentified, r.deduplicated, progress=progress),
    "tokenizer": lambda r, progress: (
        reuse_tokenizer(r.tokenizer_source, r.tokenizer, r.tokenizer_source_version)
        if r.tokenizer_source is not None
        else train_tokenizer(r.deduplicated, r.tokenizer, vocab_size=r.vocab_size, progress=progress)
    ),
    "shards": lambda r, progress: write_shards(r.deduplicated, r.tokenizer, r.shards, progress=progress),
    "statistics": lambda r, progress: statistics(r.deduplicated, r.shards, r.statistics, progress=progress),
}


def reuse_tokenizer(source: Path, destination: Path, version: int | None = None) -> dict[str, Any]:
    """The ``tokenizer`` stage when an existing dataset version's tokenizer is re-used: copy it (nothing
    trained). Returns ``{"reused_from_version", "vocab_size", "eos_id"}``."""
    import shutil

    destination.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, destination)
    return {"reused_from_version": version, "vocab_size": load_tokenizer(destination).get_vocab_size(), "eos_id": 0}


STAGES = tuple(STAGE_TABLE)
"""Stage names in order, as used in ``PipelineError.stage`` and in ``run_pipeline``'s report."""


def run_stage(stage: str, run: PipelineRun, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Run one stage of ``run`` (``STAGE_TABLE``); returns its report. Raises ``PipelineError`` from the stage
    and ``ValueError`` for an unknown stage name."""
    try:
        step = STAGE_TABLE[stage]
    except KeyError:
        raise ValueError(f"unknown pipeline stage {stage!r}") from None
    return step(run, progress)


def run_pipeline(
    upload: str | Path,
    workdir: str | Path,
    *,
    fmt: Literal["jsonl", "txt", "csv"],
    text_column: str | None = None,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    tokenizer: str | Path | None = None,
    keep_identified: bool = False,
    on_progress: Callable[[str, int, int], None] | None = None,
    **validate_options: Any,
) -> dict[str, dict[str, Any]]:
    """Run all stages for one upload inside ``workdir``; returns ``{stage: report}`` in ``STAGES`` order.

    Files in ``workdir``: ``documents.jsonl`` (validated), ``deidentified.jsonl``, ``deduplicated.jsonl``,
    ``tokenizer.json`` (trained unless ``tokenizer`` names an existing one to reuse), ``shards/`` and
    ``statistics.json``. Finished stages are reused on a retry. Unless ``keep_identified`` is set, the
    validated copy that still holds personal data is deleted once the pipeline has finished (a retry after
    that reuses the later stages and their saved reports). ``on_progress(stage, done_bytes, total_bytes)``
    reports every stage.
    Raises ``PipelineError`` from the failing stage; ``validate_options`` go to ``validate``.
    """
    run = PipelineRun(
        Path(upload),
        Path(workdir),
        fmt,
        text_column,
        vocab_size,
        validate_options,
        Path(tokenizer) if tokenizer is not None else None,
    )
    run.workdir.mkdir(parents=True, exist_ok=True)

    def cb(stage: str) -> ProgressFn | None:
        if on_progress is None:
            return None
        return lambda done, total: on_progress(stage, done, total)

    reports: dict[str, dict[str, Any]] = {}
    finished_later = run.statistics.is_file() and not run.documents.exists()
    for stage in STAGES:
        if finished_later and stage in ("validate", "deidentify"):
            path = run.documents if stage == "validate" else run.deidentified
            saved = json.loads(report_path(path).read_text(encoding="utf-8"))["report"]
            reports[stage] = {**saved, "reused": True}
        elif stage == "tokenizer" and run.tokenizer_file is not None:
            reports[stage] = {"reused": True, "file": str(tokenizer)}
        else:
            reports[stage] = run_stage(stage, run, cb(stage))
    if not keep_identified:
        run.documents.unlink(missing_ok=True)  # its report stays: it holds counts only
    return reports
