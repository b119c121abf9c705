"""Celery tasks of the instances app. Thin and idempotent: each calls one service and is safe to run twice
(services claim work with compare-and-set updates; the backend dedupes submits per (job, attempt))."""

from __future__ import annotations

from celery import shared_task

from instances import services


@shared_task
def launch_attempt(attempt_id: int) -> None:
    """Submit an attempt placed by the scheduler to the backend (enqueued after commit)."""
    services.attempt_submit(attempt_id=attempt_id)


@shared_task
def reconcile() -> dict[str, int]:
    """Periodic: backend status → transitions (preemption, crash, finish), due auto-resumes, a scheduling
    pass; then idle autostop of interactive instances (``instances.interactive.idle``)."""
    from django.conf import settings
    from django.core.cache import cache

    from instances.interactive.idle import idle_autostop_tick

    counts = services.instances_reconcile()
    # idle autostop asks every source (JupyterLab's server over HTTP among them): at most once a minute
    if cache.add("instances:idle-autostop-tick", 1, timeout=int(getattr(settings, "INSTANCES_IDLE_TICK_S", 60))):
        return {**counts, **idle_autostop_tick()}
    return counts


@shared_task
def schedule() -> int:
    """Offer free capacity to the queue (after a stop or cancel)."""
    return len(services.instances_schedule())


@shared_task
def stop_instance(instance_id: int) -> None:
    """Stop an instance's current attempt on the backend (after the final checkpoint) and free capacity."""
    services.instance_stop_backend(instance_id=instance_id)


@shared_task
def preempt_instance(instance_id: int) -> None:
    """Preempt an interruptible instance that got the scheduler's notice (SIGTERM → checkpoint → preempted)."""
    services.instance_preempt_backend(instance_id=instance_id)


@shared_task
def checkpoint_timers() -> int:
    """Periodic: ask running jobs whose last checkpoint is overdue for one."""
    return services.checkpoint_timers()


@shared_task
def sync_inventory() -> int:
    """Periodic: nodes from the backend's inventory."""
    return services.nodes_sync()


@shared_task
def volumes_measure() -> int:
    """Periodic: measure local volumes; stop writers of one over its size. Returns volumes over their size."""
    from instances.interactive.volumes import volumes_measure as measure

    return len(measure())


@shared_task
def access_sweep() -> int:
    """Periodic: rewrite the authorized keys of live instances that differ from who may enter them (a change
    no signal announced). Returns how many were rewritten."""
    from instances.interactive.access import access_sweep as sweep

    return sweep()


@shared_task
def access_enforce(organization_ids: list[int]) -> dict[str, int]:
    """After a change of who may enter (``instances.interactive.access.access_changed``): rewrite the
    organizations' instances' authorized keys, tell their JupyterLab servers to re-check. Safe to run twice."""
    from instances.interactive.access import access_enforce as enforce

    return enforce(organization_ids=organization_ids)
