"""Scheduling and submit: a gang-scheduler pass over the queue, the attempt it creates, and the launch
task that submits an attempt to the backend."""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from instances import scheduler, tasks
from instances.backends.base import BackendError
from instances.choices import AttemptState, InstanceStatus, JobOutcome
from instances.models import Instance, JobAttempt, Node, TrainingJob
from instances.runtime.config import ConfigError
from instances.selectors import gpu_quota_of, gpus_in_use, node_views
from instances.services import backend as boundary
from instances.services.backend import _setting
from instances.services.runtime_config import attempt_token, job_spec_for
from instances.services.transitions import _job_finish, _try_transition
from portal.webhooks.services import webhook_emit

S = InstanceStatus


def instances_schedule(*, now: datetime | None = None) -> list[Instance]:
    """One pass of the gang scheduler over the queue (instances in ``scheduling``), FIFO with restricted
    backfill (``instances.scheduler.schedule_queue``). Placed instances move to ``provisioning`` with a new
    attempt, and their launch task is enqueued after commit; waiting ones get their queue position and
    reason; permanently unplaceable ones fail. Node rows are locked (pk order) so passes serialize.
    Returns the instances placed."""
    now = now or timezone.now()
    placed: list[Instance] = []
    with transaction.atomic():
        list(Node.objects.select_for_update().order_by("pk").values_list("pk", flat=True))  # serialize passes
        queue = list(Instance.objects.filter(status=S.SCHEDULING).select_related("gpu_type", "organization"))
        if not queue:
            return []
        orgs = {i.organization_id: i.organization for i in queue}
        quotas = {str(oid): gpu_quota_of(org) for oid, org in orgs.items()}
        usage = {str(oid): gpus_in_use(org) for oid, org in orgs.items()}
        requests = [
            scheduler.PlacementRequest(str(i.pk), str(i.organization_id), i.gpu_type.code, i.gpu_count,
                                       i.mode, i.submitted_at)  # type: ignore[arg-type]
            for i in queue
        ]
        result = scheduler.schedule_queue(requests, node_views(), quotas, usage)
        by_id = {str(i.pk): i for i in queue}
        for placement in result.placements:
            inst = by_id[placement.request_id]
            assignments = [[n, g] for n, g in placement.assignments]
            if not _try_transition(inst, S.PROVISIONING, _("placed on %(nodes)s") % {
                    "nodes": ", ".join(placement.node_names)}, now=now, placement=assignments,
                    queue_position=None):
                continue
            attempt = _attempt_create(inst, assignments)
            _launch_after_commit(attempt.pk)
            placed.append(inst)
        for waiting in result.waiting:
            inst = by_id[waiting.request.request_id]
            if waiting.position is None:  # permanent: the request itself must change
                _try_transition(inst, S.FAILED, waiting.reason, now=now)
                continue
            Instance.objects.filter(pk=inst.pk, status=S.SCHEDULING).update(
                queue_position=waiting.position, status_reason=waiting.reason[:300])
    return placed


def _launch_after_commit(attempt_id: int) -> None:
    """Enqueue the launch task of an attempt once the scheduling pass commits (a function, so that each
    placement of the loop enqueues its own attempt)."""
    transaction.on_commit(lambda: tasks.launch_attempt.delay(attempt_id))


def _attempt_create(instance: Instance, placement: list[list[Any]]) -> JobAttempt:
    job = getattr(instance, "job", None)
    last = instance.attempts.order_by("-number").values_list("number", flat=True).first() or 0
    attempt = JobAttempt.objects.create(
        instance=instance, job=job, number=last + 1, backend=_setting("INSTANCES_BACKEND", "local"),
        token_sha256="", resume_from_step=job.resume_step if job else -1, placement=placement,
    )
    attempt.token_sha256 = hashlib.sha256(attempt_token(attempt).encode()).hexdigest()
    attempt.save(update_fields=["token_sha256"])
    if job is not None and job.resume_step >= 0:
        TrainingJob.objects.filter(pk=job.pk).update(resume_step=-1)
    return attempt


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
    try:
        spec = job_spec_for(attempt)
        handle = boundary.compute_backend().submit(spec)
    except (BackendError, ConfigError) as exc:
        with transaction.atomic():
            JobAttempt.objects.filter(pk=attempt.pk).update(state=AttemptState.FAILED, message=str(exc)[:300],
                                                            ended_at=timezone.now())
            _try_transition(instance, S.FAILED, _("launch failed: %(err)s") % {"err": exc})
            _job_finish(instance, JobOutcome.FAILED)
            webhook_emit(organization=instance.organization, event_type="job.failed", data={"job_id": attempt.job_id,
                         "instance_id": instance.pk, "attempt": attempt.number, "exit_code": None,
                         "message": str(exc)[:300]})
        return attempt
    JobAttempt.objects.filter(pk=attempt.pk, handle="").update(handle=handle, submitted_at=timezone.now())
    attempt.refresh_from_db()
    instance.refresh_from_db()
    if instance.status == S.STOPPING:  # stopped while we were submitting
        transaction.on_commit(lambda: tasks.stop_instance.delay(instance.pk))
    return attempt
