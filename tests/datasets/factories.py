"""Small builders for datasets tests: a license version, a dataset and a version with a real shard folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from instances.runtime.shards import ShardWriter

LICENSE_TEXT = "Test license text.\nUse it for training only."


def make_license_version(
    *, slug: str = "test-license", price_micros: int = 0, text: str = LICENSE_TEXT, term_days: int | None = None
) -> Any:
    from datasets.services import license_version_create

    return license_version_create(
        slug=slug,
        name=f"License {slug}",
        text=text,
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
        price_micros=price_micros,
        term_days=term_days,
    )


def make_version(
    *,
    slug: str = "test-set",
    publisher: Any = None,
    visibility: str = "public",
    license_version: Any = None,
    domain: str = "legal",
) -> Any:
    """A dataset and a version whose shard folder (3 documents, 7 tokens) exists under DATA_DIR."""
    from datasets.services import dataset_create, dataset_version_create

    lv = license_version or make_license_version()
    dataset = dataset_create(
        slug=slug,
        name=f"Set {slug}",
        domain=domain,
        publisher=publisher,
        visibility=visibility,
        description="A test set.",
    )
    rel = f"datasets/{slug}/v1/shards"
    folder = Path(settings.DATA_DIR) / rel
    if not (folder / "index.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with ShardWriter(folder, vocab_size=300, eos_id=0) as w:
            for ids in ([5, 6], [7], [8, 9]):
                w.add_document(ids)
    stats = {"documents": 3, "bytes": 12, "characters": 12, "tokens": 8, "language": "en", "files": []}
    return dataset_version_create(
        dataset=dataset,
        license_version=lv,
        statistics=stats,
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path=f"{rel}/tokenizer.json",
        source_files=[{"file": f"{slug}.jsonl", "bytes": 12, "sha256": "0" * 64}],
        sample="hello world",
    )
