"""Persistent data volumes: create, attach at launch, measure, delete; the reads the console, the API and the
metering use.

A volume belongs to an organization, has a name (unique among its live volumes) and a size in whole GB
(10⁹ bytes); the organization's live volumes together stay within its quota (``VolumeQuota`` row, else
``INSTANCES_VOLUME_QUOTA_GB``). It is attached read-write to an instance (interactive or training job) at
launch and outlives it: stopping, failing or releasing the instance leaves the data where it is, and a later
instance attaches it again.

**Holds** (DESIGN.md §4: "a held resource stays held until its holder has truly ended"). A volume is *held*
by the instance it is attached to from that instance's launch until it has truly ended (:func:`holding`):
while it is active (pending … stopping), preempted (the interruptible tier's notice, a lost node, the
portal's own shutdown: it resumes), or resting with a resume due (a training job in its crash back-off, a
restart asked for while it was stopping). The hold ends when the instance is stopped by a user (or the
budget guard), fails for good (crash budget spent, a config error, a refused launch) or finishes. While
held, the volume is refused to every other launch and to deletion, with a message naming the holder, so
the automatic resume always finds it. One writer at a time, and no holder robbed: attaching
(:func:`volumes_attach`), deleting (:func:`volume_delete`) and a user's restart of an instance whose hold
had ended (:func:`volumes_hold_again`) each take the volume's row lock (``SELECT … FOR UPDATE``, in primary-key
order) before they read the holders, so of two actors at once the second sees what the first committed.
When an attempt is submitted the mounts are checked once more (:func:`volume_mounts_for`: deleted, or
another instance with a live attempt on it), a backstop for rows written before holds existed.

Backends. **Local**: a folder ``<INSTANCES_VOLUMES_ROOT>/vol-<id>`` linked at ``<workspace>/volumes/<name>``
(and listed in ``GPU_PORTAL_VOLUMES``). The size is enforced by measurement: :func:`volumes_measure` (beat,
every minute) sums the folder's allocated blocks, each inode once (:func:`folder_bytes`, as ``du``); a volume
over its size stops the instances writing to it (with the reason in the console) and refuses attachment until
it is under again. Data written between two measurements can overshoot by what a writer manages in a minute.
A real filesystem quota (XFS project quota, ext4 project quota, or a fixed-size loop-mounted image per volume)
refuses the write itself with ENOSPC at the limit, with no overshoot and no stop, but needs root to set up;
the Kubernetes backend gets exactly that from its storage class. **Kubernetes**: the PersistentVolumeClaim
``gpu-portal-vol-<id>`` (ReadWriteOnce, storage request = size), created when an attempt first mounts it and
deleted with the volume (``instances.backends.k8s_volumes``).

Billing: per started GB-hour from creation until deletion (``billing.volume_metering``).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import VolumeUsage
from billing.pricing import PriceBook, volume_hour_charge_micros
from instances.backends.base import BackendError, VolumeMount
from instances.choices import ACTIVE, ATTEMPT_TERMINAL, RESTING, AttemptState, InstanceStatus, JobOutcome
from instances.interactive.access import may_use_volume
from instances.models import Instance, Volume, VolumeAttachment, VolumeQuota
from instances.services.errors import LaunchError
from portal.audit import audit_log
from portal.models import Organization, User
from portal.permissions import Action, authorize, authorize_change

NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")  # used with fullmatch: no trailing newline slips through
GB = 10**9
# The largest volume one may ask for, in GB: far above any quota, small enough that every price of it is
# exact (the charging rule's decimals overflow, ``decimal.InvalidOperation``, near 10^28 GB).
MAX_SIZE_GB = 1_000_000
LIVE_ATTEMPT = frozenset(AttemptState) - ATTEMPT_TERMINAL


class VolumeError(ValueError):
    """A volume operation was refused; nothing was written. ``code`` is machine-readable (``invalid_name``,
    ``invalid_size``, ``name_taken``, ``exceeds_quota``, ``in_use``), ``field`` names the input, ``holder_id``
    the instance holding the volume (``in_use``)."""

    def __init__(self, code: str, message: str, field_name: str = "", *, holder_id: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field_name
        self.holder_id = holder_id  # ``in_use``: the instance holding the volume


# --- reads -----------------------------------------------------------------------------------------------
def volume_quota_gb(organization: Organization) -> int:
    """GB the organization's live volumes may hold together: its ``VolumeQuota`` row, else the setting."""
    row = VolumeQuota.objects.filter(organization=organization).first()
    return row.gb if row is not None else int(settings.INSTANCES_VOLUME_QUOTA_GB)


# Statuses in which an instance holds its volumes whatever its job says: active ones, and ``preempted``
# (every preemption resumes: the interruptible tier's notice, a lost node, the portal's shutdown).
HOLDS_ALWAYS = ACTIVE | {InstanceStatus.PREEMPTED}


def holding(prefix: str = "instance__") -> Q:
    """The instances that hold their volumes (module docstring, "Holds"), as a filter on a queryset whose
    path to the instance is ``prefix`` (``"instance__"`` on ``VolumeAttachment``, ``""`` on ``Instance``):
    status in :data:`HOLDS_ALWAYS`, or resting (``stopped`` / ``failed``) with a training job that has no
    outcome and a resume due (``next_resume_at`` set: the crash back-off, a restart after a stop). A job that
    failed for good or was stopped has an outcome (``_job_finish``) and no resume due: its hold has ended."""
    return Q(**{f"{prefix}status__in": HOLDS_ALWAYS}) | Q(
        **{
            f"{prefix}status__in": RESTING,
            f"{prefix}job__outcome": JobOutcome.NONE,
            f"{prefix}job__next_resume_at__isnull": False,
        }
    )


def volume_holder(volume: Volume, *, other_than: Instance | None = None) -> Instance | None:
    """The instance holding ``volume`` (see :func:`holding`), other than ``other_than``; None when free."""
    rows = VolumeAttachment.objects.filter(holding(), volume=volume)
    if other_than is not None:
        rows = rows.exclude(instance=other_than)
    found = rows.select_related("instance").order_by("id").first()
    return found.instance if found is not None else None


def _held_why(holder: Instance) -> str:
    """Why a resting holder keeps its volume, in words (``""`` for an active one)."""
    if holder.status in ACTIVE:
        return ""
    if holder.status == InstanceStatus.PREEMPTED:
        return _("was preempted and resumes on it")
    if holder.status == InstanceStatus.FAILED:
        return _("crashed and restarts on it after its back-off")
    return _("restarts on it")


def _in_use() -> Exists:
    return Exists(VolumeAttachment.objects.filter(holding(), volume=OuterRef("pk")))


def volumes_for_org(organization: Organization) -> QuerySet[Volume]:
    """The organization's live volumes, newest first, annotated ``in_use`` (held, see :func:`holding`)."""
    return Volume.objects.filter(organization=organization, deleted_at__isnull=True).annotate(in_use=_in_use())


def volume_rows(organization: Organization) -> list[dict[str, Any]]:
    """Console and API rows: each live volume with ``attached_to`` (the instance holding it — active, or
    waiting to resume on it — or None) and ``cost_micros`` (its storage charged so far, micro-CNY). Three
    queries whatever the number."""
    volumes = list(volumes_for_org(organization))
    ids = [v.pk for v in volumes]
    holders = {
        a.volume_id: a.instance
        for a in VolumeAttachment.objects.filter(holding(), volume_id__in=ids).select_related("instance").order_by("id")
    }
    cost = dict(
        VolumeUsage.objects.filter(volume_id__in=ids)
        .values("volume_id")
        .annotate(s=Sum("amount_micros"))
        .values_list("volume_id", "s")
    )
    return [
        {
            "volume": v,
            "attached_to": holders.get(v.pk),
            "cost_micros": cost.get(v.pk, 0),
            "used_gb": f"{v.used_bytes / GB:.2f}",  # display only
        }
        for v in volumes
    ]


def volume_size_check(size_gb: object) -> int:
    """``size_gb`` if it is a whole number (an ``int``, not a bool) from 1 to :data:`MAX_SIZE_GB`, else raises
    ``VolumeError`` ``invalid_size`` (field ``size_gb``). Forms and serializers parse text into an ``int``
    with the same bounds first; this is the rule every path ends in."""
    if isinstance(size_gb, bool) or not isinstance(size_gb, int) or not 1 <= size_gb <= MAX_SIZE_GB:
        raise VolumeError(
            "invalid_size",
            _("The size is a whole number of GB from 1 to %(max)d.") % {"max": MAX_SIZE_GB},
            "size_gb",
        )
    return size_gb


def volume_price_per_hour_micros(*, size_gb: int, at: datetime | None = None) -> int:
    """What one hour of a ``size_gb`` GB volume costs now (micro-CNY), by the price book's storage rate.
    Raises ``VolumeError`` ``invalid_size`` for a size :func:`volume_size_check` refuses."""
    volume_size_check(size_gb)
    price = PriceBook(set()).storage_at(at or timezone.now())
    return volume_hour_charge_micros(price_per_gb_hour_micros=price, size_gb=size_gb, hour_index=1)


def volumes_to_meter(*, now: datetime) -> QuerySet[Volume, Any]:
    """The metering interface: volumes created before ``now``, live or deleted, as dicts with ``id``,
    ``organization_id``, ``name``, ``size_gb``, ``created_at``, ``deleted_at`` (None while live)."""
    return (
        Volume.objects.filter(created_at__lte=now)
        .order_by("id")
        .values("id", "organization_id", "name", "size_gb", "created_at", "deleted_at")
    )


def volume_folder(volume: Volume) -> Path:
    """The local backend's folder of a volume: ``<INSTANCES_VOLUMES_ROOT>/vol-<id>``."""
    return Path(settings.INSTANCES_VOLUMES_ROOT) / f"vol-{volume.pk}"


def _kubernetes() -> bool:
    return settings.INSTANCES_BACKEND == "kubernetes"


def volume_mounts_for(instance: Instance) -> tuple[VolumeMount, ...]:
    """The ``JobSpec.volume_mounts`` of an instance's attempt: its attached volumes, read-write, at
    ``/volumes/<name>`` (local: linked at ``<workspace>/volumes/<name>``). Raises ``BackendError`` when one
    was deleted or another active instance already has a live attempt on it (a restart after the volume
    was taken): the first attempt submitted keeps the volume, the other fails with that message."""
    from instances.backends.k8s_volumes import claim_name

    mounts = []
    for a in instance.volume_attachments.select_related("volume").order_by("id"):
        volume = a.volume
        if volume.deleted_at is not None:
            raise BackendError(_("Volume %(name)s was deleted.") % {"name": volume.name})
        other = VolumeAttachment.objects.filter(  # another active instance with a live, submitted attempt
            volume=volume,
            instance__status__in=ACTIVE,
            instance__attempts__handle__gt="",
            instance__attempts__state__in=LIVE_ATTEMPT,
        ).exclude(instance=instance)
        if other.exists():
            raise BackendError(_("Volume %(name)s is in use by another instance.") % {"name": volume.name})
        if _kubernetes():
            source = claim_name(volume.pk)
        else:
            folder = volume_folder(volume)
            folder.mkdir(parents=True, exist_ok=True)
            source = str(folder)
        mounts.append(VolumeMount(volume.name, source, f"/volumes/{volume.name}", volume.size_gb))
    return tuple(mounts)


# --- operations -------------------------------------------------------------------------------------------
def volume_create(*, organization: Organization, user: User | None, name: str, size_gb: int) -> Volume:
    """Create a volume of ``size_gb`` GB named ``name`` (lowercase letters, digits, hyphens; ≤ 40). Billing
    starts now. Raises ``VolumeError`` (nothing written): a bad name or size (1 to :data:`MAX_SIZE_GB`, see
    :func:`volume_size_check`), a name in use, or a size that
    would take the organization's live volumes over its quota; ``PermissionRefused`` for a role that may
    not launch instances. Local backend: the folder is made after commit."""
    authorize(user=user, organization=organization, action=Action.INSTANCES_LAUNCH)
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise VolumeError(
            "invalid_name",
            _("A volume name has 1 to 40 lowercase letters, digits or hyphens, and starts with a letter or digit."),
            "name",
        )
    volume_size_check(size_gb)
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()  # serializes quota checks
        quota = volume_quota_gb(organization)
        used = volumes_for_org(organization).aggregate(s=Sum("size_gb"))["s"] or 0
        if used + size_gb > quota:
            raise VolumeError(
                "exceeds_quota",
                _(
                    "A %(size)d GB volume exceeds your organization's volume quota: %(used)d of %(quota)d GB "
                    "are in use, %(left)d GB left. Delete a volume or ask for a larger quota."
                )
                % {"size": size_gb, "used": used, "quota": quota, "left": max(0, quota - used)},
                "size_gb",
            )
        if volumes_for_org(organization).filter(name=name).exists():
            raise VolumeError("name_taken", _("A volume named %(name)s exists.") % {"name": name}, "name")
        volume = Volume.objects.create(organization=organization, created_by=user, name=name, size_gb=size_gb)
        audit_log(
            action="instances.volume.create",
            actor=user,
            organization=organization,
            obj=volume,
            extra={"name": name, "size_gb": size_gb},
        )
        if not _kubernetes():
            transaction.on_commit(lambda: volume_folder(volume).mkdir(parents=True, exist_ok=True))
    return volume


def volume_delete(*, volume: Volume, user: User | None) -> Volume:
    """Delete a volume and its data; billing stops at this moment (the hour already begun stays charged).
    Raises ``VolumeError`` ``in_use`` (nothing written, ``holder_id`` set) while an instance holds it — active,
    or waiting to resume on it (:func:`holding`); ``PermissionRefused`` unless the user may change what its
    creator made. Deleting a deleted volume changes nothing. The folder (local) or claim (Kubernetes) is
    removed after commit."""
    authorize_change(user=user, organization=volume.organization, created_by_id=volume.created_by_id)
    with transaction.atomic():
        volume = Volume.objects.select_for_update().get(pk=volume.pk)  # serializes with attach and restart
        if volume.deleted_at is not None:
            return volume
        holder = volume_holder(volume)
        if holder is not None:
            why = _held_why(holder)
            if not why:
                message = _("Volume %(name)s is attached to instance #%(id)d, which is active: stop it first.")
            else:
                message = _("Volume %(name)s is held by instance #%(id)d (%(holder)s), which %(why)s: stop it first.")
            raise VolumeError(
                "in_use",
                message % {"name": volume.name, "id": holder.pk, "holder": holder.name, "why": why},
                holder_id=holder.pk,
            )
        volume.deleted_at = timezone.now()
        volume.save(update_fields=["deleted_at"])
        audit_log(
            action="instances.volume.delete",
            actor=user,
            organization=volume.organization,
            obj=volume,
            extra={"name": volume.name, "size_gb": volume.size_gb, "used_bytes": volume.used_bytes},
        )
        transaction.on_commit(lambda: _data_remove(volume))
    return volume


def _data_remove(volume: Volume) -> None:
    if _kubernetes():
        from instances.backends.k8s_volumes import claim_delete, claim_name
        from instances.services.backend import compute_backend

        backend: Any = compute_backend()
        claim_delete(backend._core(), backend.namespace, claim_name(volume.pk))
    else:
        shutil.rmtree(volume_folder(volume), ignore_errors=True)


def _in_use_message(volume: Volume, holder: Instance) -> str:
    """The refusal of a second writer, naming the holder and why it keeps the volume."""
    why = _held_why(holder)
    if not why:
        message = _(
            "Volume %(name)s is attached to instance #%(id)d, which is active: one instance writes to a volume at "
            "a time. Stop that instance first."
        )
    else:
        message = _(
            "Volume %(name)s is held by instance #%(id)d (%(holder)s), which %(why)s: one instance writes to a "
            "volume at a time. Stop that instance first."
        )
    return message % {"name": volume.name, "id": holder.pk, "holder": holder.name, "why": why}


def volumes_hold_again(*, instance: Instance) -> list[Volume]:
    """Take the volumes of ``instance`` back before a user's restart queues it again (inside the restart's
    transaction): each attached volume is locked (primary-key order) and must be live and held by no other
    instance. An instance that kept its hold (it never truly ended) always passes. Raises ``LaunchError``
    (the caller's transaction rolls back: nothing written): ``volume_deleted``, or ``volume_in_use`` naming
    the holder. Returns the volumes."""
    ids = list(instance.volume_attachments.values_list("volume_id", flat=True))
    volumes = list(Volume.objects.select_for_update().filter(pk__in=ids).order_by("pk"))
    for volume in volumes:
        if volume.deleted_at is not None:
            raise LaunchError("volume_deleted", _("Volume %(name)s was deleted.") % {"name": volume.name}, "volumes")
        holder = volume_holder(volume, other_than=instance)
        if holder is not None:
            raise LaunchError("volume_in_use", _in_use_message(volume, holder), "volumes")
    return volumes


def volumes_attach(*, instance: Instance, names: list[str], user: User | None) -> list[VolumeAttachment]:
    """Attach the organization's volumes ``names`` to a new ``instance``, read-write: called inside the launch
    transaction, so a refusal rolls the whole launch back. Raises ``LaunchError``: ``volume_not_found`` (no
    live volume of that name in the instance's organization; another organization's volume is not found
    either), ``volume_not_allowed`` (``user`` may not use another member's volume:
    :func:`instances.interactive.access.may_use_volume`), ``volume_in_use`` (held by another instance: active, or
    waiting to resume on it, see :func:`holding`), ``volume_full`` (its last measurement is at or over its size)."""
    attachments = []
    wanted = list(dict.fromkeys(names))
    locked = {  # the row locks in primary-key order (as every locker of volumes takes them): no deadlock
        v.name: v
        for v in Volume.objects.select_for_update()
        .filter(organization_id=instance.organization_id, name__in=wanted, deleted_at__isnull=True)
        .order_by("pk")
    }
    for name in wanted:
        volume = locked.get(name)
        if volume is None:
            raise LaunchError("volume_not_found", _("No volume named %(name)s.") % {"name": name}, "volumes")
        if user is not None and not may_use_volume(user=user, volume=volume):  # instances.interactive.access
            raise LaunchError(
                "volume_not_allowed",
                _(
                    "Volume %(name)s was created by another member: only they, owners, admins and the members "
                    "they share it with attach it, unless your organization lets members use each other's."
                )
                % {"name": name},
                "volumes",
            )
        holder = volume_holder(volume, other_than=instance)
        if holder is not None:
            raise LaunchError("volume_in_use", _in_use_message(volume, holder), "volumes")
        if volume.used_bytes >= volume.size_gb * GB:
            raise LaunchError(
                "volume_full",
                _("Volume %(name)s is full (%(size)d GB): delete files or use another volume.")
                % {"name": name, "size": volume.size_gb},
                "volumes",
            )
        attachments.append(VolumeAttachment.objects.create(volume=volume, instance=instance))
        audit_log(
            action="instances.volume.attach",
            actor=user,
            organization=instance.organization,
            obj=volume,
            extra={"instance_id": instance.pk, "name": name},
        )
    return attachments


def folder_bytes(folder: Path) -> int:
    """Bytes allocated to what lies under ``folder`` (``st_blocks`` × 512 of each file, directory and symlink,
    symlinks not followed; ``folder``'s own directory not counted), each inode once: a file with several
    names (hard links) counts once, as ``du`` counts it. Allocated blocks, not the apparent size, because
    the size is a quota on the disk a volume takes: a sparse file counts for what it occupies, and the
    Kubernetes backend's storage-class volumes (a real filesystem quota) count blocks the same way. The
    result equals ``du -s -B1 folder`` less ``folder``'s own blocks (a test compares them)."""
    total = 0
    seen: set[tuple[int, int]] = set()  # (st_dev, st_ino) of inodes with more than one name
    for root, dirs, files in os.walk(folder):
        for entry in (*dirs, *files):
            try:
                st = os.lstat(os.path.join(root, entry))
            except FileNotFoundError:  # removed while we walk
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):  # a directory's links are its subfolders
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    continue
                seen.add(key)
            total += st.st_blocks * 512
    return total


def volumes_measure(*, now: datetime | None = None) -> dict[int, list[int]]:
    """Measure every live local volume's folder; stop the active instances writing to one that is over its
    size (reason in the console, audited). Returns {volume id: [stopped instance ids]} for the volumes over.
    Nothing to measure on Kubernetes (the claim's filesystem enforces the size)."""
    from instances.services import instance_stop

    if _kubernetes():
        return {}
    now = now or timezone.now()
    over: dict[int, list[int]] = {}
    for volume in Volume.objects.filter(deleted_at__isnull=True).select_related("organization"):
        folder = volume_folder(volume)
        used = folder_bytes(folder) if folder.is_dir() else 0
        Volume.objects.filter(pk=volume.pk).update(used_bytes=used, measured_at=now)
        if used <= volume.size_gb * GB:
            continue
        stopped = []
        for a in VolumeAttachment.objects.filter(volume=volume, instance__status__in=ACTIVE).select_related(
            "instance", "instance__organization"
        ):
            reason = _("volume %(name)s is over its size of %(size)d GB") % {
                "name": volume.name,
                "size": volume.size_gb,
            }
            instance_stop(instance=a.instance, reason=reason)
            stopped.append(a.instance_id)
        if stopped:
            audit_log(
                action="instances.volume.over_size",
                organization=volume.organization,
                obj=volume,
                extra={"used_bytes": used, "size_gb": volume.size_gb, "stopped": stopped},
            )
        over[volume.pk] = stopped
    return over
