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
from pathlib import Path
from typing import Any, Literal

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
    "TOKENIZER_FILE",
    "PipelineError",
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
    "statistics",
    "train_tokenizer",
    "validate",
    "write_shards",
]

STAGES = ("validate", "deidentify", "deduplicate", "tokenizer", "shards", "statistics")
"""Stage names in order, as used in ``PipelineError.stage`` and in ``run_pipeline``'s report."""


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
    upload, workdir = Path(upload), Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)

    def cb(stage: str) -> ProgressFn | None:
        if on_progress is None:
            return None
        return lambda done, total: on_progress(stage, done, total)

    documents = workdir / "documents.jsonl"
    deid = workdir / "deidentified.jsonl"
    dedup = workdir / "deduplicated.jsonl"
    shards = workdir / "shards"
    reports: dict[str, dict[str, Any]] = {}
    finished_later = (workdir / "statistics.json").is_file() and not documents.exists()
    if finished_later:
        for stage, path in (("validate", documents), ("deidentify", deid)):
            saved = json.loads(report_path(path).read_text(encoding="utf-8"))["report"]
            reports[stage] = {**saved, "reused": True}
    else:
        reports["validate"] = validate(
            upload,
            documents,
            fmt=fmt,
            text_column=text_column,
            progress=cb("validate"),
            **validate_options,
        )
        reports["deidentify"] = deidentify_file(documents, deid, progress=cb("deidentify"))
    reports["deduplicate"] = deduplicate(deid, dedup, progress=cb("deduplicate"))
    if tokenizer is None:
        tokenizer = workdir / TOKENIZER_FILE
        reports["tokenizer"] = train_tokenizer(dedup, tokenizer, vocab_size=vocab_size, progress=cb("tokenizer"))
    else:
        reports["tokenizer"] = {"reused": True, "file": str(tokenizer)}
    reports["shards"] = write_shards(dedup, tokenizer, shards, progress=cb("shards"))
    reports["statistics"] = statistics(dedup, shards, workdir / "statistics.json", progress=cb("statistics"))
    if not keep_identified:
        documents.unlink(missing_ok=True)  # its report stays: it holds counts only
    return reports
