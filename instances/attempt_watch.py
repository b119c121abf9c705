"""What the reconcile learns about an attempt beyond its state: when it was last seen running, why it waits,
and when waiting has lasted too long (called from ``instances.services.attempt_observe``).

* **Last seen running.** Every reconcile that reads ``running`` stamps ``JobAttempt.last_seen_running_at``.
  An attempt lost without a trace (a Kubernetes Job deleted outside the portal answers 404; processes gone
  without an exit code) closes its run segment just after the last moment it was known to run — the later
  of that stamp and the runtime's last callback — not at the reconcile that noticed the loss, so metering
  bills no minute begun after it. The same stamp on the open segment (``InstanceRunSegment.seen_until``)
  bounds what a metering tick charges before the loss is known: a tick that runs while reconciles are late
  (a broker backlog, a worker restarting) charges up to the last sighting, never a minute that the loss
  will put after the segment's end (found by the simulator, ``tests/simulation``, seed 3).
* **Pending reasons.** While an attempt is pending, the backend's reason (no node with room, an image that
  cannot be pulled; see ``instances.k8s_reasons``) becomes the instance's status reason, in words.
* **Pending timeout.** An attempt still pending after ``INSTANCES_PENDING_TIMEOUT_S`` seconds (default 900)
  is given up: the instance fails with the reason, the job is not retried (a retry would wait the same way),
  and the backend attempt is stopped after commit.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from instances.backends.base import BackendError, JobStatus, UnknownHandle
from instances.choices import ATTEMPT_TERMINAL, AttemptState, InstanceStatus, JobOutcome
from instances.k8s_reasons import pending_timeout_reason, status_reason
from instances.models import Instance, InstanceRunSegment, JobAttempt, JobEvent, TrainingJob
from instances.reasons import reason_fields

log = logging.getLogger(__name__)
MICROSECOND = timedelta(microseconds=1)


def attempt_seen_running(*, attempt: JobAttempt, now: datetime) -> None:
    """Stamp the attempt, and its instance's open run segment (``seen_until``, how far metering may charge
    it), as seen running at ``now``; neither stamp moves backwards."""
    JobAttempt.objects.filter(pk=attempt.pk).exclude(last_seen_running_at__gte=now).update(last_seen_running_at=now)
    InstanceRunSegment.objects.filter(instance_id=attempt.instance_id, ended_at__isnull=True).exclude(
        seen_until__gte=now
    ).update(seen_until=now)


def last_seen_running(attempt: JobAttempt) -> datetime | None:
    """The later of the reconcile's last sighting and the runtime's last callback for this attempt."""
    seen = JobAttempt.objects.filter(pk=attempt.pk).values_list("last_seen_running_at", flat=True).first()
    called = None
    if attempt.job_id is not None:
        called = JobEvent.objects.filter(job_id=attempt.job_id, attempt=attempt.number).aggregate(t=Max("received_at"))[
            "t"
        ]
    times = [t for t in (seen, called) if t is not None]
    return max(times) if times else None


def segment_end_at_last_seen(*, instance: Instance, attempt: JobAttempt, closed_at: datetime) -> None:
    """The run segment just closed at ``closed_at`` by a loss ends instead just after the attempt was last seen
    running: the sighting's instant was a running one, so the segment is ``[start, seen]``, i.e. ends at
    ``seen`` + 1 µs and a minute begun at the sighting counts, as the metering tick counts it for an open
    segment (``billing.metering``: an open segment is charged over ``[start, seen_until]``). Never before the
    segment's start, so a segment never runs backwards."""
    seen = last_seen_running(attempt)
    for seg in InstanceRunSegment.objects.filter(instance=instance, ended_at=closed_at):
        end = max(seg.started_at, min(seen + MICROSECOND, closed_at)) if seen is not None else seg.started_at
        if end != closed_at:
            InstanceRunSegment.objects.filter(pk=seg.pk).update(ended_at=end)


def attempt_pending(*, attempt: JobAttempt, status: JobStatus, now: datetime) -> Instance:
    """Show why a pending attempt waits; give it up past ``INSTANCES_PENDING_TIMEOUT_S``. Returns the
    refreshed instance."""
    from instances.services import backend as boundary
    from instances.services.transitions import _try_transition

    instance = attempt.instance
    instance.refresh_from_db()
    if instance.status != InstanceStatus.PROVISIONING:
        return instance
    gpu_type = instance.gpu_type.code
    timeout_s = float(getattr(settings, "INSTANCES_PENDING_TIMEOUT_S", 900))
    since = attempt.submitted_at or attempt.created_at
    if since is not None and now - since >= timedelta(seconds=timeout_s):
        reason = pending_timeout_reason(status, gpu_type=gpu_type, minutes=round(timeout_s / 60))
        with transaction.atomic():
            claimed = (
                JobAttempt.objects.filter(pk=attempt.pk)
                .exclude(state__in=ATTEMPT_TERMINAL)
                .update(
                    state=AttemptState.FAILED,
                    message=reason[:300],
                    message_code=reason_fields(reason)[0],
                    message_params=reason_fields(reason)[1],
                    ended_at=now,
                )
            )
            if claimed and _try_transition(instance, InstanceStatus.FAILED, reason, now=now, placement=[]):
                TrainingJob.objects.filter(instance=instance).update(
                    outcome=JobOutcome.FAILED, next_resume_at=None, stop_requested=False, checkpoint_requested=False
                )
        if claimed:
            try:
                boundary.compute_backend().stop(attempt.handle, 0.0)
            except (BackendError, UnknownHandle) as exc:
                log.warning("stopping %s after its pending timeout failed: %s", attempt.handle, exc)
        instance.refresh_from_db()
        return instance
    if status.reason:
        text = status_reason(status, gpu_type=gpu_type)
        if text != instance.status_reason:
            code, params = reason_fields(text)
            Instance.objects.filter(pk=instance.pk, status=InstanceStatus.PROVISIONING).update(
                status_reason=text[:300], status_reason_code=code, status_reason_params=params
            )
            JobAttempt.objects.filter(pk=attempt.pk).update(message=text)
            instance.refresh_from_db()
    return instance
