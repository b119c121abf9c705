"""Celery tasks of the app marketplace. Thin and idempotent: each calls one service and is safe to run twice."""

from __future__ import annotations

from celery import shared_task

from portal.marketplace import calls, deployments, services


@shared_task
def app_version_build(version_id: int) -> str:
    """Export a published checkpoint, start its model server and activate the version (enqueued after commit).

    A version that is no longer ``building`` is left alone, so a redelivered task does nothing twice. A
    failure is recorded on the version (stage and cause) and not retried: publishing again starts afresh.
    Returns the version's status.
    """
    try:
        return str(services.app_version_build(version_id=version_id).status)
    except services.BuildFailed:
        return "failed"


@shared_task
def app_deployments_check() -> dict[str, int]:
    """Every 60 s (beat): check the model servers of active checkpoint versions, restart dead ones and stop
    servers of superseded versions (``deployments.app_deployments_check``). Safe to run twice, also at once:
    a server being restarted by another run is skipped. Returns the counts per outcome."""
    return deployments.app_deployments_check()


@shared_task
def app_calls_release_stale() -> int:
    """Every 60 s (beat): release app-call reservations whose worker died before recording an answer
    (``calls.calls_release_stale``); returns how many. Safe to run twice."""
    return calls.calls_release_stale()
