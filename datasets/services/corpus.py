"""Corpus import: a public corpus file through the whole pipeline into a platform dataset version; the
progress and manifest helpers the upload pipeline shares."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

from datasets.choices import DeidStatus
from datasets.models import Dataset, DatasetVersion

if TYPE_CHECKING:
    from portal.models import User
from datasets.services.catalog import dataset_create, dataset_version_create, license_version_create

STAGE_WEIGHTS: dict[str, tuple[int, int]] = {
    "validate": (0, 10),
    "deidentify": (10, 20),
    "deduplicate": (30, 5),
    "tokenizer": (35, 25),
    "shards": (60, 35),
    "statistics": (95, 5),
}
"""``stage -> (percent at start, percent share)`` of the whole pipeline, for progress bars."""


def pipeline_percent(stage: str, done: int, total: int) -> int:
    """Overall percent (0–100) when ``stage`` has processed ``done`` of ``total`` bytes."""
    start, share = STAGE_WEIGHTS.get(stage, (0, 0))
    frac = 1.0 if total <= 0 else min(done, total) / total
    return min(100, start + int(share * frac))


def _first_text(path: Path, limit: int = 600) -> str:
    """The first ``limit`` characters of the first document of a pipeline JSONL file (a de-identified sample)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                text: str = json.loads(line)["text"]
                return text[:limit]
    return ""


def _pipeline_counts(reports: dict[str, Any]) -> dict[str, int]:
    """Document counts before de-duplication, kept in a version's manifest beside the exact statistics."""
    return {
        "source_documents": int(reports["validate"]["documents"]),
        "empty_documents": int(reports["validate"]["empty_documents"]),
        "duplicates_removed": int(reports["deduplicate"]["duplicates"]),
    }


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(Path(settings.DATA_DIR).resolve()))


def corpus_import(*, path: Path, domain: str, acting_user: User | None = None) -> DatasetVersion:
    """Import one corpus file as a public platform dataset: catalog entry, license version, pipeline, version.

    Runs the real pipeline (``datasets.pipeline.run_pipeline``: validate, de-identify, deduplicate, a BPE
    tokenizer trained on the corpus, shards, statistics) in ``DATA_DIR/datasets/<slug>/<sha256[:16]>/``
    and records progress in ``Dataset.preparing``. Idempotent: a file whose SHA-256 is already the source
    of the dataset's newest version returns that version without running anything; finished pipeline
    stages are reused after a crash. Raises ``PipelineError`` when the corpus is malformed (recorded in
    ``Dataset.preparing["error"]``).
    """
    from datasets.corpora import spec_for
    from datasets.pipeline import PipelineError, run_pipeline
    from datasets.pipeline.common import file_sha256

    spec = spec_for(domain, path)
    sha = file_sha256(path)
    source = [{"file": path.name, "bytes": path.stat().st_size, "sha256": sha}]
    lv = license_version_create(
        slug=spec.license_slug,
        name=spec.license_name,
        text=spec.read_license_text(path.parent),
        commercial_use=spec.commercial_use,
        redistribution=spec.redistribution,
        derivative_models=spec.derivative_models,
        attribution_text=spec.attribution,
        field_of_use=spec.field_of_use,
    )
    dataset = dataset_create(
        slug=spec.slug,
        name=spec.name,
        domain=spec.domain,
        description=spec.description,
        attribution=spec.attribution,
        source_url=spec.source_url,
        acting_user=acting_user,
    )
    newest = dataset.latest_version
    if newest is not None and newest.manifest.get("source_files") == source and newest.license_version_id == lv.pk:
        return newest
    workdir = Path(settings.DATA_DIR) / "datasets" / spec.slug / sha[:16]
    last = {"percent": -1}
    thread = threading.get_ident()

    def on_progress(stage: str, done: int, total: int) -> None:
        # ``tokenizers`` may pull the training texts on its own threads: only this thread writes progress
        # (another thread would open a second database connection mid-transaction).
        percent = pipeline_percent(stage, done, total)
        if percent != last["percent"] and threading.get_ident() == thread:
            last["percent"] = percent
            Dataset.objects.filter(pk=dataset.pk).update(preparing={"stage": stage, "percent": percent})

    try:
        reports = run_pipeline(path, workdir, fmt="jsonl", on_progress=on_progress)
    except PipelineError as exc:
        Dataset.objects.filter(pk=dataset.pk).update(preparing={"stage": exc.stage, "error": exc.as_dict()})
        raise
    shards = workdir / "shards"
    version = dataset_version_create(
        dataset=dataset,
        license_version=lv,
        statistics=reports["statistics"],
        deid_report=reports["deidentify"],
        deid_status=DeidStatus.DEIDENTIFIED,
        shard_dir=_relative(shards),
        tokenizer_path=_relative(shards / "tokenizer.json"),
        source_files=source,
        sample=_first_text(workdir / "deduplicated.jsonl"),
        pipeline=_pipeline_counts(reports),
        acting_user=acting_user,
    )
    Dataset.objects.filter(pk=dataset.pk).update(preparing={})
    return version
