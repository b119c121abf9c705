"""SSH into instances, the portal's side: host keys, authorized keys, the command the console shows.

Who may log in: the users who may enter the instance (:func:`instances.interactive.access.entrant_ids`: its
launcher, owners and admins, and other members only by the organization's setting or a share), with any of
their active SSH keys (``portal.sshkeys``). The portal writes the instance's ``authorized_keys`` before the
launch (:func:`ssh_prepare`, called by ``scheduling.attempt_submit``) and rewrites it whenever the answer may
have changed — a key added or revoked, a member added, removed, demoted or deactivated by any path, a share
or the organization's setting changed (:func:`instances.interactive.access.access_changed`, after commit; a
periodic sweep catches changes no signal announced). The local SSH server
(:mod:`instances.interactive.ssh_server`) reads the file again at every login and, when it changes, closes the
open sessions of keys no longer in it.

Host keys: one Ed25519 key per instance, derived from ``SECRET_KEY`` (HMAC-SHA256 of the instance id as the
32-byte seed, RFC 8032 private key), so the fingerprint stays the same across restarts and both backends
can show it without storing a private key in the database. Rotating ``SECRET_KEY`` changes every host key.

Settings: ``INSTANCES_SSH_ENABLED`` (default True; interactive instances only), ``INSTANCES_SSH_HOST`` (the
address shown in the command; default ``127.0.0.1``, where the local server listens),
``INSTANCES_SSH_USER`` (login name; default the portal's own OS user locally — the shell runs as that
user — and ``root`` on Kubernetes).
"""

from __future__ import annotations

import base64
import contextlib
import getpass
import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncssh
import psutil
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.utils.translation import gettext as _

from instances.backends.base import BackendError, JobSpec
from instances.backends.k8s_objects import JOB_LABEL
from instances.backends.kubernetes import KubernetesBackend, object_name
from instances.backends.local import LocalBackend
from instances.choices import InstanceKind, InstanceStatus
from instances.interactive.sidecar import ssh_state_dir
from instances.interactive.ssh_k8s import SECRET_ENV, secret_manifest, ssh_object_name
from instances.interactive.ssh_server import ACTIVITY, AUTHORIZED_KEYS, CONFIG, ENDPOINT, HOST_KEY, SESSIONS
from instances.models import Instance
from instances.services import backend as boundary
from instances.services.backend import _setting
from portal.sshkeys import SshKey

log = logging.getLogger(__name__)

LIVE = (InstanceStatus.PROVISIONING, InstanceStatus.RUNNING)


@dataclass(frozen=True, slots=True)
class SshAccess:
    """What the instance page shows. ``command`` is ``ssh -p PORT USER@HOST`` once the server listens,
    else "" with ``reason`` saying why; ``host_key_fingerprint`` is ``SHA256:…``."""

    command: str
    host: str
    port: int | None
    username: str
    host_key_fingerprint: str
    reason: str = ""


def ssh_enabled(instance: Instance) -> bool:
    """Whether the instance gets an SSH server (interactive instances, unless ``INSTANCES_SSH_ENABLED`` is off)."""
    return bool(_setting("INSTANCES_SSH_ENABLED", True)) and instance.kind == InstanceKind.INTERACTIVE


def ssh_host_key(instance_id: int) -> asyncssh.SSHKey:
    """The instance's Ed25519 host key (see the module docstring)."""
    seed = hmac.new(settings.SECRET_KEY.encode(), f"gpu-portal:ssh-host-key:{instance_id}".encode(), hashlib.sha256)
    pem = Ed25519PrivateKey.from_private_bytes(seed.digest()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    return asyncssh.import_private_key(pem)


def ssh_username() -> str:
    default = "root" if _setting("INSTANCES_BACKEND", "local") == "kubernetes" else getpass.getuser()
    return str(_setting("INSTANCES_SSH_USER", "") or default)


def authorized_keys_text(instance: Instance) -> str:
    """The ``authorized_keys`` file of ``instance``: one line per active key of a user who may enter it
    (:func:`instances.interactive.access.entrant_ids`), ``<algorithm> <base64> portal-user-<id>``, ordered by
    key id; "" when there is none."""
    from instances.interactive.access import entrant_ids

    keys = SshKey.objects.filter(user_id__in=entrant_ids(instance), revoked_at__isnull=True).order_by("pk")
    return "".join(f"{k.public_key} portal-user-{k.user_id}\n" for k in keys)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to a file only its owner reads (0600 from its creation)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def ssh_prepare(*, instance: Instance, spec: JobSpec) -> JobSpec:
    """Before an attempt's submit, set up what its SSH server needs; returns the spec to submit.

    Local backend: the state folder the launcher looks for (host key, authorized keys, login name; all 0600),
    without a previous attempt's endpoint. Kubernetes: the Secret ``<job object>-ssh`` (created, or replaced
    when a retried submit finds it), named in the returned spec's environment so that the backend mounts it
    and adds ``sshd`` and the Service (:mod:`instances.interactive.ssh_k8s`). Other instances (not
    interactive, SSH disabled) get ``spec`` unchanged. Raises :class:`BackendError` when this fails.
    """
    backend = boundary.compute_backend()  # the one boundary tests replace
    if not ssh_enabled(instance):
        return spec
    host_key = ssh_host_key(instance.pk).export_private_key("openssh").decode()
    keys = authorized_keys_text(instance)
    if isinstance(backend, KubernetesBackend):
        name = object_name(spec.job_id, spec.attempt)
        body = secret_manifest(
            job_object=name,
            namespace=backend.namespace,
            labels={"app.kubernetes.io/managed-by": "gpu-portal", JOB_LABEL: name},
            authorized_keys=keys,
            host_key_openssh=host_key,
        )
        _secret_apply(backend, body)
        return replace(spec, env={**spec.env, SECRET_ENV: body["metadata"]["name"]})
    if not isinstance(backend, LocalBackend):
        return spec
    state = ssh_state_dir(backend.workspace_for(spec))
    try:
        state.mkdir(parents=True, exist_ok=True)
        os.chmod(state, 0o700)
        _write_private(state / HOST_KEY, host_key)
        _write_private(state / AUTHORIZED_KEYS, keys)
        _write_private(state / CONFIG, json.dumps({"username": ssh_username()}))
        with contextlib.suppress(FileNotFoundError):
            (state / ENDPOINT).unlink()
    except OSError as exc:
        raise BackendError(f"cannot write the SSH state of {state}: {exc}") from exc
    return spec


def _secret_apply(backend: KubernetesBackend, body: dict[str, Any]) -> None:
    """Create the SSH Secret, or replace its contents when it exists (409)."""
    from kubernetes.client.exceptions import ApiException

    core, name = backend._core(), body["metadata"]["name"]
    try:
        core.create_namespaced_secret(backend.namespace, body)
    except ApiException as exc:
        if exc.status != 409:
            raise BackendError(f"creating Secret {name}: {exc.reason}") from exc
        try:
            core.patch_namespaced_secret(name, backend.namespace, {"stringData": body["stringData"]})
        except ApiException as exc2:
            raise BackendError(f"updating Secret {name}: {exc2.reason}") from exc2


def _state_dir(instance: Instance) -> tuple[Path, Path] | None:
    """(state folder, attempt workspace) of the instance's latest local attempt, or None."""
    handle = instance.attempts.order_by("-number").values_list("handle", flat=True).first()
    if not handle or not handle.startswith("local:"):
        return None
    _, ws = LocalBackend.parse_handle(handle)
    return ssh_state_dir(ws), ws


def ssh_keys_write(instance: Instance, *, only_if_changed: bool = False) -> bool:
    """Rewrite the ``authorized_keys`` of a live instance's latest attempt (local: the state folder's file,
    replaced atomically; Kubernetes: the SSH Secret, patched); True if written. With ``only_if_changed``
    (the periodic sweep) nothing is written when the file / Secret already says the same. Safe to run twice.
    Kubernetes API errors are logged, not raised: a revoked key stays valid in that pod until the next write."""
    text = authorized_keys_text(instance)
    found = _state_dir(instance)
    if found and (found[0] / HOST_KEY).is_file():
        path = found[0] / AUTHORIZED_KEYS
        if only_if_changed:
            with contextlib.suppress(OSError):
                if path.read_text() == text:
                    return False
        _write_private(path, text)
        return True
    if (k8s := _k8s_object(instance)) is None:
        return False
    backend, ns, name = k8s
    try:
        if only_if_changed:
            secret = backend._core().read_namespaced_secret(ssh_object_name(name), ns)
            encoded = (secret.data or {}).get("authorized_keys")  # what an API server answers (base64)
            current = base64.b64decode(encoded).decode() if encoded is not None else None
            if current is None:  # a server that keeps what it was sent (the tests' stand-in)
                current = (getattr(secret, "string_data", None) or {}).get("authorized_keys")
            if current == text:
                return False
        backend._core().patch_namespaced_secret(ssh_object_name(name), ns, {"stringData": {"authorized_keys": text}})
    except Exception:  # logged loudly: a revoked key stays valid in this pod until the next rewrite
        log.exception("could not rewrite the SSH keys of instance %s (Secret %s/%s)", instance.pk, ns, name)
        return False
    return True


def _k8s_object(instance: Instance) -> tuple[KubernetesBackend, str, str] | None:
    """(backend, namespace, Job object name) of the instance's latest Kubernetes attempt, or None."""
    handle = instance.attempts.order_by("-number").values_list("handle", flat=True).first()
    backend = boundary.compute_backend()
    if not handle or not handle.startswith("k8s:") or not isinstance(backend, KubernetesBackend):
        return None
    ns, name = backend.parse_handle(handle)
    return backend, ns, name


def _k8s_node_port(instance: Instance) -> int | None:
    found = _k8s_object(instance)
    if found is None:
        return None
    backend, ns, name = found
    try:
        service = backend._core().read_namespaced_service(ssh_object_name(name), ns)
    except Exception:  # unreachable cluster, no Service yet: the page says the server is starting
        return None
    ports = service.spec.ports or []
    return int(ports[0].node_port) if ports and ports[0].node_port else None


def _endpoint(instance: Instance) -> dict[str, Any] | None:
    found = _state_dir(instance)
    if found is None:
        return None
    try:
        data = json.loads((found[0] / ENDPOINT).read_text())
    except (OSError, ValueError):
        return None
    return data if data.get("workspace") == str(found[1]) else None  # not a previous attempt's


def ssh_access(instance: Instance) -> SshAccess | None:
    """How to log in to ``instance`` (see :class:`SshAccess`), or None when it gets no SSH server."""
    if not ssh_enabled(instance):
        return None
    username, host = ssh_username(), str(_setting("INSTANCES_SSH_HOST", "127.0.0.1"))
    fingerprint = ssh_host_key(instance.pk).get_fingerprint("sha256")
    if instance.status != InstanceStatus.RUNNING:
        return SshAccess("", host, None, username, fingerprint, _("SSH is available while the instance runs."))
    endpoint = _endpoint(instance)
    port = int(endpoint["port"]) if endpoint is not None else _k8s_node_port(instance)
    if port is None:
        return SshAccess("", host, None, username, fingerprint, _("The SSH server is starting."))
    return SshAccess(f"ssh -p {port} {username}@{host}", host, port, username, fingerprint)


def ssh_last_activity(instance: Instance) -> datetime | None:
    """When an SSH session of the instance's current attempt was last active (a login, a session starting
    or ending, or every 30 s of an open session), UTC; None if never (or no local SSH server)."""
    found = _state_dir(instance)
    if found is None:
        return None
    try:
        mtime = (found[0] / ACTIVITY).stat().st_mtime
        started = json.loads((found[0] / ENDPOINT).read_text()).get("started_at", 0)
    except (OSError, ValueError):
        return None
    if mtime < float(started or 0):  # a previous attempt's sessions
        return None
    return datetime.fromtimestamp(mtime, UTC)


def ssh_open_sessions(instance: Instance) -> int:
    """How many SSH sessions (shells, commands) are open on the instance's current local SSH server now: its
    ``sessions.json``, counted only while the server that wrote it (``endpoint.json``'s pid, of this attempt)
    still runs, so a killed server's count never keeps an instance up. 0 when unknown."""
    endpoint = _endpoint(instance)
    found = _state_dir(instance)
    if endpoint is None or found is None:
        return 0
    try:
        counted = json.loads((found[0] / SESSIONS).read_text())
        server = psutil.Process(int(endpoint["pid"]))
        # the pid is the server's, not a later process's (psutil's start time is exact to about a second)
        alive = server.status() != psutil.STATUS_ZOMBIE and server.create_time() <= float(endpoint["started_at"]) + 2
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return 0
    if not alive or counted.get("pid") != endpoint["pid"]:
        return 0
    return max(0, int(counted.get("open") or 0))
