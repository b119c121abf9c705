"""Serving a model trained by the runtime, shaped like ``instances.backends``: export, a model server,
its HTTP client and two deployment backends behind one interface. Nothing here imports Django (the
marketplace calls it from its services and tasks).

- ``base``: file names and limits, ``ExportError``, ``DeploymentError``, the ``Deployments`` interface and
  the ``get_deployments(name, **options)`` factory.
- ``export``: ``export_checkpoint(checkpoint_dir, out_dir)`` turns a complete DCP checkpoint written by
  ``instances.runtime`` into a Hugging Face folder (``config.json``, ``model.safetensors``,
  ``generation_config.json``, the training data's ``tokenizer.json`` and ``export.json``), written under a
  temporary name and renamed into place last. ``python -m instances.serving.export`` runs it.
- ``server``: ``python -m instances.serving.server serve --model-dir D --port P``, a stdlib ``http.server``
  (``GET /healthz``, ``POST /generate``; greedy decoding, one generation at a time).
- ``client``: ``generate(deployment=…, payload=…, timeout_s=…)`` and ``healthy(deployment)``.
- ``local``: ``LocalDeployments`` starts the server as a process in its own session and stops its group.
- ``kubernetes``: ``kubernetes_manifests`` (Deployment + Service) and ``KubernetesDeployments``.
"""

from typing import TYPE_CHECKING, Any

from instances.serving.base import (
    DEFAULT_NEW_TOKENS,
    EXPORT_FORMAT,
    EXPORT_INFO,
    MAX_BODY_BYTES,
    MAX_NEW_TOKENS,
    SERVER_MODULE,
    TOKENIZER_FILE,
    DeploymentError,
    Deployments,
    ExportError,
    get_deployments,
)
from instances.serving.client import generate, healthy
from instances.serving.kubernetes import (
    DEPLOYMENT_LABEL,
    RESTART_ANNOTATION,
    KubernetesDeployments,
    kubernetes_manifests,
)
from instances.serving.local import LocalDeployments

if TYPE_CHECKING:
    from instances.serving.export import export_checkpoint


def __getattr__(name: str) -> Any:
    # ``export`` is also run as ``python -m instances.serving.export``: importing it here, with the package,
    # would make runpy warn that the module was imported before it ran.
    if name == "export_checkpoint":
        from instances.serving.export import export_checkpoint

        return export_checkpoint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_NEW_TOKENS",
    "DEPLOYMENT_LABEL",
    "EXPORT_FORMAT",
    "EXPORT_INFO",
    "MAX_BODY_BYTES",
    "MAX_NEW_TOKENS",
    "RESTART_ANNOTATION",
    "SERVER_MODULE",
    "TOKENIZER_FILE",
    "DeploymentError",
    "Deployments",
    "ExportError",
    "KubernetesDeployments",
    "LocalDeployments",
    "export_checkpoint",
    "generate",
    "get_deployments",
    "healthy",
    "kubernetes_manifests",
]
