"""A job's logs per node rank: live from the backend, archived by the portal once the attempt ends.

On Kubernetes each node rank is one pod (its completion index) and its log is read with
``read_namespaced_pod_log`` (``KubernetesBackend.logs``) while the pod exists — including earlier attempts'
pods until their Job is deleted. The last ``INSTANCES_LOG_ARCHIVE_LINES`` lines of every rank are copied into
:class:`JobLogArchive` before the portal deletes a Job (stop), when the reconcile sees an attempt end or start
stopping, and every ``INSTANCES_LOG_ARCHIVE_EVERY_S`` seconds while it runs (a preempted gang's pods are
deleted by the cluster before the portal can look), so a failed job's log can be read the next day. The
local backend writes one log file per attempt (rank 0).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from instances.backends.base import BackendError, ComputeBackend, JobStatus
from instances.models import JobAttempt, JobLogArchive, TrainingJob

log = logging.getLogger(__name__)


class UnknownRank(LookupError):
    """The rank (or attempt) asked for does not exist for this job; the message says which ones do."""


@dataclass(frozen=True)
class JobLog:
    """What a log view shows: ``lines`` of ``rank`` of attempt ``attempt`` (``None`` before any submit),
    ``ranks`` (node ranks of that attempt), ``source``: ``live`` | ``archive`` | ``none``."""

    attempt: int | None
    rank: int
    ranks: int
    lines: list[str]
    source: str


def _ranks(attempt: JobAttempt) -> int:
    return max(1, len(attempt.placement or []))


def attempt_logs_archive(*, attempt: JobAttempt, backend: ComputeBackend, now: datetime | None = None) -> int:
    """Copy the tail of every rank's log of ``attempt`` from the backend into :class:`JobLogArchive`
    (replacing an older copy). Returns the number of ranks copied; backend errors are logged, never raised
    (archiving must not stop a stop or a reconcile)."""
    if not attempt.handle or attempt.backend == "local":  # the local log file outlives the process
        return 0
    lines = int(getattr(settings, "INSTANCES_LOG_ARCHIVE_LINES", 2000))
    copied = 0
    for rank in range(_ranks(attempt)):
        try:
            text = backend.logs(attempt.handle, rank=rank, lines=lines)
        except BackendError as exc:
            log.warning("archiving the log of %s rank %d failed: %s", attempt.handle, rank, exc)
            continue
        if text is None:
            continue
        JobLogArchive.objects.update_or_create(
            attempt=attempt, rank=rank, defaults={"text": "\n".join(text), "archived_at": now or timezone.now()}
        )
        copied += 1
    return copied


def attempt_logs_archive_due(*, attempt: JobAttempt, status: JobStatus, backend: ComputeBackend, now: datetime) -> int:
    """Archive the attempt's logs when the reconcile's ``status`` says so: it ended, it is stopping, or it
    runs and the newest copy is older than ``INSTANCES_LOG_ARCHIVE_EVERY_S`` (default 300). Returns ranks
    copied."""
    if not attempt.handle or attempt.backend == "local" or status.state == "pending":
        return 0
    if not status.terminal and not status.message.startswith("stopping"):
        every = timedelta(seconds=float(getattr(settings, "INSTANCES_LOG_ARCHIVE_EVERY_S", 300)))
        newest = JobLogArchive.objects.filter(attempt=attempt).aggregate(t=Max("archived_at"))["t"]
        if newest is not None and now - newest < every:
            return 0
    return attempt_logs_archive(attempt=attempt, backend=backend, now=now)


def job_log(
    *,
    job: TrainingJob,
    rank: int = 0,
    attempt_number: int | None = None,
    lines: int = 200,
    backend: ComputeBackend | None = None,
) -> JobLog:
    """The last ``lines`` lines of node rank ``rank`` of the job's newest submitted attempt (or attempt
    ``attempt_number``): live from the backend while its pod exists, else the archived copy, else none.
    Raises :class:`UnknownRank` for a rank outside ``0 … ranks-1`` or an attempt the job does not have."""
    from instances.selectors import job_logs_tail
    from instances.services import backend as boundary

    attempts = job.attempts.exclude(handle="").order_by("-number")
    attempt = attempts.filter(number=attempt_number).first() if attempt_number is not None else attempts.first()
    if attempt is None:
        if attempt_number is not None:
            raise UnknownRank(_("This job has no attempt %(n)d.") % {"n": attempt_number})
        if rank != 0:
            raise UnknownRank(_("Rank %(rank)d does not exist: this job has not started.") % {"rank": rank})
        return JobLog(None, 0, 1, [], "none")
    ranks = _ranks(attempt)
    if not 0 <= rank < ranks:
        raise UnknownRank(
            _("Rank %(rank)d does not exist: attempt %(n)d has ranks 0 to %(last)d.")
            % {"rank": rank, "n": attempt.number, "last": ranks - 1}
        )
    if attempt.backend == "local" or attempt.handle.startswith("local:"):
        newest = attempts.first()
        text = job_logs_tail(job, lines=lines) if newest is not None and newest.pk == attempt.pk else []
        return JobLog(attempt.number, rank, ranks, text, "live" if text else "none")
    try:
        live = (backend or boundary.compute_backend()).logs(attempt.handle, rank=rank, lines=lines)
    except BackendError as exc:
        log.warning("reading the log of %s rank %d failed: %s", attempt.handle, rank, exc)
        live = None
    if live is not None:
        return JobLog(attempt.number, rank, ranks, live, "live")
    kept = JobLogArchive.objects.filter(attempt=attempt, rank=rank).values_list("text", flat=True).first()
    if kept is not None:
        return JobLog(attempt.number, rank, ranks, kept.splitlines()[-lines:], "archive")
    return JobLog(attempt.number, rank, ranks, [], "none")
