"""Fixtures of the client and CLI tests: a logged-out config folder, an API token for alice, a small dataset
version with real shards, and the end-to-end tests' pumped portal (reused from ``tests/instances``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"
sys.path.insert(0, str(CLIENT_DIR))  # this checkout's client and CLI, installed or not
sys.path.insert(0, str(ROOT / "tests" / "instances"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from clients_support import e2e  # noqa: E402
from instances_support import accept, fund  # noqa: E402

# The real-backend portal of the end-to-end test: a WSGI server pumped from the test's own thread, so the
# reconcile, the runtime's callbacks and the CLI's requests use the database from one thread.
portal = e2e.portal


@pytest.fixture(autouse=True)
def cli_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No login from the machine running the tests: an empty ``XDG_CONFIG_HOME``, no ``GPU_PORTAL_*``."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("GPU_PORTAL_URL", raising=False)
    monkeypatch.delenv("GPU_PORTAL_TOKEN", raising=False)
    return {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}


@pytest.fixture
def alice_token(alice: Any, alice_org: Any) -> str:
    """A write-scope API token of alice for her organization (the plaintext, shown once)."""
    from portal.choices import TokenScope
    from portal.services import api_token_create

    return api_token_create(user=alice, organization=alice_org, name="cli", scope=TokenScope.WRITE).plaintext


@pytest.fixture
def funded(alice_org: Any) -> Any:
    """alice's organization with 10.00 CNY of trial credit."""
    fund(alice_org, 10)
    return alice_org


@pytest.fixture
def corpus_version(alice: Any, funded: Any, settings: Any, tmp_path: Path) -> Any:
    """A public dataset version under a license that needs an agreement, with ~12k tokens of real shards
    under ``DATA_DIR`` (enough for a tiny model's 32-token samples), not yet accepted by alice."""
    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter

    settings.DATA_DIR = data = tmp_path / "data"  # the pumped portal's DATA_DIR too
    lv = license_version_create(
        slug="cli-license",
        name="CLI corpus license",
        text="Use it for training.",
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    ds = dataset_create(slug="cli-corpus", name="CLI corpus", domain="legal", description="A corpus.")
    rel = "datasets/cli-corpus/v1/shards"
    with ShardWriter(data / rel, vocab_size=300, eos_id=0) as w:
        for doc in range(400):
            w.add_document([1 + (doc * 7 + i * 13) % 299 for i in range(30)])
    return dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={
            "documents": 400,
            "bytes": 12_000,
            "characters": 12_000,
            "tokens": 12_400,
            "language": "en",
            "files": [],
        },
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path="",
        source_files=[{"file": "corpus.jsonl", "bytes": 12_000, "sha256": "0" * 64}],
    )


@pytest.fixture
def licensed(corpus_version: Any, alice: Any, funded: Any) -> Any:
    """The corpus version with alice's organization's agreement to its license."""
    accept(funded, alice, corpus_version)
    return corpus_version
