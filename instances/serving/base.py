"""What every part of serving shares: the export's file names, request limits, the server's module name,
the errors, the ``Deployments`` interface both deployment backends implement and the ``get_deployments``
factory. No Django, no torch."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

EXPORT_INFO = "export.json"
TOKENIZER_FILE = "tokenizer.json"
EXPORT_FORMAT = "gpu-portal-export/1"
MAX_NEW_TOKENS = 256  # upper bound of one request's ``max_new_tokens``
DEFAULT_NEW_TOKENS = 32
MAX_BODY_BYTES = 1 << 20
SERVER_MODULE = "instances.serving.server"  # started as ``python -m instances.serving.server`` (local and pods)
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class ExportError(RuntimeError):
    """The checkpoint cannot be exported (incomplete, not a runtime checkpoint, no tokenizer). Names the folder."""


class DeploymentError(RuntimeError):
    """A deployment cannot be applied, read or deleted, or had no ready replica in time. The message names the
    object (``<namespace>/<name>``) and the cause the cluster reports."""


class Deployments(Protocol):
    """What the marketplace needs of a deployment backend (``LocalDeployments``, ``KubernetesDeployments``)."""

    def start(
        self, *, name: str, model_dir: str | os.PathLike[str], deployment: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def alive(self, deployment: dict[str, Any]) -> bool: ...

    def stop(self, deployment: dict[str, Any]) -> bool: ...


def get_deployments(name: str, **options: Any) -> Deployments:
    """The deployment backend ``name`` (``"local"``: ``LocalDeployments(options.pop("root"), **options)``;
    ``"kubernetes"``: ``KubernetesDeployments(**options)``), as ``instances.backends.get_backend`` builds a
    compute backend. Raises ``ValueError`` for another name and ``DeploymentError`` for missing Kubernetes
    options. The Kubernetes client is imported only when that backend is asked for."""
    if name == "local":
        from instances.serving.local import LocalDeployments

        root = options.pop("root")
        return LocalDeployments(root, **options)
    if name == "kubernetes":
        from instances.serving.kubernetes import KubernetesDeployments

        return KubernetesDeployments(**options)
    raise ValueError(f"unknown deployment backend {name!r}; expected 'local' or 'kubernetes'")
