"""Fixtures of the marketplace tests: one tiny model trained by the runtime per test process (``serving_support``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import serving_support


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ``tiny`` Llama trained for ``serving_support.STEPS`` steps on the legal corpus (torchrun, about a minute on
    2 cores) and its export: ``root`` (with the shards under ``serving_support.SHARDS_REL``), ``checkpoint``,
    ``step``, ``loss``, ``export``. Skips when the corpus is missing."""
    from instances.serving import export_checkpoint

    root = tmp_path_factory.mktemp("tiny-model")
    try:
        trained = serving_support.train_tiny_model(root)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    export = tmp_path_factory.mktemp("tiny-export") / "export"
    export_checkpoint(trained["checkpoint"], export)
    return {**trained, "export": export}
