"""JupyterLab on instances, the portal's side: the per-instance secret, where the server is, whether it answers,
and the single-use tickets that let a member of the instance's organization in.

How the pieces fit (see :mod:`instances.interactive.jupyter_auth` for the server's side and the design):

* :func:`jupyter_env` is added to the backend ``JobSpec`` of an attempt of an instance whose kind is in
  ``INSTANCES_JUPYTER_KINDS`` (default: interactive instances): it asks the backend for a Jupyter server and
  carries the secret (in the environment, never argv; on Kubernetes through a Secret).
* :func:`jupyter_endpoint` finds the server: local backend, the port in the server's info file in the
  attempt's workspace (loopback only); Kubernetes, ``<INSTANCES_JUPYTER_SCHEME>://i<id>.<INSTANCES_JUPYTER_DOMAIN>``
  + the instance's base URL for the browser (the Ingress of :mod:`instances.interactive.jupyter_k8s`, one host
  per instance), and the Jupyter Service's cluster DNS name for the portal's probe (the portal runs in the
  cluster). Without ``INSTANCES_JUPYTER_DOMAIN`` there is no route, and the state stays ``unavailable``.
* :func:`jupyter_state` is ``unavailable`` / ``starting`` / ``ready`` (its ``/api/status`` answers) for the
  console's progress state and the API; :func:`jupyter_activity` (last activity, busy kernels, open
  terminals) feeds idle autostop.
* :func:`jupyter_ticket_issue` mints a ticket for a user who may enter the instance (the console view checks
  that first, :func:`instances.interactive.access.enter_authorize`) and records an audit row; the ticket
  itself is never stored or logged.
* Sessions end with access (:mod:`instances.interactive.jupyter_auth` has the server's side): the server asks
  :func:`jupyter_access_answer` (``POST /api/v1/runtime/instances/<id>/jupyter-access``) whether the cookie's
  user may still enter, trusting each answer ``INSTANCES_JUPYTER_RECHECK_S`` seconds (default 60), and
  :func:`jupyter_recheck` (called by ``access.access_enforce`` after every change the portal makes) tells it to
  forget its answers and re-check its open websockets at once.

Limits: on the local backend every server is on ``127.0.0.1`` (one port each), and browsers scope cookies by
host, not port, so a server whose user rewrote it could read cookies meant for the portal or another local
server on that host; the local backend is the single-machine default, not a multi-tenant one. Kubernetes gives
each instance its own host. The secret is readable by the instance's own processes (same user, e.g.
``/proc/<pid>/environ``): it opens nothing but that instance.
"""

from __future__ import annotations

import glob
import hmac
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from django.conf import settings
from django.utils.crypto import salted_hmac
from django.utils.dateparse import parse_datetime

from instances.choices import InstanceStatus
from instances.interactive.jupyter_k8s import HOST_ENV, PORT, jupyter_object_name
from instances.interactive.jupyter_process import BASE_URL_ENV, ENABLE_ENV, INFO_GLOB, STATE_DIR
from instances.interactive.tickets import (
    ACCESS_URL_ENV,
    INSTANCE_ENV,
    RECHECK_S_ENV,
    SECRET_ENV,
    access_token,
    recheck_token,
    status_token,
    ticket_mint,
)
from instances.models import Instance
from portal.audit import audit_log
from portal.models import User

JupyterState = Literal["unavailable", "starting", "ready"]
PROBE_TIMEOUT_S = 1.0
RECHECK_PUSH_TIMEOUT_S = 3.0
_SALT = "instances.interactive.jupyter"


@dataclass(frozen=True, slots=True)
class JupyterEndpoint:
    """``url``: the server's base URL as the user's browser reaches it (ends with ``/``); ``probe_url``: the
    same server as the portal reaches it (local backend: identical)."""

    url: str
    probe_url: str


def _setting(name: str, default: object) -> object:
    return getattr(settings, name, default)


def jupyter_enabled(instance: Instance) -> bool:
    """True when ``instance``'s kind gets a Jupyter server (``INSTANCES_JUPYTER_KINDS``, default
    ``("interactive",)``)."""
    kinds = _setting("INSTANCES_JUPYTER_KINDS", ("interactive",))
    return instance.kind in kinds  # type: ignore[operator]


def jupyter_secret(instance: Instance) -> str:
    """The instance's secret: HMAC-SHA256 (Django's ``salted_hmac``, keyed by ``SECRET_KEY``) of its id and
    creation time, 64 hex characters. Recomputed, never stored; known only to the portal and the server."""
    return salted_hmac(_SALT, f"{instance.pk}:{instance.created_at.isoformat()}", algorithm="sha256").hexdigest()


def jupyter_base_url(instance: Instance) -> str:
    """The server's path prefix, ``/jupyter/<instance id>/`` (the Ingress routes on it)."""
    return f"/jupyter/{instance.pk}/"


def jupyter_host(instance: Instance) -> str:
    """The instance's own host on Kubernetes, ``i<id>.<INSTANCES_JUPYTER_DOMAIN>`` ("" without a domain)."""
    domain = str(_setting("INSTANCES_JUPYTER_DOMAIN", "") or "").strip(".")
    return f"i{instance.pk}.{domain}" if domain else ""


def jupyter_recheck_s() -> int:
    """How long an instance's server trusts the portal's answer about one user (``INSTANCES_JUPYTER_RECHECK_S``,
    seconds, default 60): the longest a removed user's JupyterLab session can outlive a change the portal
    could not announce to the server."""
    return int(_setting("INSTANCES_JUPYTER_RECHECK_S", 60))  # type: ignore[call-overload]


def jupyter_access_url(instance: Instance) -> str:
    """Where the instance's server asks about its users: ``<SITE_URL>/api/v1/runtime/instances/<id>/jupyter-access``
    (the address the training runtime reports to, so a pod reaches it the same way)."""
    site = str(_setting("SITE_URL", "http://127.0.0.1:8000")).rstrip("/")
    return f"{site}/api/v1/runtime/instances/{instance.pk}/jupyter-access"


def jupyter_env(instance: Instance) -> dict[str, str]:
    """Environment for the backend ``JobSpec`` asking for the instance's Jupyter server ({} when none)."""
    if not jupyter_enabled(instance):
        return {}
    env = {
        ENABLE_ENV: "1",
        SECRET_ENV: jupyter_secret(instance),
        INSTANCE_ENV: str(instance.pk),
        BASE_URL_ENV: jupyter_base_url(instance),
        ACCESS_URL_ENV: jupyter_access_url(instance),
        RECHECK_S_ENV: str(jupyter_recheck_s()),
    }
    if jupyter_host(instance):
        env[HOST_ENV] = jupyter_host(instance)
    return env


def jupyter_endpoint(instance: Instance) -> JupyterEndpoint | None:
    """Where the instance's Jupyter server is, or ``None`` (not wanted, not running, not listening yet)."""
    if not jupyter_enabled(instance) or instance.status != InstanceStatus.RUNNING:
        return None
    attempt = instance.attempts.order_by("-number").first()
    if attempt is None or not attempt.handle:
        return None
    base = jupyter_base_url(instance)
    if attempt.backend == "local":
        from instances.backends.local import LocalBackend

        _, workspace = LocalBackend.parse_handle(attempt.handle)
        for info_file in sorted(glob.glob(str(Path(workspace) / STATE_DIR / INFO_GLOB))):
            try:
                port = int(json.loads(Path(info_file).read_text())["port"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            url = f"http://127.0.0.1:{port}{base}"
            return JupyterEndpoint(url, url)
        return None
    host = jupyter_host(instance)
    if attempt.backend != "kubernetes" or not host:
        return None
    namespace, _, name = attempt.handle.partition(":")[2].partition("/")
    scheme = _setting("INSTANCES_JUPYTER_SCHEME", "https")
    probe = f"http://{jupyter_object_name(name)}.{namespace}.svc:{PORT}{base}"
    return JupyterEndpoint(f"{scheme}://{host}{base}", probe)


def _probe(endpoint: JupyterEndpoint, instance: Instance, path: str) -> Any:
    """The JSON of the server's ``GET <path>`` with the portal's token (not counted as activity), or ``None``
    when it does not answer within ``PROBE_TIMEOUT_S`` seconds or answers with an error."""
    request = urllib.request.Request(  # noqa: S310 - http(s) URL built by jupyter_endpoint
        f"{endpoint.probe_url}{path}?no_track_activity=1",
        headers={"Authorization": f"token {status_token(jupyter_secret(instance))}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as response:  # noqa: S310
            return json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def jupyter_status(instance: Instance) -> dict[str, object] | None:
    """The server's ``GET api/status`` JSON (``started``, ``last_activity``, ``kernels``, ``connections``), or
    ``None`` when there is no server or it does not answer within ``PROBE_TIMEOUT_S`` seconds."""
    endpoint = jupyter_endpoint(instance)
    if endpoint is None:
        return None
    body = _probe(endpoint, instance, "api/status")
    return body if isinstance(body, dict) else None


@dataclass(frozen=True, slots=True)
class JupyterActivity:
    """What idle autostop reads from the server: ``last_activity`` (its ``api/status``: kernels, terminals,
    API use; UTC), ``busy_kernels`` (kernels whose ``execution_state`` is ``busy`` in ``api/kernels``: a
    cell computing, even silently) and ``terminals`` (open terminals, ``api/terminals``:
    a terminal is open until its shell exits or it is shut down). A list the server does not give (an older
    server, terminals disabled) counts 0."""

    last_activity: datetime | None
    busy_kernels: int
    terminals: int


def jupyter_activity(instance: Instance) -> JupyterActivity | None:
    """The server's activity (:class:`JupyterActivity`), or ``None`` when there is no server or its status
    does not answer. Jupyter's REST API: ``jupyter_server`` ``services/kernels`` (``execution_state``) and
    ``jupyter_server_terminals`` (``api/terminals``); the portal's own probes do not count as activity."""
    endpoint = jupyter_endpoint(instance)
    if endpoint is None:
        return None
    status = _probe(endpoint, instance, "api/status")
    if not isinstance(status, dict):
        return None
    value = status.get("last_activity")
    kernels = _probe(endpoint, instance, "api/kernels")
    terminals = _probe(endpoint, instance, "api/terminals")
    busy = (
        [k for k in kernels if isinstance(k, dict) and k.get("execution_state") == "busy"]
        if isinstance(kernels, list)
        else []
    )
    return JupyterActivity(
        last_activity=parse_datetime(value) if isinstance(value, str) else None,
        busy_kernels=len(busy),
        terminals=len(terminals) if isinstance(terminals, list) else 0,
    )


def jupyter_state(instance: Instance) -> JupyterState:
    """``unavailable`` (no server for this instance now), ``starting`` (running, server not answering yet)
    or ``ready``."""
    if not jupyter_enabled(instance) or instance.status != InstanceStatus.RUNNING:
        return "unavailable"
    return "ready" if jupyter_status(instance) is not None else "starting"


def jupyter_last_activity(instance: Instance) -> datetime | None:
    """The server's last activity (kernels, terminals, API use; UTC, aware) from its ``api/status``, or
    ``None`` when there is no server or it does not answer. The portal's own probes do not count."""
    status = jupyter_status(instance)
    value = status.get("last_activity") if status else None
    return parse_datetime(value) if isinstance(value, str) else None


def jupyter_ticket_issue(*, instance: Instance, user: User) -> tuple[JupyterEndpoint, str]:
    """A single-use ticket for ``user`` (already checked to be allowed to enter the instance) and the endpoint
    to present it to (``<url>login``, POST field ``ticket``); valid for ``INSTANCES_JUPYTER_TICKET_TTL_S``
    seconds (default 60). The ticket names the user by id (the server re-checks that id with the portal) and
    shows the e-mail address. Writes the audit row ``instance.jupyter_open``. Raises :class:`LookupError` when
    the server is not there."""
    endpoint = jupyter_endpoint(instance)
    if endpoint is None:
        raise LookupError("no Jupyter server for this instance")
    ttl = int(_setting("INSTANCES_JUPYTER_TICKET_TTL_S", 60))  # type: ignore[call-overload]
    ticket = ticket_mint(
        secret=jupyter_secret(instance),
        instance_id=str(instance.pk),
        username=str(user.pk),
        ttl_s=ttl,
        display_name=user.email,
    )
    audit_log(action="instance.jupyter_open", actor=user, organization=instance.organization, obj=instance)
    return endpoint, ticket


class JupyterAccessRefused(Exception):
    """The caller is not the instance's Jupyter server (no such instance, a wrong or missing token)."""


def jupyter_access_answer(*, instance_id: int, authorization: str, user_ref: object) -> dict[str, object]:
    """The portal's side of the server's re-check: ``{"allowed": bool, "recheck_s": int}`` for the portal user
    ``user_ref`` (the id the ticket named, a string of digits) on instance ``instance_id``. ``allowed`` is
    :func:`instances.interactive.access.may_enter` while the instance has a Jupyter server and is running;
    anything unreadable as a user id is not allowed. Raises :class:`JupyterAccessRefused` unless
    ``authorization`` is ``token <access_token(the instance's secret)>`` (constant-time compare)."""
    from instances.interactive.access import may_enter

    instance = Instance.objects.filter(pk=instance_id).select_related("organization").first()
    if instance is None or not hmac.compare_digest(
        authorization.encode(), f"token {access_token(jupyter_secret(instance))}".encode()
    ):
        raise JupyterAccessRefused("not this instance's Jupyter server")
    user = None
    if isinstance(user_ref, str) and user_ref.isascii() and user_ref.isdigit() and len(user_ref) < 20:
        user = User.objects.filter(pk=int(user_ref)).first()
    allowed = bool(
        user is not None
        and jupyter_enabled(instance)
        and instance.status == InstanceStatus.RUNNING
        and may_enter(user=user, instance=instance)
    )
    return {"allowed": allowed, "recheck_s": jupyter_recheck_s()}


def jupyter_recheck(instance: Instance) -> bool:
    """Tell the instance's server to forget what the portal told it and re-check its open sessions now
    (``POST <server>api/gpu-portal/recheck`` with the recheck token, :data:`RECHECK_PUSH_TIMEOUT_S` at most);
    True when it did (204). False when there is no server or it did not answer: it re-checks by itself
    within ``INSTANCES_JUPYTER_RECHECK_S`` seconds."""
    endpoint = jupyter_endpoint(instance)
    if endpoint is None:
        return False
    request = urllib.request.Request(  # noqa: S310 - http(s) URL built above
        f"{endpoint.probe_url}api/gpu-portal/recheck",
        data=b"",
        method="POST",
        headers={"Authorization": f"token {recheck_token(jupyter_secret(instance))}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=RECHECK_PUSH_TIMEOUT_S) as response:  # noqa: S310
            return bool(response.status == 204)
    except (OSError, ValueError, urllib.error.URLError):
        return False
