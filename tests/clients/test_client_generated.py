"""The committed client (``clients/python``) is exactly what ``clients/python/regenerate.sh`` makes from the
current API; the schema it is made from documents one request media type per operation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

CLIENT_DIR = Path(__file__).resolve().parents[2] / "clients" / "python"
GENERATED = ("openapi.yaml", "gpu_portal_client")


def _files(root: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for name in GENERATED:
        top = root / name
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for p in paths:
            if "__pycache__" not in p.parts:
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def test_the_committed_client_is_what_the_schema_generates(tmp_path: Path) -> None:
    # Model integer bounds in the schema follow the database's integer range (Django asks the connection), so
    # the client is generated on the embedded defaults (SQLite) whatever database this test run uses.
    env = {**{k: v for k, v in os.environ.items() if k != "DATABASE_URL"}, "PYTHON": sys.executable}
    proc = subprocess.run(
        [str(CLIENT_DIR / "regenerate.sh"), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh, committed = _files(tmp_path), _files(CLIENT_DIR)
    stale = sorted(name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name))
    assert stale == [], "clients/python is stale; run clients/python/regenerate.sh and commit. Differs: " + ", ".join(
        stale[:20]
    )
    assert len(committed) > 100  # the package itself, not an empty folder


def test_every_request_body_has_one_media_type_json_first(db: Any) -> None:
    from rest_framework.test import APIClient

    schema = yaml.safe_load(APIClient().get("/api/v1/schema").content)
    bodies = {
        (path, method): list(op["requestBody"]["content"])
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "requestBody" in op
    }
    assert {key for key, media in bodies.items() if len(media) != 1} == set()
    assert bodies[("/api/v1/jobs", "post")] == ["application/json"]
    assert bodies[("/api/v1/jobs/{id}/rollback", "post")] == ["application/json"]
    assert bodies[("/api/v1/uploads", "post")] == ["multipart/form-data"]  # a file: multipart, not a form
