"""Idle autostop: an interactive instance nobody uses is stopped, after a warning, so it stops costing money.

Rule (issue 14, item 5; issue 24: idle means no session and no work): an interactive instance with
``idle_autostop_minutes`` = N > 0 (the organization's ``idle_autostop_minutes`` at launch unless the launch
chose; None or 0 = off) whose newest activity is N minutes old is stopped with a reason. A warning comes
first, by e-mail to its creator (else the organization's managers) and in the console with a "keep it
running" button, L = :func:`warning_lead` before the stop: ``INSTANCES_IDLE_WARNING_MINUTES`` (W, default
10), or half the limit when that is shorter, so the warning always follows at least N/2 minutes of
idleness (an active user is never warned). The stop comes at ``max(last activity + N, warning + L)``, so a
warning is always at least L ahead of the stop, even if a tick was missed. There is one warning per idle
period: a period begins with the newest activity, and only activity after the warning begins a new one.
Training jobs are never autostopped (nor an instance with a training job).

Activity is the newest time any of ``ACTIVITY_SOURCES`` reports, each a callable ``(instance, now) ->
datetime | None`` that answers ``now`` while work or a session is in progress:

* :func:`portal_last_activity`: ``Instance.last_activity_at``, set by :func:`instance_activity_record` (the
  console's "keep it running") and by the utilization sampler when a sample shows the instance's own
  processes at work (``instances.interactive.utilization.sample_busy``: CPU or GPU use at or above
  ``INSTANCES_IDLE_CPU_PERCENT`` / ``INSTANCES_IDLE_GPU_PERCENT`` over the sample's interval) — a training
  command launched through the API or the CLI is work;
* :func:`running_since`: the start of the current run segment (a freshly started instance is not idle);
* :func:`jupyter_activity_at`: a busy kernel (a cell computing, even silently) or an open terminal is
  activity now; else the server's ``last_activity`` (``instances.interactive.jupyter.jupyter_activity``);
* :func:`ssh_activity_at`: an open SSH session is activity now; else the last login or session end
  (``instances.interactive.ssh``).

The tick records activity it sees in progress in ``last_activity_at``, so an idle period begins when the
work or session ends, whatever the source's own clock says.

:func:`idle_autostop_tick` runs from the periodic control-plane tick (``instances.tasks.reconcile``, every
10 s on the control queue, after the utilization samples; the idle pass at most every
``INSTANCES_IDLE_TICK_S`` = 60 s, as it asks every source); it is safe to run twice (the warning and the
stop are compare-and-set).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from instances.choices import InstanceKind, InstanceStatus
from instances.interactive.jupyter import jupyter_activity
from instances.interactive.ssh import ssh_last_activity, ssh_open_sessions
from instances.models import Instance, InstanceRunSegment, TrainingJob
from portal.audit import audit_log
from portal.choices import MANAGER_ROLES
from portal.models import Organization, User
from portal.permissions import Action, authorize

log = logging.getLogger(__name__)
S = InstanceStatus

ActivitySource = Callable[[Instance, datetime], datetime | None]
# The longest idle autostop an instance may ask for (a week, in minutes), as the checkpoint interval's bound.
MAX_IDLE_AUTOSTOP_MINUTES = 10_080


def portal_last_activity(instance: Instance, now: datetime) -> datetime | None:
    """Activity the portal recorded: "keep it running" (:func:`instance_activity_record`) and the instance's
    processes at work (the utilization sampler, ``instances.interactive.utilization.utilization_record``)."""
    return instance.last_activity_at


def running_since(instance: Instance, now: datetime) -> datetime | None:
    """Start of the instance's open run segment: idle time counts from when it (re)started running."""
    return (
        InstanceRunSegment.objects.filter(instance=instance, ended_at__isnull=True)
        .values_list("started_at", flat=True)
        .first()
    )


def jupyter_activity_at(instance: Instance, now: datetime) -> datetime | None:
    """``now`` while a kernel is busy or a terminal is open in the instance's JupyterLab; else the server's
    last activity (None without a server that answers)."""
    activity = jupyter_activity(instance)
    if activity is None:
        return None
    if activity.busy_kernels or activity.terminals:
        return now
    return activity.last_activity


def ssh_activity_at(instance: Instance, now: datetime) -> datetime | None:
    """``now`` while an SSH session is open on the instance; else its last login or session (None if none)."""
    return now if ssh_open_sessions(instance) else ssh_last_activity(instance)


ACTIVITY_SOURCES: list[ActivitySource] = [portal_last_activity, running_since, jupyter_activity_at, ssh_activity_at]


def last_activity(instance: Instance, *, now: datetime | None = None) -> datetime | None:
    """The newest activity any source reports at ``now`` (default: the current time; a failing source is
    logged and skipped), or None."""
    now = now or timezone.now()
    seen = []
    for source in ACTIVITY_SOURCES:
        try:
            at = source(instance, now)
        except Exception:  # one broken source must not stop the others (nor the tick)
            log.exception("idle autostop: activity source %s failed for instance %s", source, instance.pk)
            continue
        if at is not None:
            seen.append(min(at, now))  # a clock ahead of the portal's does not make the future active
    return max(seen, default=None)


def warning_lead(limit: int) -> timedelta:
    """How long before the stop the warning of an N-minute autostop comes: ``min(W, N / 2)`` (W =
    ``INSTANCES_IDLE_WARNING_MINUTES``). So the warning follows at least N/2 minutes of idleness, never an
    active user's last minute, even when N ≤ W."""
    w = timedelta(minutes=int(getattr(settings, "INSTANCES_IDLE_WARNING_MINUTES", 10)))
    return min(w, timedelta(minutes=limit) / 2)


def autostop_enabled(instance: Instance) -> bool:
    """Whether the rule applies: an interactive instance, N > 0, and no training job."""
    return (
        instance.kind == InstanceKind.INTERACTIVE
        and bool(instance.idle_autostop_minutes)
        and not TrainingJob.objects.filter(instance=instance).exists()
    )


def autostop_at(instance: Instance, *, last: datetime | None = None) -> datetime | None:
    """When the instance will be stopped if nothing happens (None when the rule does not apply)."""
    if not autostop_enabled(instance):
        return None
    last = last or last_activity(instance)
    if last is None:
        return None
    limit = int(instance.idle_autostop_minutes or 0)
    at = last + timedelta(minutes=limit)
    if instance.idle_warned_at is not None and instance.idle_warned_at >= last:
        at = max(at, instance.idle_warned_at + warning_lead(limit))
    return at


def instance_activity_record(
    *, instance: Instance, at: datetime | None = None, acting_user: User | None = None
) -> Instance:
    """Record activity on ``instance`` at ``at`` (default now): ``last_activity_at`` only moves forward (a
    compare-and-set). A user's explicit "keep it running" (``acting_user``) writes an audit row. Returns the
    refreshed instance."""
    at = at or timezone.now()
    with transaction.atomic():
        Instance.objects.filter(pk=instance.pk).filter(
            Q(last_activity_at__isnull=True) | Q(last_activity_at__lt=at)
        ).update(last_activity_at=at)
        if acting_user is not None:
            audit_log(
                action="instances.instance.keep_running",
                actor=acting_user,
                organization=instance.organization,
                obj=instance,
                extra={"at": at.isoformat()},
            )
    instance.refresh_from_db()
    return instance


def organization_idle_autostop_set(
    *, organization: Organization, minutes: int | None, acting_user: User | None
) -> Organization:
    """Set the organization's default idle autostop for new interactive instances (``None`` or 0 = off;
    running instances keep theirs). Raises ``PermissionRefused`` unless ``acting_user`` may manage every
    instance (owners, admins) and ``ValueError`` for minutes outside 0…``MAX_IDLE_AUTOSTOP_MINUTES``; nothing
    is written then. Returns the refreshed organization."""
    authorize(user=acting_user, organization=organization, action=Action.INSTANCES_MANAGE_ANY)
    if minutes is not None and (
        not isinstance(minutes, int) or isinstance(minutes, bool) or not 0 <= minutes <= MAX_IDLE_AUTOSTOP_MINUTES
    ):
        raise ValueError(f"Idle autostop is 0 (off) to {MAX_IDLE_AUTOSTOP_MINUTES} minutes, not {minutes!r}.")
    with transaction.atomic():
        before = Organization.objects.select_for_update().get(pk=organization.pk).idle_autostop_minutes
        Organization.objects.filter(pk=organization.pk).update(idle_autostop_minutes=minutes)
        audit_log(
            action="instances.idle_autostop_default_set",
            actor=acting_user,
            organization=organization,
            obj=organization,
            extra={"from": before, "to": minutes},
        )
    organization.refresh_from_db()
    return organization


def idle_autostop_tick(*, now: datetime | None = None) -> dict[str, int]:
    """Warn the instances idle for N − L (:func:`warning_lead`) and not yet warned in this idle period, and
    stop those past their stop time (see the module docstring). Returns ``{"warned", "stopped"}``."""
    now = now or timezone.now()
    warned = stopped = 0
    candidates = (
        Instance.objects.filter(kind=InstanceKind.INTERACTIVE, status=S.RUNNING, idle_autostop_minutes__gt=0)
        .filter(job__isnull=True)
        .select_related("organization", "created_by")
    )
    for instance in candidates:
        last = last_activity(instance, now=now)
        if last is None:
            continue
        if last >= now:  # work or a session in progress: remembered, so the idle period starts when it ends
            instance_activity_record(instance=instance, at=now)
            continue
        limit = int(instance.idle_autostop_minutes or 0)
        # warned in this idle period: the warning is not older than the newest activity
        is_warned = instance.idle_warned_at is not None and instance.idle_warned_at >= last
        if not is_warned:
            if now >= last + timedelta(minutes=limit) - warning_lead(limit):
                warned += _warn(instance, last=last, now=now)
            continue
        deadline = autostop_at(instance, last=last)
        if deadline is not None and now >= deadline:
            stopped += _stop(instance, last=last, now=now)
    return {"warned": warned, "stopped": stopped}


def _warn(instance: Instance, *, last: datetime, now: datetime) -> int:
    limit = int(instance.idle_autostop_minutes or 0)
    with transaction.atomic():
        claimed = (
            Instance.objects.filter(pk=instance.pk, status=S.RUNNING)
            .filter(Q(idle_warned_at__isnull=True) | Q(idle_warned_at__lt=last))
            .update(idle_warned_at=now)
        )
        if not claimed:
            return 0
        instance.idle_warned_at = now
        stop_at = autostop_at(instance, last=last)
        audit_log(
            action="instances.instance.idle_warning",
            organization=instance.organization,
            obj=instance,
            extra={
                "idle_minutes": limit,
                "last_activity": last.isoformat(),
                "stop_at": stop_at.isoformat() if stop_at else None,
            },
        )
        transaction.on_commit(partial(_mail_warning, instance.pk, stop_at))
    return 1


def _recipients(instance: Instance) -> list[str]:
    if instance.created_by is not None and instance.created_by.email:
        return [instance.created_by.email]
    return list(instance.organization.memberships.filter(role__in=MANAGER_ROLES).values_list("user__email", flat=True))


def _mail_warning(instance_id: int, stop_at: datetime | None) -> None:
    instance = Instance.objects.select_related("organization", "created_by").get(pk=instance_id)
    minutes = max(1, math.ceil(warning_lead(int(instance.idle_autostop_minutes or 0)) / timedelta(minutes=1)))
    url = f"{settings.SITE_URL}/o/{instance.organization.slug}/instances/{instance.pk}/"
    send_mail(
        subject=ngettext(
            "gpu-portal: %(name)s will be stopped in %(m)d minute (idle)",
            "gpu-portal: %(name)s will be stopped in %(m)d minutes (idle)",
            minutes,
        )
        % {"name": instance.name, "m": minutes},
        message=_(
            "Your instance %(name)s has been idle for a while: no JupyterLab or SSH use, no busy kernel, open "
            "terminal or SSH session, and its processes are not computing. It will be stopped at %(at)s UTC "
            "(idle autostop after %(n)d minutes) unless it is used; its disk is kept. To keep it running, use it "
            "or press \u201cKeep it running\u201d on %(url)s"
        )
        % {
            "name": instance.name,
            "at": f"{stop_at:%Y-%m-%d %H:%M}" if stop_at else "?",
            "n": instance.idle_autostop_minutes,
            "url": url,
        },
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=_recipients(instance),
        fail_silently=True,
    )


def _stop(instance: Instance, *, last: datetime, now: datetime) -> int:
    from instances.services import instance_stop

    limit = int(instance.idle_autostop_minutes or 0)
    idle = int((now - last).total_seconds() // 60)
    reason = _("idle autostop: no activity for %(idle)d minutes (limit %(n)d)") % {"idle": idle, "n": limit}
    with transaction.atomic():
        stopped = instance_stop(instance=instance, reason=reason, acting_user=None)
        if stopped.status not in (S.STOPPING, S.STOPPED):
            return 0
        Instance.objects.filter(pk=instance.pk).update(autostopped_at=now)
    return 1


def minutes_saved(instance: Instance, *, now: datetime | None = None) -> int:
    """Whole minutes an autostopped instance has not run (and not been charged) since the autostop: until it
    ran again, or until ``now``. 0 for an instance never autostopped."""
    if instance.autostopped_at is None:
        return 0
    now = now or timezone.now()
    again = (
        InstanceRunSegment.objects.filter(instance=instance, started_at__gt=instance.autostopped_at)
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    end = again or now
    return max(0, int((end - instance.autostopped_at).total_seconds() // 60))
