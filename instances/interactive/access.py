"""Who may enter which instance, and the one place that reacts when that answer may have changed.

**The rule** (DESIGN.md §4 "Access ends with membership, on every door"). A user may *enter* an instance —
open its JupyterLab, log in to it with SSH — when

1. the user is active and a member of the instance's organization whose role may launch
   (``instances.launch``: owner, admin, member; never a billing viewer), and
2. the user launched it (``Instance.created_by``), or the role holds ``instances.enter_any`` (owners, admins),
   or the organization lets members enter each other's instances (``Organization.members_enter_any_instance``,
   off by default), or the launcher, an owner or an admin shared this instance with the user
   (:class:`~instances.interactive.access_models.AccessShare`).

A volume is *used* (attached read-write at launch) by the same rule, with the volume's creator in the
launcher's place and the shares of that volume. Least privilege is the default: on a new organization a
member enters only what they launched, as they may only stop what they launched (``portal.permissions``).

**The doors**, each asking :func:`may_enter` / :func:`entrant_ids` / :func:`may_use_volume` and nothing else:
the console's JupyterLab door (``jupyter_views.jupyter_open``: 403, an outsider 404), the JupyterLab server's
own re-check of every session (``jupyter.jupyter_access_answer``, see :mod:`instances.interactive.jupyter_auth`),
the instance's ``authorized_keys`` (``ssh.authorized_keys_text``: one file per instance), volume attach
(``volumes.volumes_attach``: ``LaunchError`` ``volume_not_allowed``).

**The one reaction** — :func:`access_changed` — runs whatever path changed a user, a membership, a role, an
SSH key, a share or the organization's setting: the portal's services (``user_deactivate`` sends
``portal.hooks.access_changed``; ``membership_add`` / ``membership_remove`` save and delete the row), the back
office (the model's ``post_save`` / ``post_delete``, the "active" checkbox), a shell's ``save()`` or
queryset ``delete()``. After the commit, the task ``instances.tasks.access_enforce`` (control queue) runs
:func:`access_enforce`, which rewrites the ``authorized_keys`` of the
organizations' live interactive instances (the local SSH server closes, within a second, the open sessions of
keys no longer in it; on Kubernetes the Secret is patched and the pod's reaper does the same) and tells their
JupyterLab servers to forget what they knew (the next request of a removed user is refused, their open
kernel and terminal websockets are closed); a task, so that a request removing a member never waits on
unreachable pods. A queryset ``update()`` sends no signal: the periodic
:func:`access_sweep` (beat ``instances-access-sweep``, every 60 s) rewrites any ``authorized_keys``
that differs from the rule, and JupyterLab servers re-check every session at least every
``INSTANCES_JUPYTER_RECHECK_S`` seconds by themselves; so every path ends access within a minute at most,
and the paths above end it at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils.translation import gettext as _

from instances.choices import InstanceKind, InstanceStatus
from instances.interactive.access_models import AccessShare
from instances.models import Instance, Volume
from portal.audit import audit_log
from portal.models import Membership, Organization, User
from portal.permissions import (
    ROLE_ACTIONS,
    Action,
    PermissionRefused,
    authorize,
    authorize_change,
    refusal_message,
    role_of,
)

log = logging.getLogger(__name__)

LIVE = (InstanceStatus.PROVISIONING, InstanceStatus.RUNNING)
LAUNCH_ROLES = tuple(role for role, actions in ROLE_ACTIONS.items() if Action.INSTANCES_LAUNCH in actions)
ENTER_ANY_ROLES = tuple(role for role, actions in ROLE_ACTIONS.items() if Action.INSTANCES_ENTER_ANY in actions)


class ShareError(ValueError):
    """A share that cannot be made; nothing was written. ``code``: ``not_a_member`` (no member of the
    organization who may launch has that address), ``own`` (the launcher / creator needs no share)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


# --- the rule ----------------------------------------------------------------------------------------------
def _allowed(*, user: User | None, organization: Organization, creator_id: int | None, shared: Q) -> bool:
    role = role_of(user=user, organization=organization)  # None: inactive, or not a member
    if user is None or role not in LAUNCH_ROLES:
        return False
    if user.pk == creator_id or role in ENTER_ANY_ROLES:
        return True
    if Organization.objects.filter(pk=organization.pk, members_enter_any_instance=True).exists():
        return True
    return AccessShare.objects.filter(shared, user=user).exists()


def may_enter(*, user: User | None, instance: Instance) -> bool:
    """True when ``user`` may enter ``instance`` (JupyterLab, SSH) by the rule of the module docstring. Read
    from the database on every call (at most four small queries), so a change counts at once."""
    return _allowed(
        user=user, organization=instance.organization, creator_id=instance.created_by_id, shared=Q(instance=instance)
    )


def may_use_volume(*, user: User | None, volume: Volume) -> bool:
    """True when ``user`` may attach ``volume`` read-write (its creator's place in the rule)."""
    return _allowed(
        user=user, organization=volume.organization, creator_id=volume.created_by_id, shared=Q(volume=volume)
    )


def enter_authorize(*, user: User | None, instance: Instance) -> None:
    """Raise ``PermissionRefused`` unless ``user`` may enter ``instance``: the ``instances.launch`` refusal
    for a role that may not launch (a billing viewer), the ``instances.enter_any`` one otherwise."""
    authorize(user=user, organization=instance.organization, action=Action.INSTANCES_LAUNCH)
    if not may_enter(user=user, instance=instance):
        raise PermissionRefused(_refusal(), action=Action.INSTANCES_ENTER_ANY)


def _refusal() -> str:
    return refusal_message(Action.INSTANCES_ENTER_ANY)


def entrant_ids(instance: Instance) -> list[int]:
    """Ids of the users who may enter ``instance`` now, ascending: the rule as one query (the SSH keys of
    exactly these users are in its ``authorized_keys``)."""
    members = Membership.objects.filter(
        organization_id=instance.organization_id, role__in=LAUNCH_ROLES, user__is_active=True
    )
    if not Organization.objects.filter(pk=instance.organization_id, members_enter_any_instance=True).exists():
        shared = AccessShare.objects.filter(instance=instance).values("user_id")
        grants = Q(role__in=ENTER_ANY_ROLES) | Q(user_id__in=shared)
        if instance.created_by_id is not None:
            grants |= Q(user_id=instance.created_by_id)
        members = members.filter(grants)
    return sorted(members.values_list("user_id", flat=True))


def shares_of(target: Instance | Volume) -> QuerySet[AccessShare]:
    """The shares of an instance or a volume, oldest first, with their users."""
    field = "instance" if isinstance(target, Instance) else "volume"
    return AccessShare.objects.filter(**{field: target}).select_related("user").order_by("id")


def share_candidates(target: Instance | Volume) -> QuerySet[Membership]:
    """Members the target could be shared with: roles that may launch but do not enter others' instances
    anyway, not its launcher / creator, not already shared with."""
    field = "instance" if isinstance(target, Instance) else "volume"
    shared = AccessShare.objects.filter(**{field: target}).values("user_id")
    members = (
        Membership.objects.filter(organization_id=target.organization_id, role__in=LAUNCH_ROLES, user__is_active=True)
        .exclude(role__in=ENTER_ANY_ROLES)
        .exclude(user_id__in=shared)
    )
    if target.created_by_id is not None:
        members = members.exclude(user_id=target.created_by_id)
    return members.select_related("user").order_by("user__email")


# --- operations --------------------------------------------------------------------------------------------
def organization_instance_access_set(
    *, organization: Organization, members_enter_any: bool, acting_user: User | None
) -> Organization:
    """Set whether members enter each other's instances and attach each other's volumes (owners and admins:
    ``members.manage``). Audited ``instances.instance_access_set`` with the old and new value; access is
    enforced after commit (:func:`access_changed`). Raises ``PermissionRefused``."""
    authorize(user=acting_user, organization=organization, action=Action.MEMBERS_MANAGE)
    with transaction.atomic():
        before = Organization.objects.select_for_update().get(pk=organization.pk).members_enter_any_instance
        Organization.objects.filter(pk=organization.pk).update(members_enter_any_instance=bool(members_enter_any))
        audit_log(
            action="instances.instance_access_set",
            actor=acting_user,
            organization=organization,
            obj=organization,
            extra={"members_enter_any_instance": [before, bool(members_enter_any)]},
        )
        access_changed(organization_ids=[organization.pk])
    organization.refresh_from_db(fields=["members_enter_any_instance"])
    return organization


def _target_kind(target: Instance | Volume) -> str:
    return "instance" if isinstance(target, Instance) else "volume"


def access_share_add(*, target: Instance | Volume, email: str, acting_user: User | None) -> AccessShare:
    """Share an instance (enter it) or a volume (attach it) with the member whose address is ``email``.

    Who may: the launcher / creator (``instances.launch``) and owners and admins (``instances.manage_any``),
    as for stopping it. Raises ``PermissionRefused``; :class:`ShareError` ``not_a_member`` (no active
    member of the target's organization whose role may launch uses that address: an outsider and a billing
    viewer alike) or ``own`` (the launcher needs no share); nothing is written then. Sharing twice returns
    the first share. Audited ``instances.share_add``; enforced after commit."""
    organization = target.organization
    authorize_change(user=acting_user, organization=organization, created_by_id=target.created_by_id)
    user = User.objects.filter(email=(email or "").strip().lower(), is_active=True).first()
    if user is None or role_of(user=user, organization=organization) not in LAUNCH_ROLES:
        raise ShareError(
            "not_a_member",
            _("%(email)s is not a member of this organization who may launch instances.") % {"email": email},
        )
    if user.pk == target.created_by_id:
        raise ShareError("own", _("%(email)s made it and needs no share.") % {"email": user.email})
    kind = _target_kind(target)
    with transaction.atomic():
        share, created = AccessShare.objects.get_or_create(
            organization=organization, user=user, **{kind: target}, defaults={"created_by": acting_user}
        )
        if created:
            audit_log(
                action="instances.share_add",
                actor=acting_user,
                organization=organization,
                obj=target,
                extra={kind: target.pk, "user": user.email},
            )
            access_changed(organization_ids=[organization.pk])
    return share


def access_share_remove(*, target: Instance | Volume, user_id: int, acting_user: User | None) -> bool:
    """Withdraw the share of ``target`` with user ``user_id`` (same rights as :func:`access_share_add`);
    True if there was one. Audited ``instances.share_remove``; the user's sessions end after commit."""
    organization = target.organization
    authorize_change(user=acting_user, organization=organization, created_by_id=target.created_by_id)
    kind = _target_kind(target)
    with transaction.atomic():
        share = AccessShare.objects.filter(user_id=user_id, **{kind: target}).select_related("user").first()
        if share is None:
            return False
        share.delete()
        audit_log(
            action="instances.share_remove",
            actor=acting_user,
            organization=organization,
            obj=target,
            extra={kind: target.pk, "user": share.user.email},
        )
        access_changed(organization_ids=[organization.pk])
    return True


# --- the one reaction ----------------------------------------------------------------------------------------
_pending = threading.local()


def access_changed(*, organization_ids: Iterable[int]) -> None:
    """Who may enter the instances of these organizations may have changed: enqueue :func:`access_enforce`
    after the commit (at once outside a transaction). Several calls in one transaction enqueue one task."""
    ids: set[int] = getattr(_pending, "ids", None) or set()
    ids.update(int(i) for i in organization_ids)
    _pending.ids = ids

    def run() -> None:
        from instances import tasks

        todo: set[int] = getattr(_pending, "ids", set())
        _pending.ids = set()
        if todo:
            tasks.access_enforce.delay(sorted(todo))

    transaction.on_commit(run)


def _live_interactive(organization_ids: Iterable[int] | None = None) -> QuerySet[Instance]:
    qs = Instance.objects.filter(status__in=LIVE, kind=InstanceKind.INTERACTIVE).select_related("organization")
    return qs if organization_ids is None else qs.filter(organization_id__in=list(organization_ids))


def access_enforce(*, organization_ids: Iterable[int]) -> dict[str, int]:
    """Make the organizations' live interactive instances follow the rule now: rewrite their authorized
    keys (:func:`instances.interactive.ssh.ssh_keys_write`) and ask their JupyterLab servers to re-check
    their sessions (:func:`instances.interactive.jupyter.jupyter_recheck`). Returns ``{"keys": instances
    whose keys were written, "jupyter": servers that answered}``. Never raises for one instance (logged)."""
    from instances.interactive.jupyter import jupyter_enabled, jupyter_recheck
    from instances.interactive.ssh import ssh_enabled, ssh_keys_write

    counts = {"keys": 0, "jupyter": 0}
    for instance in _live_interactive(organization_ids):
        try:
            if ssh_enabled(instance) and ssh_keys_write(instance):
                counts["keys"] += 1
            if jupyter_enabled(instance) and jupyter_recheck(instance):
                counts["jupyter"] += 1
        except Exception:  # one unreachable pod must not keep the others open
            log.exception("could not enforce access on instance %s", instance.pk)
    return counts


def access_sweep() -> int:
    """Periodic (beat): rewrite every live interactive instance's ``authorized_keys`` that differs from the
    rule (a change no signal announced: a queryset ``update()``). Returns how many were rewritten."""
    from instances.interactive.ssh import ssh_enabled, ssh_keys_write

    written = 0
    for instance in _live_interactive():
        try:
            if ssh_enabled(instance) and ssh_keys_write(instance, only_if_changed=True):
                written += 1
        except Exception:
            log.exception("could not sweep the SSH keys of instance %s", instance.pk)
    return written


def _orgs_of(user_id: int) -> list[int]:
    return list(Membership.objects.filter(user_id=user_id).values_list("organization_id", flat=True))


def _on_keys_changed(sender: Any, user: Any, **kwargs: Any) -> None:
    access_changed(organization_ids=_orgs_of(user.pk))


def _on_membership_saved(sender: Any, instance: Membership, **kwargs: Any) -> None:
    if not kwargs.get("raw"):
        access_changed(organization_ids=[instance.organization_id])


def _on_membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    """A member who leaves loses their shares in that organization (in the same transaction)."""
    AccessShare.objects.filter(organization_id=instance.organization_id, user_id=instance.user_id).delete()
    access_changed(organization_ids=[instance.organization_id])


def _on_user_saved(sender: Any, instance: User, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("raw") or kwargs.get("created") or (fields is not None and "is_active" not in fields):
        return  # e.g. ``last_login`` at every login: nothing about access
    access_changed(organization_ids=_orgs_of(instance.pk))


def _on_hook(sender: Any, user: Any, organization: Any = None, **kwargs: Any) -> None:
    access_changed(organization_ids=[organization.pk] if organization is not None else _orgs_of(user.pk))


def connect_signals() -> None:
    """Connect the receivers of :func:`access_changed` (``InstancesConfig.ready``)."""
    from django.db.models.signals import post_delete, post_save

    from portal.hooks import access_changed as hook
    from portal.sshkeys import ssh_keys_changed

    ssh_keys_changed.connect(_on_keys_changed, dispatch_uid="instances.access.keys")
    post_save.connect(_on_membership_saved, sender=Membership, dispatch_uid="instances.access.member_saved")
    post_delete.connect(_on_membership_deleted, sender=Membership, dispatch_uid="instances.access.member_removed")
    post_save.connect(_on_user_saved, sender=User, dispatch_uid="instances.access.user_saved")
    hook.connect(_on_hook, dispatch_uid="instances.access.hook")
