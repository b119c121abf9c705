"""Fixtures of the instances tests that need Django (imports inside fixtures: the scheduler and backend
suites beside them run with ``-p no:django``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from instances_support import FakeBackend, accept, fund


@pytest.fixture
def catalog(db: Any) -> None:
    """Price book, GPU types, images, the cpu-local price (0.60 CNY per slot-hour)."""
    from django.core.management import call_command

    call_command("seed_catalog", verbosity=0)


@pytest.fixture
def nodes(catalog: None) -> list[Any]:
    """One local node (2 CPU slots) and two 8-GPU A100 nodes in one block."""
    from instances.models import GpuType, Node

    cpu, a100 = GpuType.objects.get(code="cpu-local"), GpuType.objects.get(code="A100-80G-SXM")
    return [
        Node.objects.create(name="local", gpu_type=cpu, gpus=2, block="local"),
        Node.objects.create(name="a100-0", gpu_type=a100, gpus=8, block="rack-1"),
        Node.objects.create(name="a100-1", gpu_type=a100, gpus=8, block="rack-1"),
    ]


@pytest.fixture
def funded(alice_org: Any) -> Any:
    """alice's organization with 10.00 CNY of trial credit."""
    fund(alice_org, 10)
    return alice_org


@pytest.fixture
def dataset_version(db: Any, settings: Any, tmp_path: Path) -> Any:
    """A public platform dataset version (license needing an agreement) with a real shard folder."""
    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter

    settings.DATA_DIR = tmp_path
    lv = license_version_create(
        slug="corpus-license",
        name="Corpus license",
        text="Use it for training.",
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    ds = dataset_create(slug="corpus", name="Corpus", domain="legal", description="A corpus.")
    rel = "datasets/corpus/v1/shards"
    with ShardWriter(tmp_path / rel, vocab_size=300, eos_id=0) as w:
        for ids in ([5, 6], [7], [8, 9]):
            w.add_document(ids)
    return dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={"documents": 3, "bytes": 12, "characters": 12, "tokens": 8, "language": "en", "files": []},
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path=f"{rel}/tokenizer.json",
        source_files=[{"file": "corpus.jsonl", "bytes": 12, "sha256": "0" * 64}],
    )


@pytest.fixture
def licensed(funded: Any, alice: Any, dataset_version: Any) -> Any:
    """The dataset version, with alice's organization's agreement to its license."""
    accept(funded, alice, dataset_version)
    return dataset_version


@pytest.fixture
def fake_backend(monkeypatch: pytest.MonkeyPatch) -> FakeBackend:
    from instances.services import backend as boundary

    backend = FakeBackend()
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)
    return backend
