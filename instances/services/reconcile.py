"""Reconcile, resume and stop: what the backend says becomes transitions; resting jobs are queued again;
stops go through ``stopping`` with a final checkpoint."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from instances import attempt_watch, joblogs, tasks
from instances.backends.base import (
    BackendError,
    ComputeBackend,
    JobStatus,
    UnknownHandle,
    command_state_for_exit_code,
)
from instances.choices import (
    ATTEMPT_TERMINAL,
    RESTING,
    WATCHED,
    AttemptState,
    InstanceKind,
    InstanceStatus,
    JobOutcome,
)
from instances.k8s_reasons import status_reason
from instances.models import Instance, JobAttempt, Node, TrainingJob
from instances.preemption import notices_withdraw
from instances.reasons import Reason, reason_fields
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED, RESUMABLE_EXIT_CODES
from instances.services import backend as boundary
from instances.services.backend import _setting
from instances.services.inventory import nodes_sync
from instances.services.preempting import interactive_requeue, preempted_reason
from instances.services.scheduling import instances_schedule
from instances.services.transitions import _job_finish, _try_transition, instance_transition
from portal.audit import audit_log
from portal.models import User
from portal.permissions import authorize_change
from portal.webhooks.services import webhook_emit

log = logging.getLogger(__name__)
S = InstanceStatus


def attempt_observe(*, attempt: JobAttempt, status: JobStatus, now: datetime | None = None) -> Instance:
    """Apply what the backend says about ``attempt`` to it and its instance (idempotent).

    running → the instance is ``running``. finished → ``stopped`` (job outcome finished). stopped → ``stopped``
    (or a restart when a rollback / restart asked for it). preempted, or processes gone without an exit code
    and without a stop request (a lost node) → ``preempted``, resumed after ``INSTANCES_PREEMPT_RESUME_DELAY_S``
    without touching the crash budget. A crash → ``failed``; resumed with exponential backoff
    (``INSTANCES_RESUME_BACKOFF_S`` × 2^(n-1)) while ``crash_count`` ≤ ``INSTANCES_MAX_CRASH_RESUMES``.
    A config error or a refused resume is not retried.
    """
    now = now or timezone.now()
    instance = attempt.instance
    instance.refresh_from_db()
    if status.state == "running":
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, Reason("running"), now=now)
        JobAttempt.objects.filter(pk=attempt.pk, state=AttemptState.PENDING).update(state=AttemptState.RUNNING)
        attempt_watch.attempt_seen_running(attempt=attempt, now=now)  # bills a lost job up to here
        return instance
    if status.state == "pending":  # the reason in words; given up past INSTANCES_PENDING_TIMEOUT_S
        return attempt_watch.attempt_pending(attempt=attempt, status=status, now=now)
    if not status.terminal:
        return instance
    if status.reason == "deleted" and instance.status == S.STOPPING:  # our own stop deleted it
        status = JobStatus("stopped", None, Reason("stopped"), status.started_at, now)
    elif status.reason:  # the backend's cause in the user's language (instances.k8s_reasons)
        status = dataclasses.replace(status, message=status_reason(status, gpu_type=instance.gpu_type.code))
    elif instance.kind == InstanceKind.INTERACTIVE and status.exit_code is not None:
        # the user's own command: the training runtime's exit codes (85 "preempted, checkpoint saved", …) and
        # their checkpoint wording do not apply; a stop is a stop, whatever the program returned
        stop_asked = status.state == "stopped" or instance.status == S.STOPPING
        state, message = command_state_for_exit_code(status.exit_code, stop_requested=stop_asked)
        status = dataclasses.replace(status, state=state, message=message)  # type: ignore[arg-type]
    message_code, message_params = reason_fields(status.message)
    with transaction.atomic():
        claimed = (
            JobAttempt.objects.filter(pk=attempt.pk)
            .exclude(state__in=ATTEMPT_TERMINAL)
            .update(
                state=status.state,
                exit_code=status.exit_code,
                message=status.message[:300],
                message_code=message_code,
                message_params=message_params,
                ended_at=status.finished_at or now,
            )
        )
        if not claimed:
            return instance
        instance.refresh_from_db()
        if instance.status not in WATCHED:
            return instance
        job = TrainingJob.objects.select_for_update().filter(instance=instance).first()
        state = status.state
        # no exit code, or a rank lost / checkpoint store unavailable (88, 75): not the job's fault, no crash budget
        lost_node = (
            state == "failed"
            and (status.exit_code is None or (job is not None and status.exit_code in RESUMABLE_EXIT_CODES))
            and instance.status != S.STOPPING
        )
        # the scheduler's preemption notice for this attempt (interruptible tier): its stop is a preemption
        by_scheduler = (  # (Kubernetes: the Job deleted by the preemption task reads as "failed", "deleted")
            (state in ("stopped", "preempted") or (state == "failed" and status.reason == "deleted"))
            and instance.status != S.STOPPING
            and instance.preempt_requested_at is not None
            and instance.preempt_requested_at >= attempt.created_at
        )
        if state == "succeeded":
            _try_transition(instance, S.STOPPED, Reason("finished"), now=now, placement=[])
            _job_finish(instance, JobOutcome.FINISHED)
            webhook_emit(
                organization=instance.organization,
                event_type="job.finished",
                data={"job_id": attempt.job_id, "instance_id": instance.pk, "attempt": attempt.number},
            )
        elif (state == "stopped" and not by_scheduler) or instance.status == S.STOPPING:
            _try_transition(instance, S.STOPPED, status.message or Reason("stopped"), now=now, placement=[])
            if job is not None and job.restart_after_stop:
                TrainingJob.objects.filter(pk=job.pk).update(
                    restart_after_stop=False, stop_requested=False, next_resume_at=now, outcome=JobOutcome.NONE
                )
            else:
                _job_finish(instance, JobOutcome.STOPPED)
        elif state == "preempted" or lost_node or by_scheduler:
            why = status.message if state == "preempted" else Reason("node_lost", {"msg": status.message})
            if status.reason == "deleted":
                why = status.message
            if by_scheduler:  # instances.preemption: the interruptible tier's notice
                why = preempted_reason(instance)
                JobAttempt.objects.filter(pk=attempt.pk).update(state=AttemptState.PREEMPTED)
            _try_transition(
                instance,
                S.PREEMPTED,
                why,
                now=now,
                placement=[],
                preempt_requested_at=None,
                preempt_for=None,
                preempt_started_at=None,
            )
            if lost_node:  # no trace of when it stopped: bill up to when it was last seen running
                attempt_watch.segment_end_at_last_seen(instance=instance, attempt=attempt, closed_at=now)
            webhook_emit(
                organization=instance.organization,
                event_type="job.preempted",
                data={
                    "job_id": attempt.job_id,
                    "instance_id": instance.pk,
                    "attempt": attempt.number,
                    "message": str(why),
                },
            )
            delay = float(_setting("INSTANCES_PREEMPT_RESUME_DELAY_S", 0))
            if by_scheduler and job is None:  # an interactive instance queues again at once, behind on-demand work
                interactive_requeue(instance=instance, now=now)
            if job is not None:
                TrainingJob.objects.filter(pk=job.pk).update(
                    preempt_count=F("preempt_count") + 1,
                    next_resume_at=now + timedelta(seconds=delay),
                    stop_requested=False,
                    checkpoint_requested=False,
                )
        else:  # crashed
            _try_transition(instance, S.FAILED, status.message, now=now, placement=[])
            webhook_emit(
                organization=instance.organization,
                event_type="job.failed",
                data={
                    "job_id": attempt.job_id,
                    "instance_id": instance.pk,
                    "attempt": attempt.number,
                    "exit_code": status.exit_code,
                    "message": status.message[:300],
                },
            )
            if job is None:
                return instance
            no_retry = status.exit_code in (EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED)
            crashes = job.crash_count + 1
            limit = int(_setting("INSTANCES_MAX_CRASH_RESUMES", 3))
            if no_retry or crashes > limit:
                TrainingJob.objects.filter(pk=job.pk).update(
                    crash_count=crashes, outcome=JobOutcome.FAILED, next_resume_at=None
                )
            else:
                backoff = float(_setting("INSTANCES_RESUME_BACKOFF_S", 30)) * 2 ** (crashes - 1)
                TrainingJob.objects.filter(pk=job.pk).update(
                    crash_count=crashes, next_resume_at=now + timedelta(seconds=backoff)
                )
    instance.refresh_from_db()
    return instance


def instances_reconcile(*, now: datetime | None = None, backend: ComputeBackend | None = None) -> dict[str, int]:
    """The periodic reconcile: backend status of every watched attempt → transitions; resume jobs whose
    resume time has come; run a scheduling pass. Safe to run twice or concurrently (every change is a
    compare-and-set). Returns counts ``{"observed", "resumed", "placed"}``."""
    now = now or timezone.now()
    backend = backend or boundary.compute_backend()
    if not Node.objects.exists():  # a fresh install: take the inventory now rather than at the next sync
        nodes_sync(backend=backend, now=now)
    observed = 0
    for attempt in (
        JobAttempt.objects.filter(instance__status__in=WATCHED)
        .exclude(handle="")
        .exclude(state__in=ATTEMPT_TERMINAL)
        .select_related("instance")
    ):
        try:
            st = backend.status(attempt.handle)
        except UnknownHandle as exc:
            st = JobStatus("failed", None, f"backend lost the job: {exc}")
        except BackendError as exc:
            log.warning("reconcile: status of %s failed: %s", attempt.handle, exc)
            continue
        attempt_observe(attempt=attempt, status=st, now=now)
        joblogs.attempt_logs_archive_due(attempt=attempt, status=st, backend=backend, now=now)
        observed += 1
    # instances stopping without a submitted attempt (stopped during provisioning) end now
    for inst in Instance.objects.filter(status=S.STOPPING).exclude(attempts__handle__gt=""):
        _try_transition(inst, S.STOPPED, Reason("stopped_before_start"), now=now, placement=[])
    resumed = 0
    due = TrainingJob.objects.filter(
        instance__status__in=RESTING, next_resume_at__lte=now, outcome=JobOutcome.NONE
    ).select_related("instance")
    for job in due:
        if job_resume(job=job, reason=Reason("automatic_resume"), now=now):
            resumed += 1
    placed = instances_schedule(now=now)
    from instances.interactive.utilization import utilization_sample_due

    utilization_sample_due(now=now)  # CPU, memory, GPU of running local instances, at its own pace
    return {"observed": observed, "resumed": resumed, "placed": len(placed)}


def job_resume(*, job: TrainingJob, reason: str, acting_user: User | None = None, now: datetime | None = None) -> bool:
    """Queue a resting job's instance again (``scheduling``); its next attempt resumes from the newest
    complete checkpoint, or from ``job.resume_step`` after a rollback. Returns False if the instance was
    not resting (someone else resumed or stopped it)."""
    with transaction.atomic():
        instance = job.instance
        instance.refresh_from_db()
        if instance.status not in RESTING:
            return False
        TrainingJob.objects.filter(pk=job.pk).update(next_resume_at=None, outcome=JobOutcome.NONE)
        ok = _try_transition(
            instance, S.SCHEDULING, reason, acting_user=acting_user, now=now, submitted_at=now or timezone.now()
        )
        if ok:
            audit_log(
                action="instances.job.resume",
                actor=acting_user,
                organization=job.organization,
                obj=job,
                extra={"reason": reason, "resume_step": job.resume_step},
            )
            webhook_emit(
                organization=job.organization,
                event_type="job.resumed",
                data={"job_id": job.pk, "instance_id": instance.pk, "reason": reason, "resume_step": job.resume_step},
            )
        return ok


def instance_stop(*, instance: Instance, reason: str, acting_user: User | None = None, staff: bool = False) -> Instance:
    """Stop an instance, final checkpoint first (the interface the budget guard calls).

    Waiting (pending / scheduling) or resting (failed / preempted) instances stop at once (an auto-resume is
    cancelled). A provisioning or running one moves to ``stopping``: the runtime is asked to checkpoint and
    exit (callback ``stop_requested``) and the stop task then stops the backend attempt (SIGTERM, whose
    handler also saves a checkpoint, then SIGKILL after the grace period). Stopping a stopping or stopped
    instance changes nothing. Returns the refreshed instance. Raises ``PermissionRefused`` when
    ``acting_user``'s role may not stop this instance (another member's needs ``instances.manage_any``;
    ``staff=True`` only from the back office).
    """
    authorize_change(
        user=acting_user, organization=instance.organization, created_by_id=instance.created_by_id, staff=staff
    )
    with transaction.atomic():
        instance.refresh_from_db()
        status = instance.status
        if status in (S.PENDING, S.SCHEDULING, S.FAILED, S.PREEMPTED):
            instance_transition(
                instance=instance,
                to=S.STOPPED,
                reason=reason,
                acting_user=acting_user,
                placement=[],
                queue_position=None,
            )
            _job_finish(instance, JobOutcome.STOPPED)
            notices_withdraw(for_pks=[instance.pk], now=timezone.now())  # a waiting request's notices end with it
            transaction.on_commit(lambda: tasks.schedule.delay())
        elif status in (S.PROVISIONING, S.RUNNING):
            instance_transition(instance=instance, to=S.STOPPING, reason=reason, acting_user=acting_user)
            TrainingJob.objects.filter(instance=instance).update(stop_requested=True, next_resume_at=None)
            transaction.on_commit(lambda: tasks.stop_instance.delay(instance.pk))
        else:
            return instance
        audit_log(
            action="instances.instance.stop",
            actor=acting_user,
            organization=instance.organization,
            obj=instance,
            extra={"reason": reason, "from": status},
        )
    instance.refresh_from_db()
    return instance


def instance_stop_backend(*, instance_id: int) -> Instance:
    """The stop task: stop the current attempt on the backend (grace ``INSTANCES_STOP_GRACE_S``), record the
    outcome, then offer the freed capacity to the queue. Idempotent."""
    instance = Instance.objects.get(pk=instance_id)
    if instance.status != S.STOPPING:
        return instance
    attempt = instance.attempts.exclude(handle="").order_by("-number").first()
    if attempt is None:
        _try_transition(instance, S.STOPPED, Reason("stopped_before_start"), placement=[])
    else:
        backend = boundary.compute_backend()
        joblogs.attempt_logs_archive(attempt=attempt, backend=backend)  # stopping deletes the pods
        try:
            st = backend.stop(attempt.handle, float(_setting("INSTANCES_STOP_GRACE_S", 120)))
        except UnknownHandle as exc:
            st = JobStatus("stopped", None, str(exc))
        if not st.terminal:
            return instance  # the reconcile finishes it when the backend does
        attempt_observe(attempt=attempt, status=st)
    instances_reconcile_queue()
    instance.refresh_from_db()
    return instance


def instances_reconcile_queue() -> None:
    """Resume jobs that are due and offer capacity to the queue (after a stop freed some)."""
    now = timezone.now()
    for job in TrainingJob.objects.filter(
        instance__status__in=RESTING, next_resume_at__lte=now, outcome=JobOutcome.NONE
    ).select_related("instance"):
        job_resume(job=job, reason=Reason("restart"), now=now)
    instances_schedule(now=now)


def local_jobs_suspend(*, grace_s: int | None = None, on_start: Callable[[int], None] | None = None) -> list[str]:
    """Stop every attempt still running on the *local* backend (SIGTERM: the runtime saves a checkpoint and
    exits), e.g. when the embedded product (``manage.py runportal``) shuts down, so that no training process
    outlives it, and record each as suspended (:func:`_suspension_record`): nothing is billed while the portal
    is down, and the work comes back on the next start. The attempts are stopped at once, each in its own
    thread (the whole stop takes the longest one's time, at most its grace, not their sum); ``on_start`` is
    called first with how many there are (when any). Returns the handles stopped, in the attempts' order. Does
    nothing for the Kubernetes backend, whose pods outlive workers.
    """
    if _setting("INSTANCES_BACKEND", "local") != "local":
        return []
    backend = boundary.compute_backend()
    attempts = list(JobAttempt.objects.filter(backend="local").exclude(state__in=ATTEMPT_TERMINAL).exclude(handle=""))
    grace = _setting("INSTANCES_STOP_GRACE_S", 120) if grace_s is None else grace_s
    if attempts and on_start is not None:
        on_start(len(attempts))

    def stop_one(handle: str) -> JobStatus | None:
        try:
            return backend.stop(handle, grace)
        except Exception:  # a vanished workspace must not keep the others running
            log.exception("could not stop local attempt %s", handle)
            return None

    with ThreadPoolExecutor(max_workers=max(1, min(len(attempts), 16)), thread_name_prefix="suspend") as pool:
        statuses = list(pool.map(stop_one, [a.handle for a in attempts]))  # no database work in the threads
    stopped = []
    for attempt, status in zip(attempts, statuses, strict=True):
        if status is None:
            continue
        stopped.append(attempt.handle)
        if status.terminal and status.state != "stopped":  # it had already ended by itself: record that
            attempt_observe(attempt=attempt, status=status)
        else:
            _suspension_record(attempt=attempt, now=timezone.now())
    return stopped


def _suspension_record(*, attempt: JobAttempt, now: datetime) -> None:
    """Record a shutdown stop of ``attempt`` as a preemption, not as the user's stop: the attempt and its
    instance become ``preempted`` at ``now`` (the run segment closes: the minutes the portal is down are not
    billed), a training job is due to resume (from the checkpoint its SIGTERM saved) at the next start, and an
    interactive instance queues again. An instance the user was already stopping is simply ``stopped``."""
    kind = Instance.objects.filter(pk=attempt.instance_id).values_list("kind", flat=True).first()
    # a training job saved a checkpoint on SIGTERM; an interactive instance keeps its disk, not its processes
    why = Reason("suspended_at_shutdown_interactive" if kind == InstanceKind.INTERACTIVE else "suspended_at_shutdown")
    with transaction.atomic():
        claimed = (
            JobAttempt.objects.filter(pk=attempt.pk)
            .exclude(state__in=ATTEMPT_TERMINAL)
            .update(state=AttemptState.PREEMPTED, message=why, message_code=why.code, message_params={}, ended_at=now)
        )
        instance = Instance.objects.select_for_update().get(pk=attempt.instance_id)
        if not claimed or instance.status not in WATCHED:
            return
        if instance.status == S.STOPPING:
            _try_transition(instance, S.STOPPED, Reason("stopped"), now=now, placement=[])
            _job_finish(instance, JobOutcome.STOPPED)
            return
        if not _try_transition(instance, S.PREEMPTED, why, now=now, placement=[]):
            return
        if TrainingJob.objects.filter(instance=instance).update(
            next_resume_at=now, stop_requested=False, checkpoint_requested=False
        ):
            return
        interactive_requeue(instance=instance, now=now)
