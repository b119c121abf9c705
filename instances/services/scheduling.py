"""Scheduling and submit: a gang-scheduler pass over the queue, the attempt it creates, and the launch
task that submits an attempt to the backend."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from instances import tasks
from instances.backends.base import BackendError
from instances.choices import AttemptState, InstanceStatus, JobOutcome
from instances.models import Instance, JobAttempt
from instances.reasons import Reason
from instances.runtime.config import ConfigError
from instances.services import backend as boundary
from instances.services.backend import _setting
from instances.services.runtime_config import job_spec_for
from instances.services.transitions import _job_finish, _try_transition
from portal.webhooks.services import webhook_emit

S = InstanceStatus


def instances_schedule(*, now: datetime | None = None) -> Sequence[Instance]:
    """One pass of the gang scheduler over the queue (instances in ``scheduling``), FIFO with restricted
    backfill (``instances.scheduler.schedule_queue``). Placed instances move to ``provisioning`` with a new
    attempt, and their launch task is enqueued after commit; waiting ones get their queue position and
    reason; permanently unplaceable ones fail. Passes serialize on an advisory lock and lock only the nodes
    they choose; the writes are set-based (``instances.scheduling_pass``). Returns the instances placed (built
    when read)."""
    from instances.scheduling_pass import schedule_pass

    return schedule_pass(
        now=now,
        backend=_setting("INSTANCES_BACKEND", "local"),
        on_attempt=lambda attempt_id: tasks.launch_attempt.delay(attempt_id),
        on_preempt=lambda instance_id: tasks.preempt_instance.delay(instance_id),
    )


def attempt_submit(*, attempt_id: int) -> JobAttempt:
    """Submit an attempt to the backend (the launch task). Idempotent: an attempt with a handle, or whose
    instance no longer waits to start, is left alone; the backend itself dedupes ``(job_id, attempt)``.
    A backend refusal fails the instance with the backend's message."""
    attempt = JobAttempt.objects.select_related("instance", "instance__image", "job").get(pk=attempt_id)
    instance = attempt.instance
    if attempt.handle or instance.status != S.PROVISIONING or attempt.state != AttemptState.PENDING:
        return attempt
    latest = instance.attempts.order_by("-number").values_list("pk", flat=True).first()
    if latest != attempt.pk:
        return attempt
    from instances.interactive.ssh import ssh_prepare

    try:
        spec = job_spec_for(attempt)
        spec = ssh_prepare(instance=instance, spec=spec)  # SSH keys and host key, before the server starts
        handle = boundary.compute_backend().submit(spec)
    except (BackendError, ConfigError) as exc:
        with transaction.atomic():
            JobAttempt.objects.filter(pk=attempt.pk).update(
                state=AttemptState.FAILED, message=str(exc)[:300], ended_at=timezone.now()
            )
            _try_transition(instance, S.FAILED, Reason("launch_failed", {"err": str(exc)}))
            _job_finish(instance, JobOutcome.FAILED)
            webhook_emit(
                organization=instance.organization,
                event_type="job.failed",
                data={
                    "job_id": attempt.job_id,
                    "instance_id": instance.pk,
                    "attempt": attempt.number,
                    "exit_code": None,
                    "message": str(exc)[:300],
                },
            )
        return attempt
    JobAttempt.objects.filter(pk=attempt.pk, handle="").update(handle=handle, submitted_at=timezone.now())
    attempt.refresh_from_db()
    instance.refresh_from_db()
    if instance.status == S.STOPPING:  # stopped while we were submitting
        transaction.on_commit(lambda: tasks.stop_instance.delay(instance.pk))
    return attempt
