"""Training-job operations a user asks for: restart, rollback to a checkpoint, checkpoint now, and the
checkpoint-timer backstop."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from instances import checkpoints, tasks
from instances.choices import HOLDS_CAPACITY, RESTING, InstanceStatus
from instances.models import TrainingJob
from instances.reasons import Reason
from instances.services.errors import NotRunning, RollbackError
from instances.services.reconcile import instance_stop, job_resume
from portal.audit import audit_log
from portal.models import User
from portal.permissions import authorize_change

S = InstanceStatus


def job_restart(
    *, job: TrainingJob, acting_user: User | None = None, resume_step: int = -1, reason: str = ""
) -> TrainingJob:
    """Restart a job from its newest complete checkpoint (or ``resume_step``): a resting instance is queued
    at once; a running one is stopped first (with a final checkpoint) and queued when it has stopped.
    A resting job takes its volumes back first (``volumes_hold_again``): raises ``LaunchError``
    ``volume_in_use`` (naming the instance that holds one now) or ``volume_deleted``, nothing written."""
    from instances.interactive.volumes import volumes_hold_again  # the volumes module imports the services

    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    with transaction.atomic():
        job = TrainingJob.objects.select_for_update().get(pk=job.pk)
        instance = job.instance
        if instance.status in RESTING:
            volumes_hold_again(instance=instance)
        if resume_step >= 0:
            job.resume_step = resume_step
            job.save(update_fields=["resume_step"])
        if instance.status in RESTING:
            job_resume(job=job, reason=reason or Reason("restart"), acting_user=acting_user)
            transaction.on_commit(lambda: tasks.schedule.delay())
        elif instance.status in HOLDS_CAPACITY and instance.status != S.STOPPING:
            TrainingJob.objects.filter(pk=job.pk).update(restart_after_stop=True)
            instance_stop(instance=instance, reason=reason or Reason("restart"), acting_user=acting_user)
        elif instance.status == S.STOPPING:
            TrainingJob.objects.filter(pk=job.pk).update(restart_after_stop=True)
        audit_log(
            action="instances.job.restart",
            actor=acting_user,
            organization=job.organization,
            obj=job,
            extra={"resume_step": resume_step},
        )
    job.refresh_from_db()
    return job


def job_rollback(*, job: TrainingJob, checkpoint_id: int, acting_user: User | None = None) -> TrainingJob:
    """Restart ``job`` from one of its complete checkpoints: later checkpoints are set aside (the runtime
    moves their folders away, the portal marks them ``rolled_back`` — those the stop of the running attempt
    writes too), and the next attempt starts with the runtime config's ``resume_step``. Repeatable: each
    rollback starts from the list as it is then, re-read from storage first. Raises :class:`RollbackError`
    (nothing stopped, nothing of the job written; its message names the steps that can be used) for a
    checkpoint that is not a complete, current checkpoint of this job or is no longer on storage,
    ``LaunchError`` as :func:`job_restart` does."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    try:  # one check for rollback and publish (deleted by keep-last-K, set aside, foreign, partial)
        cp = checkpoints.checkpoint_for_action(job=job, checkpoint_id=checkpoint_id)
    except checkpoints.CheckpointUnavailable as exc:
        raise RollbackError(str(exc), available_steps=exc.available_steps) from None
    if job.instance.status in RESTING:  # its volumes first (again under their locks in job_restart)
        from instances.interactive.volumes import volumes_hold_again

        with transaction.atomic():
            volumes_hold_again(instance=job.instance)
    checkpoints.checkpoint_hold_for_rollback(cp)  # the final checkpoint's keep-last-K must not delete it
    with transaction.atomic():
        # two rollbacks at once (a double click, the console and the API): under the job's row lock the
        # target is checked again, so the second one cannot resume from a step the first just set aside
        TrainingJob.objects.select_for_update().filter(pk=job.pk).first()
        if not checkpoints.usable_checkpoints(job).filter(pk=cp.pk).exists():
            try:
                checkpoints.checkpoint_for_action(job=job, checkpoint_id=checkpoint_id)
            except checkpoints.CheckpointUnavailable as exc:
                raise RollbackError(str(exc), available_steps=exc.available_steps) from None
        job.checkpoints.filter(step__gt=cp.step).update(rolled_back=True)
        # the job is at the target's step now (the header, the API's last_step): the stopping attempt's later
        # reports belong to the abandoned timeline and no longer move it (instances.services.callbacks)
        TrainingJob.objects.filter(pk=job.pk).update(last_step=cp.step)
        audit_log(
            action="instances.job.rollback",
            actor=acting_user,
            organization=job.organization,
            obj=job,
            extra={"checkpoint": cp.pk, "step": cp.step},
        )
        return job_restart(
            job=job,
            acting_user=acting_user,
            resume_step=cp.step,
            reason=Reason("rollback", {"step": cp.step}),
        )


def job_checkpoint_now(*, job: TrainingJob, acting_user: User | None = None) -> TrainingJob:
    """Ask the running job for a checkpoint now: answered to the runtime on its next callback (within its
    ``report_interval_s``). Raises :class:`NotRunning` (nothing written) when the job is not running."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    with transaction.atomic():
        if not TrainingJob.objects.filter(pk=job.pk, instance__status=S.RUNNING).update(checkpoint_requested=True):
            raise NotRunning(_("The job is not running: there is nothing to checkpoint now."))
        audit_log(action="instances.job.checkpoint_now", actor=acting_user, organization=job.organization, obj=job)
    job.refresh_from_db()
    return job


def checkpoint_timers(*, now: datetime | None = None) -> int:
    """Backstop for the runtime's own interval: a running job whose newest checkpoint (or start) is older than
    1.5 × its interval is asked for a checkpoint. Returns how many were asked."""
    now = now or timezone.now()
    asked = 0
    for job in TrainingJob.objects.filter(
        instance__status=S.RUNNING, checkpoint_requested=False, checkpoint_every_minutes__gt=0
    ).select_related("instance"):
        newest = job.checkpoints.order_by("-created_at").values_list("created_at", flat=True).first()
        since = (
            newest
            or job.instance.transitions.filter(to_status=S.RUNNING)
            .order_by("-id")
            .values_list("created_at", flat=True)
            .first()
        )
        if since and now - since > timedelta(minutes=1.5 * job.checkpoint_every_minutes):
            asked += TrainingJob.objects.filter(pk=job.pk, checkpoint_requested=False).update(checkpoint_requested=True)
    return asked
