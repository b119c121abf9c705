"""The one transition function of an instance's status, and the job-outcome write that goes with leaving
the watched states."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from instances.choices import INSTANCE_TRANSITIONS, IllegalTransition, InstanceStatus
from instances.models import Instance, InstanceRunSegment, InstanceTransition, TrainingJob
from portal.audit import audit_log
from portal.models import User
from portal.webhooks.services import webhook_emit

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
    status changed under us. Returns the refreshed instance.
    """
    now = now or timezone.now()
    current = instance.status
    if to not in INSTANCE_TRANSITIONS.get(current, frozenset()):
        raise IllegalTransition(current, to)
    with transaction.atomic():
        updated = Instance.objects.filter(pk=instance.pk, status=current).update(
            status=to, status_reason=reason[:300], updated_at=now, **fields
        )
        if updated != 1:
            fresh = Instance.objects.get(pk=instance.pk).status
            raise IllegalTransition(fresh, to)
        InstanceTransition.objects.create(
            instance=instance, from_status=current, to_status=to, reason=reason[:300], actor=acting_user,
            created_at=now,
        )
        if current == S.RUNNING:
            InstanceRunSegment.objects.filter(instance=instance, ended_at__isnull=True).update(ended_at=now)
        if to == S.RUNNING:
            InstanceRunSegment.objects.create(instance=instance, started_at=now)
        audit_log(action=f"instances.instance.{to}", actor=acting_user, organization=instance.organization,
                  obj=instance, extra={"from": current, "to": to, "reason": reason})
        webhook_emit(organization=instance.organization, event_type="instance.state_changed", data={
            "instance_id": instance.pk, "name": instance.name, "from": current, "to": to, "reason": reason[:300]})
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
    TrainingJob.objects.filter(instance=instance).update(outcome=outcome, next_resume_at=None,
                                                         stop_requested=False, checkpoint_requested=False)
