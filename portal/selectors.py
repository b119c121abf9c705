"""Read queries of the portal app. The organization-scoped lookup of views is ``portal.scoping``."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from portal.choices import Role
from portal.models import ApiToken, Membership, Organization, User


def organizations_for_user(user: User) -> QuerySet[Organization]:
    """Organizations the user belongs to, personal first."""
    return Organization.objects.filter(memberships__user=user).order_by("-personal", "name")


def personal_organization_of(user: User) -> Organization | None:
    """The personal organization the user owns (made at signup), or None. Another member's personal
    organization the user was invited into is not theirs (both are ``personal``; only one is owned)."""
    return Organization.objects.filter(memberships__user=user, memberships__role=Role.OWNER, personal=True).first()


def organization_for_user(*, user: User, slug: str | None = None) -> Organization:
    """The organization named by ``slug`` if the user is a member, else 404; without a slug, the
    user's own personal organization (:func:`personal_organization_of`), else the first they belong to.
    A foreign organization is indistinguishable from a missing one."""
    qs = organizations_for_user(user)
    org = qs.filter(slug=slug).first() if slug else (personal_organization_of(user) or qs.first())
    if org is None:
        raise Http404("organization not found")
    return org


def membership_of(*, user: User, organization: Organization) -> Membership | None:
    return Membership.objects.filter(user=user, organization=organization).first()


def api_tokens_for_user(user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).select_related("organization").order_by("-created_at", "-id")
