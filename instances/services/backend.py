"""The compute backend, the one boundary tests replace, and the settings and task helpers every operation
uses."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings

from instances.backends.base import ComputeBackend, get_backend


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def compute_backend() -> ComputeBackend:
    """The configured backend: ``INSTANCES_BACKEND`` (``local`` | ``kubernetes``) with
    ``INSTANCES_BACKEND_OPTIONS``; the local backend's workspaces default to ``<PORTAL_DATA_DIR>/workspaces``."""
    name = _setting("INSTANCES_BACKEND", "local")
    options = dict(_setting("INSTANCES_BACKEND_OPTIONS", {}) or {})
    if name == "local":
        options.setdefault("workspace_root", str(Path(settings.DATA_DIR) / "workspaces"))
    return get_backend(name, **options)


def new_idempotency_key() -> str:
    """A random key (for callers that want one)."""
    return secrets.token_urlsafe(16)
