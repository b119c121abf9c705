"""The one transition function of an instance's status, and the job-outcome write that goes with leaving
the watched states."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from instances.choices import IllegalTransition, InstanceStatus
from instances.models import Instance, TrainingJob
from instances.transitions import Move, instances_transition
from portal.models import User

S = InstanceStatus


def instance_transition(
    *,
    instance: Instance,
    to: str,
    reason: str = "",
    acting_user: User | None = None,
    now: datetime | None = None,
    **fields: Any,
) -> Instance:
    """Move ``instance`` to status ``to`` if ``INSTANCE_TRANSITIONS`` allows it; the only writer of ``status``.

    Compare-and-set on the current status, so two workers never both apply a change; writes an
    ``InstanceTransition`` row and an audit row; opens a run segment on entering ``running`` and closes the
    open one on leaving it (metering reads them). ``fields``: other Instance columns to set in the same
    update. Raises :class:`IllegalTransition` (nothing written) when the table forbids the move or the
    status changed under us. Returns the refreshed instance. The rule itself (shared with the scheduling
    pass, which moves many instances at once) is :func:`instances.transitions.instances_transition`.
    """
    if not instances_transition(moves=[Move(instance, to, reason, fields)], acting_user=acting_user, now=now):
        fresh = Instance.objects.get(pk=instance.pk).status
        raise IllegalTransition(fresh, to)
    instance.refresh_from_db()
    return instance


def _try_transition(instance: Instance, to: str, reason: str = "", **kw: Any) -> bool:
    """Like :func:`instance_transition` but returns False instead of raising (for idempotent tasks)."""
    try:
        instance_transition(instance=instance, to=to, reason=reason, **kw)
    except IllegalTransition:
        instance.refresh_from_db()
        return False
    return True


def _job_finish(instance: Instance, outcome: str) -> None:
    """Record a job's final outcome and clear its pending requests (the instance has stopped or failed)."""
    TrainingJob.objects.filter(instance=instance).update(
        outcome=outcome, next_resume_at=None, stop_requested=False, checkpoint_requested=False
    )
