"""The checkpoint list as the truth: pruned checkpoints, pins, and which checkpoints an action may use.

* The runtime reports each checkpoint folder it deletes under keep-last-K as an event
  ``{"type": "checkpoint_pruned", "step": int, "path": str}``; :func:`checkpoint_pruned_apply` marks the row
  ``deleted_at`` (kept as history; the console offers no action on it).
* A user pins a checkpoint (:func:`checkpoint_pin`): the portal writes the ``PINNED`` marker into the step
  folder (``instances.runtime.checkpoint.PIN_MARKER``; the runtime's keep-last-K never deletes a pinned
  folder and does not count it) and records ``pinned``. Unpinning removes the marker.
* :func:`checkpoint_for_action` is the one check before a rollback or a publish: the job's list is first
  re-read from storage (:func:`checkpoints_reconcile`: a listed checkpoint whose folder is gone or moved aside
  is marked so), then the checkpoint must be this job's, complete, not set aside by a rollback and not
  deleted — else a clear refusal naming the steps that can be used, nothing else changed, and no running
  attempt is touched.
* A rollback's own stop writes a final checkpoint from the timeline being abandoned; the callback records
  it already set aside (``instances.services.callbacks``), as the next attempt's runtime moves its folder
  aside on disk (``CheckpointStore.roll_back``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from instances.models import Checkpoint, TrainingJob
from instances.runtime.checkpoint import PIN_MARKER, STEP_RE, CheckpointStore
from portal.audit import audit_log
from portal.models import User
from portal.permissions import authorize_change

log = logging.getLogger(__name__)


class CheckpointUnavailable(ValueError):
    """The checkpoint cannot be used for the action asked (missing, foreign, deleted, set aside, partial).
    ``not_found``: True when it is not a checkpoint of this job at all (a 404 for views)."""

    def __init__(self, message: str, *, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found
        self.available_steps: list[int] = []  # the steps that can be used instead (checkpoint_for_action)


def _checkpoint_of(job: TrainingJob, checkpoint_id: Any) -> Checkpoint:
    try:
        cp_id = int(checkpoint_id)
    except (TypeError, ValueError):
        raise CheckpointUnavailable(_("Unknown checkpoint."), not_found=True) from None
    cp = job.checkpoints.filter(pk=cp_id).first()
    if cp is None:
        raise CheckpointUnavailable(_("Unknown checkpoint."), not_found=True)
    return cp


def usable_checkpoints(job: TrainingJob) -> Any:
    """The checkpoints of ``job`` a rollback or a publish may use (complete, not set aside, not deleted),
    newest step first, as the database has them (:func:`checkpoints_reconcile` first to re-read storage)."""
    return job.checkpoints.filter(complete=True, rolled_back=False, deleted_at__isnull=True).order_by("-step")


def _available_sentence(job: TrainingJob) -> str:
    steps = list(usable_checkpoints(job).values_list("step", flat=True))
    if not steps:
        return _("This job has no checkpoint that can be used now.")
    return _("Checkpoints you can use: steps %(steps)s.") % {"steps": ", ".join(str(s) for s in sorted(steps))}


def checkpoints_reconcile(*, job: TrainingJob, now: datetime | None = None) -> dict[int, str]:
    """Re-read the job's usable checkpoints from storage and mark those that are not really there: a folder
    moved into a ``rolled-back-*`` folder (a rollback's runtime set it aside) → ``rolled_back``; a folder gone
    → ``deleted_at``; a folder there without its commit marker → ``complete=False``. Returns ``{checkpoint id:
    "rolled_back" | "deleted" | "incomplete"}`` for the rows it marked. Only locations named like the
    runtime's folders (``step-N``) are judged.

    Storage the portal cannot see is left alone (the database stays the truth there): a checkpoint root that
    does not exist from here (a cluster volume not mounted in the portal) or that cannot be read (an fsspec
    error, a missing filesystem driver) — logged, nothing marked. One listing of the root plus one per
    step folder (``CheckpointStore.list``)."""
    now = now or timezone.now()
    rows = list(usable_checkpoints(job).values_list("pk", "location"))
    by_root: dict[str, list[tuple[int, str]]] = {}
    for pk, location in rows:
        root, _sep, name = location.rstrip("/").rpartition("/")
        if root and STEP_RE.match(name):  # only the runtime's own step-N folders can be judged
            by_root.setdefault(root, []).append((pk, name))
    marked: dict[int, str] = {}
    for root, entries in by_root.items():
        try:
            store = CheckpointStore(root)
            if not store.fs.isdir(store.root):
                continue  # not visible from the portal: keep what the runtime reported
            present = {f.path.rstrip("/").rsplit("/", 1)[-1]: f.complete for f in store.list()}
            for pk, name in entries:
                if present.get(name):
                    continue
                if name in present:  # there, but without its commit marker
                    marked[pk] = "incomplete"
                    continue
                aside = store.fs.glob(f"{store.root.rstrip('/')}/rolled-back-*/{name}")
                marked[pk] = "rolled_back" if aside else "deleted"
        except Exception as exc:  # any storage driver's error (fsspec, botocore, gcsfs): not re-read
            log.warning("checkpoints of job %s at %s not re-read: %s", job.pk, root, exc)
    if marked:
        aside_ids = [pk for pk, how in marked.items() if how == "rolled_back"]
        gone_ids = [pk for pk, how in marked.items() if how == "deleted"]
        partial_ids = [pk for pk, how in marked.items() if how == "incomplete"]
        Checkpoint.objects.filter(pk__in=aside_ids).update(rolled_back=True)
        Checkpoint.objects.filter(pk__in=gone_ids).update(deleted_at=now)
        Checkpoint.objects.filter(pk__in=partial_ids).update(complete=False)
        log.info("job %s: checkpoints no longer on storage: %s", job.pk, marked)
    return marked


def checkpoint_for_action(*, job: TrainingJob, checkpoint_id: Any) -> Checkpoint:
    """The checkpoint ``checkpoint_id`` of ``job`` if a rollback or publish may use it, after the job's list
    was re-read from storage (:func:`checkpoints_reconcile`). Raises :class:`CheckpointUnavailable` with the
    reason — not this job's (``not_found``), no longer on storage, deleted by keep-last-K, set aside by an
    earlier rollback, or never completed — followed by the steps that can be used (``available_steps`` on
    the exception, ascending). Nothing but the checkpoint list's marks is written."""
    cp = _checkpoint_of(job, checkpoint_id)
    marked = checkpoints_reconcile(job=job)
    cp.refresh_from_db()
    reason = ""
    if marked.get(cp.pk) == "incomplete":
        reason = _("The checkpoint at step %(step)d is not complete.") % {"step": cp.step}
    elif cp.pk in marked:
        reason = (
            _("The checkpoint at step %(step)d is no longer in the job's checkpoint storage: a rollback set it aside.")
            if marked[cp.pk] == "rolled_back"
            else _("The checkpoint at step %(step)d is no longer in the job's checkpoint storage.")
        ) % {"step": cp.step}
    elif cp.deleted_at is not None:
        reason = _(
            "The checkpoint at step %(step)d no longer exists: the job deleted it to keep only its newest "
            "checkpoints. Choose a checkpoint that is still listed, or pin checkpoints you want to keep."
        ) % {"step": cp.step}
    elif cp.rolled_back:
        reason = _("The checkpoint at step %(step)d was set aside by a rollback.") % {"step": cp.step}
    elif not cp.complete:
        reason = _("The checkpoint at step %(step)d is not complete.") % {"step": cp.step}
    if reason:
        exc = CheckpointUnavailable(f"{reason} {_available_sentence(job)}")
        exc.available_steps = sorted(usable_checkpoints(job).values_list("step", flat=True))
        raise exc
    return cp


def checkpoint_pruned_apply(*, job: TrainingJob, step: Any, path: Any, now: datetime) -> int:
    """Mark the job's checkpoint at ``step`` deleted (the runtime's ``checkpoint_pruned`` event). A path
    that names another folder than the recorded one (a rolled-back copy) changes nothing. Returns rows
    changed (0 or 1); idempotent."""
    if not isinstance(step, int) or isinstance(step, bool):
        return 0
    rows = Checkpoint.objects.filter(job=job, step=step, deleted_at__isnull=True)
    if isinstance(path, str) and path:
        rows = rows.filter(location=path[:500])
    return rows.update(deleted_at=now)


def _marker_url(cp: Checkpoint) -> str:
    return f"{cp.location.rstrip('/')}/{PIN_MARKER}"


def checkpoint_pin(
    *, job: TrainingJob, checkpoint_id: Any, pinned: bool = True, acting_user: User | None = None
) -> Checkpoint:
    """Pin (or unpin) a checkpoint of ``job``: write (remove) the ``PINNED`` marker in its folder through
    fsspec, then record it. Raises :class:`CheckpointUnavailable` (nothing written) for a checkpoint that
    is not this job's (``not_found``), deleted or incomplete, or whose folder the portal cannot reach;
    ``PermissionRefused`` when ``acting_user`` may not change this job (``portal.permissions``)."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    cp = _checkpoint_of(job, checkpoint_id)
    if cp.deleted_at is not None:
        raise CheckpointUnavailable(
            _("The checkpoint at step %(step)d was already deleted; it cannot be pinned.") % {"step": cp.step}
        )
    if not cp.complete or cp.rolled_back:
        raise CheckpointUnavailable(_("Only a complete checkpoint that was not set aside can be pinned."))
    if cp.pinned != pinned:
        _write_marker(cp, pinned)
    with transaction.atomic():
        Checkpoint.objects.filter(pk=cp.pk).update(pinned=pinned)
        audit_log(
            action="instances.checkpoint.pin" if pinned else "instances.checkpoint.unpin",
            actor=acting_user,
            organization=job.organization,
            obj=job,
            extra={"checkpoint": cp.pk, "step": cp.step},
        )
    cp.refresh_from_db()
    return cp


def _write_marker(cp: Checkpoint, pinned: bool) -> None:
    from fsspec.core import url_to_fs

    try:
        fs, folder = url_to_fs(cp.location)
        if not fs.isdir(folder):
            raise CheckpointUnavailable(_("The folder of the checkpoint at step %(step)d is gone.") % {"step": cp.step})
        marker = f"{folder.rstrip('/')}/{PIN_MARKER}"
        if pinned:
            fs.pipe_file(marker, f"pinned at {timezone.now().isoformat()}\n".encode())
        elif fs.exists(marker):
            fs.rm_file(marker)
    except (OSError, ValueError, ImportError) as exc:
        if isinstance(exc, CheckpointUnavailable):
            raise
        raise CheckpointUnavailable(
            _("The checkpoint storage cannot be reached to pin step %(step)d: %(err)s") % {"step": cp.step, "err": exc}
        ) from exc


def checkpoint_hold_for_rollback(cp: Checkpoint) -> bool:
    """Best effort before a rollback stops the running attempt: pin the target's folder so the final
    checkpoint's keep-last-K cannot delete it before the next attempt resumes from it. Returns whether
    the marker was written (False when the storage is not reachable from the portal)."""
    if cp.pinned:
        return True
    try:
        _write_marker(cp, True)
    except CheckpointUnavailable as exc:
        log.warning("rollback target %s not pinned: %s", cp.location, exc)
        return False
    Checkpoint.objects.filter(pk=cp.pk).update(pinned=True)
    return True
