"""Helpers of the client and CLI tests (imported by their test modules)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIR = ROOT / "clients" / "python"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# tests/instances/test_e2e_local.py: its pumped portal fixture and helpers, loaded under another name
e2e = _load("instances_e2e_local", ROOT / "tests" / "instances" / "test_e2e_local.py")


def cli_command() -> list[str]:
    """How the tests start the CLI: this checkout's ``gpu_portal_cli`` under the test's interpreter."""
    return [sys.executable, "-m", "gpu_portal_cli.main"]


def cli_env_vars(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PORTAL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(CLIENT_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env
