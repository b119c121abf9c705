"""The model servers behind checkpoint app versions: which backend runs them, stopping the superseded one,
and the periodic health check that restarts a dead server.

The boundary is ``instances.serving`` (``LocalDeployments`` / ``KubernetesDeployments``); this module keeps
the marketplace's record of each server in ``AppVersion.deployment`` (a JSON dict) and its history in audit rows.

``AppVersion.deployment`` keys kept here, beside the backend's own (``backend``, ``name``, ``url``, ``pid`` …):

* ``stage``: ``queued`` / ``export`` / ``deploy`` while building, then ``serving``; ``restarting`` while the
  health check restarts it; ``down`` after a failed restart (the next check tries again); ``unhealthy`` after
  ``APP_SERVER_MAX_RESTARTS`` failed restarts in a row (no more tries; ``unhealthy_reason`` says why);
  ``stopped`` once its server was stopped (superseded by a newer version, or undeployed); ``suspended`` while
  the embedded product is down (``local_servers_suspend`` / ``local_servers_resume``, called by ``runportal``).
* ``restarts``: successful restarts so far; ``restart_failures``: failed restarts in a row (reset by a good
  check); ``last_restart_at`` (ISO 8601, UTC) and ``last_restart_s`` (seconds the last restart took);
  ``last_error``: the last cause of a restart or the last restart's failure.
* ``restart_claim`` / ``restart_claimed_at``: who restarts it now (a compare-and-set claim under the row
  lock), so two concurrent checks never restart one server twice; a claim older than
  ``APP_SERVER_RESTART_LEASE_S`` (a worker that died mid-restart) may be taken over.
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.audit import audit_log
from portal.marketplace.choices import AppState, ServingKind, VersionStatus
from portal.marketplace.models import App, AppVersion

if TYPE_CHECKING:
    from instances.serving import Deployments

log = logging.getLogger(__name__)

STOPPED, SERVING, RESTARTING, DOWN, UNHEALTHY = "stopped", "serving", "restarting", "down", "unhealthy"
SUSPENDED = "suspended"  # stopped with the embedded product (runportal); its next start brings it back
_CLAIM_KEYS = ("restart_claim", "restart_claimed_at")
# A restart claim lasts longer than the slowest start (Kubernetes' default ready timeout is 600 s).
DEFAULT_RESTART_LEASE_S = 900


def deployment_backend() -> Deployments:
    """The configured deployment backend: ``APP_DEPLOYMENTS_BACKEND`` (``local`` | ``kubernetes``) with
    ``APP_DEPLOYMENTS_OPTIONS`` — as ``instances.services.compute_backend`` reads ``INSTANCES_BACKEND``.

    Local servers live under ``APP_DEPLOYMENTS_DIR`` (default ``<DATA_DIR>/deployments``) with
    ``APP_SERVER_THREADS`` threads each; Kubernetes reads exports from ``<DATA_DIR>/apps`` (``model_root``),
    where the claim ``model_claim`` must be mounted on the workers. Raises ``ValueError`` for an unknown
    backend and ``instances.serving.DeploymentError`` for missing Kubernetes options.
    """
    from instances.serving import get_deployments

    name = str(getattr(settings, "APP_DEPLOYMENTS_BACKEND", "local"))
    options = dict(getattr(settings, "APP_DEPLOYMENTS_OPTIONS", {}) or {})
    if name == "local":
        root = getattr(settings, "APP_DEPLOYMENTS_DIR", None) or Path(settings.DATA_DIR) / "deployments"
        options.setdefault("root", root)
        options.setdefault("threads", int(getattr(settings, "APP_SERVER_THREADS", 1)))
    elif name == "kubernetes":
        options.setdefault("model_root", str(Path(settings.DATA_DIR) / "apps"))
    return get_deployments(name, **options)


def _has_server(deployment: dict[str, Any]) -> bool:
    return bool(deployment.get("name")) and deployment.get("stage") != STOPPED


# --- activation: the superseded version's server is stopped -------------------------------------------------


def checkpoint_version_activate(*, version_id: int) -> AppVersion:
    """Make the built checkpoint version ``version_id`` the one that answers its app's calls (``ready``, 100 %).

    Under the app's row lock (one activation per app at a time) the previously active version is
    deactivated; when it is a checkpoint version with a server, that server is stopped *after commit*
    (``version_server_stop``, its stage becomes ``stopped``). External and echo versions have nothing to stop.
    Writes one audit row per superseded version. Returns the version.
    """
    with transaction.atomic():
        version = AppVersion.objects.select_related("app").get(pk=version_id)
        App.objects.select_for_update().get(pk=version.app_id)
        previous = list(
            AppVersion.objects.select_for_update().filter(app_id=version.app_id, active=True).exclude(pk=version_id)
        )
        AppVersion.objects.filter(pk__in=[p.pk for p in previous]).update(active=False)
        AppVersion.objects.filter(pk=version_id).update(active=True, status=VersionStatus.READY, progress=100)
        for old in previous:
            stops = old.kind == ServingKind.CHECKPOINT and _has_server(old.deployment)
            audit_log(
                action="marketplace.version_superseded",
                actor=None,
                organization=version.app.publisher,
                obj=old,
                extra={"by_version": version.number, "stop_server": stops},
            )
            if stops:
                transaction.on_commit(partial(_stop_quietly, old.pk, f"superseded by v{version.number}"))
    version.refresh_from_db()
    if version.deployment.get("publish_when_ready"):
        _publish_when_ready(version)
    return version


def _publish_when_ready(version: AppVersion) -> None:
    """A private app published from a checkpoint goes live with its first built version (``app_transition``
    by the platform, so a paid app whose training data forbids it stays a draft with the reason)."""
    from portal.marketplace.reasons import app_reason
    from portal.marketplace.services import LicenseForbidsPublishing, MarketplaceError, app_transition

    app = App.objects.get(pk=version.app_id)
    if app.state != AppState.DRAFT:
        return
    try:
        app_transition(app=app, to=AppState.PUBLISHED, reason=app_reason("published_first_version"), acting_user=None)
    except LicenseForbidsPublishing as exc:  # stays a draft: why, as a code with the problems
        why = app_reason("license_forbids", p=list(exc.details or []))
        App.objects.filter(pk=app.pk, state=AppState.DRAFT).update(
            state_reason=why[:300], state_reason_code=why.code, state_reason_params=why.params
        )
    except MarketplaceError as exc:
        App.objects.filter(pk=app.pk, state=AppState.DRAFT).update(
            state_reason=str(exc)[:300], state_reason_code="", state_reason_params={}
        )


def _stop_quietly(version_id: int, reason: str) -> bool:
    """``version_server_stop`` for an on-commit callback: a failure (the cluster's API is down) must not fail
    the activation that already committed; the health check's sweep stops the server later. True when the
    stop went through."""
    try:
        version_server_stop(version_id=version_id, reason=reason)
    except Exception:
        log.exception("stopping the server of app version %s failed; the health check will retry", version_id)
        return False
    return True


def version_server_stop(*, version_id: int, reason: str, only_if_inactive: bool = True) -> AppVersion:
    """Stop the model server of checkpoint version ``version_id`` and mark its deployment ``stopped`` with
    ``stopped_reason`` and ``stopped_at``; the pid is cleared. Idempotent (a stopped one is left as it is).

    With ``only_if_inactive`` (the default: the caller stops a superseded version) a version that became
    active again in the meantime is left running. Writes an audit row when it stops something.
    """
    version = AppVersion.objects.select_related("app").get(pk=version_id)
    deployment = dict(version.deployment)
    if version.kind != ServingKind.CHECKPOINT or not _has_server(deployment):
        return version
    if only_if_inactive and version.active:
        return version
    deployment_backend().stop(deployment)
    with transaction.atomic():
        current = AppVersion.objects.select_for_update().get(pk=version_id)
        if only_if_inactive and current.active:  # re-activated while we stopped it: the check restarts it
            return current
        AppVersion.objects.filter(pk=version_id).update(
            deployment={
                **{k: v for k, v in current.deployment.items() if k not in _CLAIM_KEYS},
                "pid": None,
                "stage": STOPPED,
                "stopped_reason": reason[:300],
                "stopped_at": timezone.now().isoformat(),
            }
        )
        audit_log(
            action="marketplace.version_server_stopped",
            actor=None,
            organization=version.app.publisher,
            obj=version,
            extra={"reason": reason[:300], "name": deployment.get("name", "")},
        )
    version.refresh_from_db()
    return version


# --- the health check --------------------------------------------------------------------------------------


def _max_restarts() -> int:
    return int(getattr(settings, "APP_SERVER_MAX_RESTARTS", 3))


def _claim_live(deployment: dict[str, Any], now: datetime) -> bool:
    claimed_at = deployment.get("restart_claimed_at")
    if not deployment.get("restart_claim") or not claimed_at:
        return False
    lease = timedelta(seconds=int(getattr(settings, "APP_SERVER_RESTART_LEASE_S", DEFAULT_RESTART_LEASE_S)))
    return datetime.fromisoformat(str(claimed_at)) + lease > now


def _is_serving_version(version: AppVersion) -> bool:
    return (
        version.active
        and version.status == VersionStatus.READY
        and version.kind == ServingKind.CHECKPOINT
        and version.app.state != AppState.SUSPENDED
    )


def app_deployments_check(*, now: datetime | None = None) -> dict[str, int]:
    """Check the server of every active, ready checkpoint version whose app is not suspended, restart dead ones,
    and stop servers of versions that are no longer active (a safety net behind ``checkpoint_version_activate``).

    A server is dead when its process / Deployment is not alive or it does not answer ``/healthz`` (asked
    twice, 2 s then 10 s). A dead one is claimed under the row lock, stopped (a hung process is killed) and
    started again from the same export (``artifact_path``); the result is recorded in ``version.deployment``
    (see the module docstring) with an audit row (``marketplace.version_restarted`` /
    ``marketplace.version_restart_failed`` / ``marketplace.version_unhealthy``). After
    ``APP_SERVER_MAX_RESTARTS`` failed restarts in a row the deployment is ``unhealthy`` and no longer
    restarted; an ``unhealthy`` server found healthy again (a cluster healed it) goes back to ``serving``.

    Safe to run twice, also concurrently: a version claimed by another run, or whose deployment changed since
    it was read, is skipped. Returns counts: ``healthy``, ``restarted``, ``restart_failed``, ``unhealthy``,
    ``skipped``, ``stopped``.
    """
    now = now or timezone.now()
    counts = dict.fromkeys(("healthy", "restarted", "restart_failed", "unhealthy", "skipped", "stopped"), 0)
    backend = deployment_backend()
    serving = (
        AppVersion.objects.filter(kind=ServingKind.CHECKPOINT, active=True, status=VersionStatus.READY)
        .exclude(app__state=AppState.SUSPENDED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for version_id in list(serving):
        counts[_check_one(backend, version_id, now)] += 1
    superseded = (
        AppVersion.objects.filter(kind=ServingKind.CHECKPOINT, active=False, status=VersionStatus.READY)
        .exclude(deployment__stage__in=[STOPPED, RESTARTING])
        .order_by("pk")
    )
    for version in superseded:
        if _has_server(version.deployment):
            counts["stopped"] += _stop_quietly(version.pk, "no longer the active version")
    return counts


def _answers(backend: Deployments, deployment: dict[str, Any]) -> tuple[bool, str]:
    """(healthy, cause when not) of one deployment."""
    from instances.serving import healthy

    if not backend.alive(deployment):
        return False, "the model server is not running"
    if healthy(deployment) or healthy(deployment, timeout_s=10.0):
        return True, ""
    return False, "the model server does not answer /healthz"


def _update_if_unchanged(version_id: int, seen: dict[str, Any], deployment: dict[str, Any]) -> bool:
    """Write ``deployment`` when the stored one still equals ``seen`` (compared under the row lock)."""
    with transaction.atomic():
        locked = AppVersion.objects.select_for_update().get(pk=version_id)
        if locked.deployment != seen:
            return False
        AppVersion.objects.filter(pk=version_id).update(deployment=deployment)
    return True


def _check_one(backend: Deployments, version_id: int, now: datetime) -> str:
    version = AppVersion.objects.select_related("app").get(pk=version_id)
    seen = dict(version.deployment)
    if seen.get("stage") in (STOPPED, SUSPENDED) or _claim_live(seen, now):
        return "skipped"  # undeployed by the publisher, suspended with runportal, or another run restarts it
    try:
        ok, cause = _answers(backend, seen)
    except Exception as exc:  # the cluster's API failed: no verdict about the server, try next time
        _update_if_unchanged(version_id, seen, {**seen, "last_check_error": f"{type(exc).__name__}: {exc}"[:500]})
        return "skipped"
    if ok:
        if seen.get("stage") != SERVING or seen.get("restart_failures"):
            _update_if_unchanged(version_id, seen, {**seen, "stage": SERVING, "restart_failures": 0})
        return "healthy"
    if seen.get("stage") == UNHEALTHY:
        return "unhealthy"  # given up: the publisher publishes again

    token = secrets.token_hex(8)
    with transaction.atomic():  # the claim: compare-and-set under the row lock
        locked = AppVersion.objects.select_for_update().select_related("app").get(pk=version_id)
        if locked.deployment != seen or not _is_serving_version(locked):
            return "skipped"  # changed since we looked: another run restarted it, or it was superseded
        AppVersion.objects.filter(pk=version_id).update(
            deployment={**seen, "stage": RESTARTING, "restart_claim": token, "restart_claimed_at": now.isoformat()}
        )

    started = time.monotonic()
    new: dict[str, Any] | None = None
    error = ""
    try:
        backend.stop(seen)  # a hung server is killed; a dead one is a no-op
        new = backend.start(
            name=str(seen.get("name") or f"app-version-{version_id}"),
            model_dir=version.artifact_path or str(seen.get("model_dir") or ""),
            deployment=seen,
        )
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = round(time.monotonic() - started, 2)

    stop_new = False
    with transaction.atomic():
        locked = AppVersion.objects.select_for_update().select_related("app").get(pk=version_id)
        current = locked.deployment
        if current.get("restart_claim") != token:  # our claim expired and another run took over
            stop_new = new is not None
            outcome = "skipped"
        else:
            base = {k: v for k, v in current.items() if k not in _CLAIM_KEYS}
            base.update(last_restart_at=timezone.now().isoformat(), last_restart_s=seconds)
            if new is not None:
                record = {
                    **base,
                    **new,
                    "stage": SERVING,
                    "restarts": int(base.get("restarts", 0)) + 1,
                    "restart_failures": 0,
                    "last_error": cause,
                }
                outcome, action = "restarted", "marketplace.version_restarted"
                if not locked.active:  # superseded while restarting: the new server is not needed
                    record.update(stage=STOPPED, pid=None, stopped_reason="superseded while restarting")
                    stop_new = True
            else:
                failures = int(base.get("restart_failures", 0)) + 1
                record = {**base, "pid": None, "stage": DOWN, "restart_failures": failures, "last_error": error[:1000]}
                outcome, action = "restart_failed", "marketplace.version_restart_failed"
                if failures >= _max_restarts():
                    record.update(  # the text for the API; the page shows the code's summary and last_error
                        stage=UNHEALTHY,
                        unhealthy_reason=(f"{failures} restarts in a row failed; last: {error}")[:1000],
                        unhealthy_code="restarts_failed",
                    )
                    outcome, action = "unhealthy", "marketplace.version_unhealthy"
            AppVersion.objects.filter(pk=version_id).update(deployment=record)
            audit_log(
                action=action,
                actor=None,
                organization=locked.app.publisher,
                obj=locked,
                extra={
                    "cause": cause,
                    "error": error[:500],
                    "seconds": seconds,
                    "restarts": record.get("restarts", 0),
                    "restart_failures": record["restart_failures"],
                },
            )
    if stop_new and new is not None:
        backend.stop(new)
    return outcome


# --- the embedded product's shutdown and start: nothing outlives runportal, servers come back with it ---------


def _local_backend() -> Deployments | None:
    return deployment_backend() if str(getattr(settings, "APP_DEPLOYMENTS_BACKEND", "local")) == "local" else None


def local_servers_suspend() -> list[int]:
    """Stop every local model server of a checkpoint version (``runportal``'s Ctrl-C: the servers run in their
    own sessions, so the terminal's signal does not reach them) and mark it ``suspended``, so that
    :func:`local_servers_resume` brings it back on the next start and the health check leaves it alone
    meanwhile. Returns the version ids stopped. Does nothing on the Kubernetes backend (its servers outlive
    workers by design)."""
    backend = _local_backend()
    if backend is None:
        return []
    stopped = []
    candidates = AppVersion.objects.filter(kind=ServingKind.CHECKPOINT).exclude(
        deployment__stage__in=[STOPPED, SUSPENDED]
    )
    for version in candidates.order_by("pk"):
        seen = dict(version.deployment)
        if not seen.get("pid"):
            continue
        try:
            backend.stop(seen)  # SIGTERM to the server's process group, SIGKILL after 10 s
        except Exception:  # one server that cannot be stopped must not keep the others running
            log.exception("could not stop the model server of app version %s", version.pk)
            continue
        if _update_if_unchanged(version.pk, seen, {**seen, "stage": SUSPENDED, "pid": None}):
            stopped.append(version.pk)
    return stopped


def local_servers_resume() -> list[int]:
    """Start again the server of every ``suspended`` version that still serves its app (active, ready, app not
    suspended); a suspended version that no longer serves is marked ``stopped``. Each start is claimed under the
    row lock (stage ``restarting``), so a concurrent health check or a second call starts nothing twice; a start
    that fails leaves the version ``down`` for the health check to retry. Returns the version ids started."""
    backend = _local_backend()
    if backend is None:
        return []
    started = []
    for version in AppVersion.objects.select_related("app").filter(deployment__stage=SUSPENDED).order_by("pk"):
        seen = dict(version.deployment)
        if not _is_serving_version(version):
            _update_if_unchanged(version.pk, seen, {**seen, "stage": STOPPED})
            continue
        claim = {
            **seen,
            "stage": RESTARTING,
            "restart_claim": secrets.token_hex(8),
            "restart_claimed_at": timezone.now().isoformat(),
        }
        if not _update_if_unchanged(version.pk, seen, claim):
            continue
        try:
            new = backend.start(
                name=str(seen.get("name") or f"app-version-{version.pk}"),
                model_dir=version.artifact_path or str(seen.get("model_dir") or ""),
                deployment=seen,
            )
        except Exception as exc:
            log.warning("could not start the model server of app version %s again: %s", version.pk, exc)
            _update_if_unchanged(
                version.pk, claim, {**seen, "stage": DOWN, "last_error": f"{type(exc).__name__}: {exc}"[:500]}
            )
            continue
        if _update_if_unchanged(version.pk, claim, {**new, "stage": SERVING}):
            started.append(version.pk)
            audit_log(action="marketplace.version_resumed", actor=None, organization=version.app.publisher, obj=version)
    return started
