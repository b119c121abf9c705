"""The role table: who in an organization may do what, checked in one place for console, API and admin.

Every service that changes an organization's state calls :func:`authorize` with the acting user and the
action; views, API viewsets and admin actions call those services, so a refusal reads the same everywhere
(``PermissionRefused`` is Django's ``PermissionDenied``: a 403 page in the console, a 403
``permission_denied`` envelope in the API).

API tokens are credentials of one membership (``portal.api.authentication``): a token whose user is no
longer a member of its organization authenticates nothing, and what a token may do is the intersection of
its scope (``read`` = safe methods only) and its user's current role in this table.

| action                 | owner | admin | member | billing |
|------------------------|:-----:|:-----:|:------:|:-------:|
| ``members.manage``     |   ✓   |   ✓   |        |         |
| ``tokens.create``      |   ✓   |   ✓   |   ✓    |    ✓    |   (read scope)
| ``tokens.create_write``|   ✓   |   ✓   |        |         |
| ``instances.launch``   |   ✓   |   ✓   |   ✓    |         |   (also: stop, restart, roll back one's own)
| ``instances.manage_any``|  ✓   |   ✓   |        |         |   (stop / restart / roll back others')
| ``instances.enter_any``|   ✓   |   ✓   |   (✓)  |         |   (JupyterLab, SSH, attach volumes of others')
| ``datasets.license``   |   ✓   |   ✓   |   ✓    |         |   (accept agreements, upload corpora)
| ``apps.invoke``        |   ✓   |   ✓   |   ✓    |         |
| ``apps.publish``       |   ✓   |   ✓   |        |         |   (create apps, versions, publish, withdraw)
| ``apps.set_cap``       |   ✓   |   ✓   |        |         |
| ``wallet.top_up``      |   ✓   |   ✓   |        |    ✓    |
| ``webhooks.manage``    |   ✓   |   ✓   |        |         |

Every member (any role) may read the organization's objects (wallet, ledger, instances, jobs, apps).

Entering an instance (JupyterLab, SSH) or attaching a volume read-write is work on what someone launched or
made: one's own needs ``instances.launch``; another member's needs ``instances.enter_any`` (owners, admins),
which a member gets only where the organization allows members to enter each other's instances, or where the
launcher (the volume's creator) shared that instance (volume) with them — the (✓) above. The whole rule, with
those two grants, is :mod:`instances.interactive.access` (floor 3: the shares are its rows); the table here
says which roles hold the action outright.
"""

from __future__ import annotations

from enum import StrEnum

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext_lazy as _

from portal.choices import Role
from portal.models import Membership, Organization, User


class Action(StrEnum):
    """Something a member does to an organization; the values appear in audit rows and error details."""

    MEMBERS_MANAGE = "members.manage"
    TOKENS_CREATE = "tokens.create"
    TOKENS_CREATE_WRITE = "tokens.create_write"
    INSTANCES_LAUNCH = "instances.launch"
    INSTANCES_MANAGE_ANY = "instances.manage_any"
    INSTANCES_ENTER_ANY = "instances.enter_any"
    DATASETS_LICENSE = "datasets.license"
    APPS_INVOKE = "apps.invoke"
    APPS_PUBLISH = "apps.publish"
    APPS_SET_CAP = "apps.set_cap"
    WALLET_TOP_UP = "wallet.top_up"
    WEBHOOKS_MANAGE = "webhooks.manage"


_ALL = frozenset(Action)
ROLE_ACTIONS: dict[str, frozenset[Action]] = {
    Role.OWNER: _ALL,
    Role.ADMIN: _ALL,
    Role.MEMBER: frozenset(
        {Action.TOKENS_CREATE, Action.INSTANCES_LAUNCH, Action.DATASETS_LICENSE, Action.APPS_INVOKE}
    ),
    Role.BILLING: frozenset({Action.TOKENS_CREATE, Action.WALLET_TOP_UP}),
}


class PermissionRefused(PermissionDenied):
    """The acting user's role in the organization does not allow ``action`` (or they are not a member).

    ``str(exc)`` is a translated sentence naming what is needed; ``exc.action`` the refused action.
    """

    def __init__(self, message: str, *, action: Action) -> None:
        super().__init__(message)
        self.action = action


def role_allows(role: str | None, action: Action) -> bool:
    """True if a member with ``role`` may do ``action`` (``None``: not a member, never allowed)."""
    return role is not None and action in ROLE_ACTIONS.get(role, frozenset())


def role_of(*, user: User | None, organization: Organization) -> str | None:
    """The user's current role in the organization, or None if they are not an (active) member."""
    if user is None or not user.is_active:
        return None
    return Membership.objects.filter(organization=organization, user=user).values_list("role", flat=True).first()


_REFUSALS = {
    Action.MEMBERS_MANAGE: _("Only owners and admins can manage members."),
    Action.TOKENS_CREATE: _("Only members of the organization can create API tokens for it."),
    Action.TOKENS_CREATE_WRITE: _(
        "Only owners and admins can create API tokens with the write scope; create a read-only token instead."
    ),
    Action.INSTANCES_LAUNCH: _(
        "Your role in this organization does not allow launching or changing instances and jobs."
    ),
    Action.INSTANCES_MANAGE_ANY: _(
        "Only owners and admins can stop or change instances and jobs that other members started."
    ),
    Action.INSTANCES_ENTER_ANY: _(
        "Only the member who launched it, owners and admins can enter this instance or use this volume, unless "
        "the organization lets members enter each other's instances or it was shared with you."
    ),
    Action.DATASETS_LICENSE: _(
        "Your role in this organization does not allow accepting licenses or uploading corpora."
    ),
    Action.APPS_INVOKE: _("Your role in this organization does not allow calling apps."),
    Action.APPS_PUBLISH: _("Only owners and admins can create, publish or change the organization's apps."),
    Action.APPS_SET_CAP: _("Only owners and admins can set the monthly cap on app calls."),
    Action.WALLET_TOP_UP: _("Only owners, admins and billing viewers can top up the wallet."),
    Action.WEBHOOKS_MANAGE: _("Only owners and admins of the organization manage its webhooks."),
}


def refusal_message(action: Action) -> str:
    """The translated sentence a refusal of ``action`` says (for rules that refine the table, e.g.
    ``instances.interactive.access``)."""
    return str(_REFUSALS[action])


def authorize(*, user: User | None, organization: Organization, action: Action, staff: bool = False) -> None:
    """Raise ``PermissionRefused`` unless ``user`` may do ``action`` in ``organization``.

    ``user=None`` is the platform itself (beat tasks, the budget guard, callbacks): always allowed.
    ``staff=True`` is passed only by Django admin actions; it allows an active staff user who is not a
    member (the back office's force stop, app review). The role is read from the database on every call,
    so a removed or demoted member is refused at once, whatever session or token they hold.
    """
    if user is None:
        return
    if staff and user.is_active and user.is_staff:
        return
    if role_allows(role_of(user=user, organization=organization), action):
        return
    raise PermissionRefused(str(_REFUSALS[action]), action=action)


def allowed_actions(*, user: User | None, organization: Organization) -> frozenset[Action]:
    """The actions the user may do in the organization (for templates: show or hide buttons)."""
    role = role_of(user=user, organization=organization)
    return ROLE_ACTIONS.get(role, frozenset()) if role else frozenset()


def authorize_change(
    *, user: User | None, organization: Organization, created_by_id: int | None, staff: bool = False
) -> None:
    """Authorize stopping, restarting or rolling back an instance or job that ``created_by_id`` started.

    One's own: ``instances.launch``; another member's (or the platform's): ``instances.manage_any``.
    Raises ``PermissionRefused``.
    """
    own = user is not None and created_by_id is not None and user.pk == created_by_id
    authorize(
        user=user,
        organization=organization,
        action=Action.INSTANCES_LAUNCH if own else Action.INSTANCES_MANAGE_ANY,
        staff=staff,
    )
