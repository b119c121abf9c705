"""Preemption of interruptible instances for on-demand work (the interruptible tier; the choice of victims is
``instances.preemption``): the preemption task, the words the user reads, and an interactive instance's
re-queue. The path is the one a lost node takes: SIGTERM → checkpoint → ``preempted`` → resumed."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from instances import joblogs
from instances.backends.base import JobStatus, UnknownHandle
from instances.choices import AttemptState, InstanceKind, InstanceStatus
from instances.models import Instance, JobAttempt, TrainingJob
from instances.preemption import notices_withdraw
from instances.reasons import Reason
from instances.services import backend as boundary
from instances.services.backend import _setting
from instances.services.transitions import _try_transition

S = InstanceStatus


def preempted_reason(instance: Instance) -> Reason:
    """What a preempted interruptible instance tells its user: a training job resumes exactly from the
    checkpoint saved on SIGTERM; an interactive instance keeps its disk, not its processes."""
    if instance.kind == InstanceKind.INTERACTIVE:
        return Reason("preempted_interactive")
    return Reason("preempted_training")


def interactive_requeue(*, instance: Instance, now: datetime) -> bool:
    """Queue a preempted interactive instance again (``scheduling``, behind on-demand work by its tier's
    rank), so that it starts again when capacity returns. Returns False if it was no longer preempted."""
    return _try_transition(instance, S.SCHEDULING, Reason("waiting_after_preemption"), now=now, submitted_at=now)


def notice_act(*, instance_id: int, now: datetime) -> bool:
    """Decide, under the victim's row lock, whether its preemption notice is acted on: True once the stop
    may begin (``preempt_started_at`` set now, or earlier by a first run of the task), False when there is
    no notice any more or it was withdrawn here because its request no longer waits
    (``instances.preemption.notices_withdraw``). The request's own stop withdraws under the same lock, so of
    the two exactly one wins."""
    with transaction.atomic():
        victim = (
            Instance.objects.select_for_update()
            .filter(pk=instance_id)
            .values("status", "preempt_requested_at", "preempt_started_at")
            .first()
        )
        if victim is None or victim["preempt_requested_at"] is None:
            return False
        if victim["status"] not in (S.PROVISIONING, S.RUNNING):
            return False
        if victim["preempt_started_at"] is not None:  # a re-run of the task (a lost one): the stop goes on
            return True
        if notices_withdraw(pks=[instance_id], now=now):
            return False
        Instance.objects.filter(pk=instance_id).update(preempt_started_at=now)
        return True


def instance_preempt_backend(*, instance_id: int, now: datetime | None = None) -> Instance:
    """The preemption task: stop the noticed instance's current attempt (SIGTERM: the runtime saves a
    checkpoint and exits; SIGKILL after ``INSTANCES_STOP_GRACE_S``), record it as a preemption
    (``attempt_observe``), then offer the freed capacity to the queue. An attempt not yet on the backend is
    preempted at once. Idempotent: an instance without a notice, or no longer holding capacity, is left alone.
    """
    from instances.services.reconcile import attempt_observe, instances_reconcile_queue

    instance = Instance.objects.get(pk=instance_id)
    if instance.preempt_requested_at is None or instance.status not in (S.PROVISIONING, S.RUNNING):
        return instance
    if not notice_act(instance_id=instance.pk, now=now or timezone.now()):
        instance.refresh_from_db()
        return instance  # withdrawn (its request no longer waits), or acted on by no one: left running
    attempt = instance.attempts.order_by("-number").first()
    if attempt is None or not attempt.handle:
        now = now or timezone.now()
        with transaction.atomic():
            if attempt is not None:
                JobAttempt.objects.filter(pk=attempt.pk, handle="").update(
                    state=AttemptState.PREEMPTED,
                    message=Reason("preempted_before_start"),
                    message_code="preempted_before_start",
                    message_params={},
                    ended_at=now,
                )
            moved = _try_transition(
                instance,
                S.PREEMPTED,
                preempted_reason(instance),
                now=now,
                placement=[],
                preempt_requested_at=None,
                preempt_for=None,
                preempt_started_at=None,
            )
            if moved:
                delay = float(_setting("INSTANCES_PREEMPT_RESUME_DELAY_S", 0))
                counted = TrainingJob.objects.filter(instance=instance).update(
                    preempt_count=F("preempt_count") + 1, next_resume_at=now + timedelta(seconds=delay)
                )
                if not counted:  # an interactive instance: queued again at once
                    interactive_requeue(instance=instance, now=now)
    else:
        backend = boundary.compute_backend()
        joblogs.attempt_logs_archive(attempt=attempt, backend=backend)
        try:
            st = backend.stop(attempt.handle, float(_setting("INSTANCES_STOP_GRACE_S", 120)))
        except UnknownHandle as exc:
            st = JobStatus("stopped", None, str(exc))
        if not st.terminal:
            return instance  # the reconcile records it when the backend is done
        attempt_observe(attempt=attempt, status=st, now=now)
    instances_reconcile_queue()
    instance.refresh_from_db()
    return instance
