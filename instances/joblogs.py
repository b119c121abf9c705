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
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext as _

from instances.backends.base import BackendError, ComputeBackend, JobStatus, UnknownHandle, split_log_lines
from instances.choices import ATTEMPT_TERMINAL
from instances.models import JobAttempt, JobLogArchive, TrainingJob

log = logging.getLogger(__name__)
CHUNK = 1 << 20  # bytes read at a time from a local log file


class UnknownRank(LookupError):
    """The rank (or attempt) asked for does not exist for this job; the message says which ones do."""


@dataclass(frozen=True)
class JobLog:
    """What a log view shows: ``lines`` of ``rank`` of attempt ``attempt`` (``None`` before any submit),
    ``ranks`` (node ranks of that attempt), ``source``: ``live`` | ``archive`` | ``none``.

    Offsets are 0-based line numbers in that rank's log of that attempt (lines split at ``\\n``): ``first``
    is the offset of ``lines[0]``, ``cursor`` the offset after the last line returned (ask with
    ``after=cursor`` for what follows), ``dropped`` the lines between the ``after`` asked for and ``first``
    that the portal no longer has (0 when none; ``None`` when their number is unknown: the log the cluster
    serves is shorter than ``after``, it was rotated or its container restarted), ``more`` whether lines
    after ``cursor`` are already there, ``next_attempt`` the job's next submitted attempt after this one
    (``None`` while this is the newest: a follower moves on to it once ``more`` is false). ``first`` and
    ``cursor`` are ``None`` where offsets were not asked for (``positions=False``) and the backend serves only
    a tail.
    """

    attempt: int | None
    rank: int
    ranks: int
    lines: list[str]
    source: str
    first: int | None = 0
    cursor: int | None = 0
    dropped: int | None = 0
    more: bool = False
    next_attempt: int | None = None


def _ranks(attempt: JobAttempt) -> int:
    return max(1, len(attempt.placement or []))


def _window(
    kept: list[str], base: int, *, after: int | None, lines: int, restarts: bool = False
) -> tuple[int, list[str], int | None, bool]:
    """The lines to answer from ``kept`` (the log's lines from offset ``base`` on): ``(first, lines, dropped,
    more)``. Without ``after``: the last ``lines``. With it: up to ``lines`` from offset ``after`` on, oldest
    first; those before ``base`` are gone (``dropped`` counts them). An ``after`` past the end: nothing new
    (the reader saw more than an older copy holds), or, where the log can start again (``restarts``: the
    cluster rotated it or restarted its container), the new log from ``base`` with ``dropped`` unknown."""
    end = base + len(kept)
    dropped: int | None = 0
    if after is None:
        first = max(base, end - lines)
    elif after < base:
        first, dropped = base, base - after
    elif after > end:
        first, dropped = (base, None) if restarts else (after, 0)
    else:
        first = after
    out = kept[first - base : first - base + lines]
    return first, out, dropped, first + len(out) < end


def _seek_line(fh: BinaryIO, n: int) -> int:
    """Move ``fh`` (at its start) to the start of line ``n`` (0-based, lines end at ``\\n``); returns how many
    complete lines were passed (``n``, or fewer at the end of the file)."""
    passed, offset = 0, 0
    while passed < n:
        chunk = fh.read(CHUNK)
        if not chunk:
            break
        count = chunk.count(b"\n")
        if passed + count < n:
            passed += count
            offset += len(chunk)
            continue
        at = -1
        for _line in range(n - passed):
            at = chunk.index(b"\n", at + 1)
        passed, offset = n, offset + at + 1
    fh.seek(offset)
    return passed


def _file_log(path: Path, *, after: int | None, lines: int, ended: bool) -> tuple[int, list[str], int, bool] | None:
    """:func:`_window` over a log file read in chunks (never whole, twice: count, then read from ``first``):
    its complete lines, and its last line without ``\\n`` too once the attempt has ended (while it runs that
    line may still grow). ``None`` when the file cannot be read."""
    try:
        with open(path, "rb") as fh:
            complete, last = 0, b""
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                complete += chunk.count(b"\n")
                last = chunk[-1:]
            total = complete + (1 if ended and last not in (b"", b"\n") else 0)
            # one attempt's file only grows: a cursor past its end has nothing new yet
            first = max(0, total - lines) if after is None else min(after, total)
            fh.seek(0)
            _seek_line(fh, first)
            out: list[str] = []
            while len(out) < lines and first + len(out) < total:
                raw = fh.readline()
                if not raw:
                    break
                out.extend(split_log_lines(raw.decode("utf-8", errors="replace")) or [""])
    except OSError:
        return None
    return first, out, 0, first + len(out) < total


def attempt_logs_archive(*, attempt: JobAttempt, backend: ComputeBackend, now: datetime | None = None) -> int:
    """Copy the tail of every rank's log of ``attempt`` from the backend into :class:`JobLogArchive`
    (replacing an older copy), with the offset of its first line (the whole log is read to count them).
    Returns the number of ranks copied; backend errors are logged, never raised (archiving must not stop a
    stop or a reconcile)."""
    if not attempt.handle or attempt.backend == "local":  # the local log file outlives the process
        return 0
    lines = int(getattr(settings, "INSTANCES_LOG_ARCHIVE_LINES", 2000))
    copied = 0
    for rank in range(_ranks(attempt)):
        try:
            whole = backend.logs(attempt.handle, rank=rank, lines=None)
        except BackendError as exc:
            log.warning("archiving the log of %s rank %d failed: %s", attempt.handle, rank, exc)
            continue
        if whole is None:
            continue
        kept = whole[-lines:]
        JobLogArchive.objects.update_or_create(
            attempt=attempt,
            rank=rank,
            defaults={
                "text": "".join(f"{line}\n" for line in kept),
                "first_line": len(whole) - len(kept),
                "archived_at": now or timezone.now(),
            },
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
    after: int | None = None,
    positions: bool = False,
    backend: ComputeBackend | None = None,
) -> JobLog:
    """Node rank ``rank``'s log of the job's newest submitted attempt (or attempt ``attempt_number``): live
    from the backend while its pod (local: its workspace's log file) exists, else the archived copy, else
    none. Without ``after``: the last ``lines`` lines; with it: up to ``lines`` lines from offset ``after``
    on, oldest first (see :class:`JobLog` for the offsets, ``dropped`` and ``more``). ``positions``: offsets
    are wanted without ``after`` too (the API: a Kubernetes log is then read whole, as with ``after``; the
    console's tails skip that). Raises :class:`UnknownRank` for a rank outside ``0 … ranks-1`` or an attempt
    the job does not have."""
    from instances.backends.local import LOG_FILE, LocalBackend
    from instances.services import backend as boundary

    attempts = job.attempts.exclude(handle="").order_by("-number")
    attempt = attempts.filter(number=attempt_number).first() if attempt_number is not None else attempts.first()
    at = after or 0
    if attempt is None:
        if attempt_number is not None:
            raise UnknownRank(_("This job has no attempt %(n)d.") % {"n": attempt_number})
        if rank != 0:
            raise UnknownRank(_("Rank %(rank)d does not exist: this job has not started.") % {"rank": rank})
        return JobLog(None, 0, 1, [], "none", at, at)
    ranks = _ranks(attempt)
    if not 0 <= rank < ranks:
        raise UnknownRank(
            _("Rank %(rank)d does not exist: attempt %(n)d has ranks 0 to %(last)d.")
            % {"rank": rank, "n": attempt.number, "last": ranks - 1}
        )
    head = (attempt.number, rank, ranks)
    following = (  # the next submitted attempt: a follower goes on with it
        attempts.filter(number__gt=attempt.number).order_by("number").values_list("number", flat=True).first()
    )
    if attempt.backend == "local" or attempt.handle.startswith("local:"):
        try:
            _pgid, ws = LocalBackend.parse_handle(attempt.handle)
        except UnknownHandle:  # not a local process's handle (a stand-in's): no file, perhaps an archived copy
            return _archived(attempt, rank, head, following, after=after, lines=lines)
        read = _file_log(ws / LOG_FILE, after=after, lines=lines, ended=attempt.state in ATTEMPT_TERMINAL)
        if read is None:  # the workspace is gone: the archived copy, if any
            return _archived(attempt, rank, head, following, after=after, lines=lines)
        first, out, _none_gone, more = read  # one attempt's file keeps every line
        source = "live" if out or first else "none"
        return JobLog(*head, out, source, first, first + len(out), 0, more, following)
    whole = positions or after is not None
    try:
        live = (backend or boundary.compute_backend()).logs(attempt.handle, rank=rank, lines=None if whole else lines)
    except BackendError as exc:
        log.warning("reading the log of %s rank %d failed: %s", attempt.handle, rank, exc)
        live = None
    if live is not None:
        if not whole:
            return JobLog(*head, live, "live", None, None, 0, False, following)
        first, out, dropped, more = _window(live, 0, after=after, lines=lines, restarts=True)
        return JobLog(*head, out, "live", first, first + len(out), dropped, more, following)
    return _archived(attempt, rank, head, following, after=after, lines=lines)


def _archived(
    attempt: JobAttempt,
    rank: int,
    head: tuple[int, int, int],
    following: int | None,
    *,
    after: int | None,
    lines: int,
) -> JobLog:
    """The archived copy of ``rank``'s log of ``attempt`` (``JobLogArchive``), or an empty ``none`` log."""
    kept = JobLogArchive.objects.filter(attempt=attempt, rank=rank).values_list("text", "first_line").first()
    if kept is not None:
        first, out, dropped, more = _window(split_log_lines(kept[0]), kept[1], after=after, lines=lines)
        return JobLog(*head, out, "archive", first, first + len(out), dropped, more, following)
    at = after or 0
    return JobLog(*head, [], "none", at, at, 0, False, following)
