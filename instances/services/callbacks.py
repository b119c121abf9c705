"""Runtime callbacks: the training program's progress, checkpoints and exit, authenticated by the attempt's
token."""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Min
from django.utils import timezone

from instances import checkpoints
from instances.choices import AttemptState, InstanceStatus
from instances.models import Checkpoint, Instance, JobAttempt, JobEvent, JobMetric, TrainingJob
from instances.reasons import Reason, runtime_exit_reason
from instances.services.errors import CallbackRefused
from instances.services.transitions import _try_transition
from portal.webhooks.services import webhook_emit

S = InstanceStatus


def job_events_receive(*, job_id: int, token: str, body: Any, now: datetime | None = None) -> dict[str, bool]:
    """Handle one runtime POST (contract in ``instances/runtime/reporting.py``): authenticate by the
    attempt's token, store each event once per ``(job, attempt, seq)`` and apply the new ones (metrics,
    checkpoints, attempt state); answer ``{"checkpoint_requested", "stop_requested"}`` (a checkpoint request
    is answered once; an attempt that is no longer the newest is told to stop and moves no state).
    Raises :class:`CallbackRefused` (401 bad token, 400 bad body)."""
    now = now or timezone.now()
    digest = hashlib.sha256(token.encode()).hexdigest() if token else ""
    attempt = (
        JobAttempt.objects.select_related("instance", "job").filter(job_id=job_id, token_sha256=digest).first()
        if digest
        else None
    )
    if attempt is None or attempt.job is None or not hmac.compare_digest(digest, attempt.token_sha256):
        raise CallbackRefused("invalid job token", 401)
    if not isinstance(body, dict) or body.get("attempt") != attempt.number or not isinstance(body.get("events"), list):
        raise CallbackRefused("body must be {attempt: <this token's attempt>, events: [...]}", 400)
    job = attempt.job
    with transaction.atomic():
        TrainingJob.objects.select_for_update().filter(pk=job.pk).first()
        # An older attempt still reporting (a partitioned node that kept training) is recorded but moves no
        # state, and is told to stop.
        current = (
            attempt.number
            == JobAttempt.objects.filter(instance_id=attempt.instance_id)
            .order_by("-number")
            .values_list("number", flat=True)
            .first()
        )
        kept_to = _kept_timeline_end(job, attempt)  # once per POST: the job's row is locked, it cannot move
        for ev in body["events"]:
            if not isinstance(ev, dict) or not isinstance(ev.get("seq"), int) or not isinstance(ev.get("type"), str):
                raise CallbackRefused("each event needs an integer seq and a type", 400)
            try:
                with transaction.atomic():
                    JobEvent.objects.create(
                        job=job,
                        attempt=attempt.number,
                        seq=ev["seq"],
                        type=ev["type"][:20],
                        payload=ev,
                        received_at=now,
                    )
            except IntegrityError:
                continue  # already received: resending is safe
            _apply_event(job, attempt, ev, now, current=current, kept_to=kept_to)
        job.refresh_from_db()
        checkpoint = (
            TrainingJob.objects.filter(pk=job.pk, checkpoint_requested=True).update(checkpoint_requested=False) == 1
        )
        stop = job.stop_requested or attempt.instance.status == S.STOPPING or not current
    return {"checkpoint_requested": checkpoint, "stop_requested": stop}


def _apply_event(
    job: TrainingJob, attempt: JobAttempt, ev: dict[str, Any], now: datetime, *, current: bool, kept_to: int | None
) -> None:
    kind = ev["type"]
    step = ev.get("step")
    if kind in ("started", "progress") and not current:
        if kind == "progress" and isinstance(step, int):
            JobMetric.objects.bulk_create(
                [
                    JobMetric(
                        job=job,
                        attempt=attempt,
                        step=step,
                        loss=float(ev.get("loss", 0.0)),
                        lr=float(ev.get("lr", 0.0)),
                        tokens_per_s=float(ev.get("tokens_per_s", 0.0)),
                        tokens_seen=int(ev.get("tokens_seen", 0)),
                        reported_at=now,
                    )
                ],
                ignore_conflicts=True,
            )
        return
    if kind == "started":
        JobAttempt.objects.filter(pk=attempt.pk).update(started_step=int(step or 0))
        if not _abandoned(kept_to, int(step or 0)):  # resumed here: the job is at this step now
            TrainingJob.objects.filter(pk=job.pk).update(last_step=int(step or 0))
        JobAttempt.objects.filter(pk=attempt.pk, state=AttemptState.PENDING).update(state=AttemptState.RUNNING)
        instance = Instance.objects.get(pk=attempt.instance_id)
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, Reason("training_started"), now=now)
    elif kind == "progress" and isinstance(step, int):
        JobMetric.objects.bulk_create(
            [
                JobMetric(
                    job=job,
                    attempt=attempt,
                    step=step,
                    loss=float(ev.get("loss", 0.0)),
                    lr=float(ev.get("lr", 0.0)),
                    tokens_per_s=float(ev.get("tokens_per_s", 0.0)),
                    tokens_seen=int(ev.get("tokens_seen", 0)),
                    reported_at=now,
                )
            ],
            ignore_conflicts=True,
        )
        if not _abandoned(kept_to, step):  # the header follows the timeline a rollback keeps
            TrainingJob.objects.filter(pk=job.pk).update(last_step=step, tokens_seen=int(ev.get("tokens_seen", 0)))
        JobAttempt.objects.filter(pk=attempt.pk, first_step_at__isnull=True).update(first_step_at=now)
        instance = Instance.objects.get(pk=attempt.instance_id)
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, Reason("training"), now=now)
    elif kind == "checkpoint" and isinstance(step, int):
        abandoned = _abandoned(kept_to, step)
        if abandoned and Checkpoint.objects.filter(job=job, step=step, attempt__number__gt=attempt.number).exists():
            return  # a late report of an abandoned attempt: the newer timeline's checkpoint at this step stays
        Checkpoint.objects.update_or_create(
            job=job,
            step=step,
            defaults={
                "attempt": attempt,
                "location": str(ev.get("path", ""))[:500],
                "size_bytes": int(ev.get("bytes", 0)),
                "loss": ev.get("loss"),
                "complete": True,
                "rolled_back": abandoned,  # a rollback's own stop: set aside, as its folder will be on disk
                "created_at": now,
                "deleted_at": None,
            },
        )  # a step saved again after a prune exists again
        webhook_emit(
            organization=job.organization,
            event_type="job.checkpoint_committed",
            data={
                "job_id": job.pk,
                "instance_id": attempt.instance_id,
                "attempt": attempt.number,
                "step": step,
                "size_bytes": int(ev.get("bytes", 0)),
                "loss": ev.get("loss"),
            },
        )
    elif kind == "checkpoint_pruned":  # the runtime deleted it (keep-last-K)
        checkpoints.checkpoint_pruned_apply(job=job, step=step, path=ev.get("path"), now=now)
    elif kind == "exit":  # what the runtime said, as a code (its own message stays in the event and the log)
        code = ev.get("exit_code")
        said = runtime_exit_reason(code if isinstance(code, int) else None, step if isinstance(step, int) else None)
        JobAttempt.objects.filter(pk=attempt.pk).update(
            message=said, message_code=said.code, message_params=said.params
        )


def _kept_timeline_end(job: TrainingJob, attempt: JobAttempt) -> int | None:
    """The last step of ``attempt``'s reports that belongs to the timeline a rollback keeps, or None when all
    do: the target of a pending rollback (``job.resume_step``: the stop it asked for writes a final checkpoint,
    and interval saves may land before the stop) or the earliest step a newer attempt of the job resumed from (a
    late report of the attempt it replaced), whichever is lower. Checkpoints past it are recorded set aside, as
    the next attempt's runtime moves their folders aside on disk (``CheckpointStore.roll_back``). One query
    each (read under the job's row lock, once per callback)."""
    job.refresh_from_db(fields=["resume_step"])
    newer = JobAttempt.objects.filter(job=job, number__gt=attempt.number, resume_from_step__gte=0).aggregate(
        m=Min("resume_from_step")
    )["m"]
    ends = [s for s in (job.resume_step if job.resume_step >= 0 else None, newer) if s is not None]
    return min(ends) if ends else None


def _abandoned(kept_to: int | None, step: int) -> bool:
    """Whether ``step`` lies past :func:`_kept_timeline_end` (on a timeline a rollback abandons)."""
    return kept_to is not None and step > kept_to
