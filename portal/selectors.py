"""Read queries of the portal app, including the one organization-scoped lookup helper."""

from __future__ import annotations

from typing import TypeVar

from django.db.models import Model, QuerySet
from django.http import Http404

from portal.models import ApiToken, Membership, Organization, User

M = TypeVar("M", bound=Model)


def organizations_for_user(user: User) -> QuerySet[Organization]:
    """Organizations the user belongs to, personal first."""
    return Organization.objects.filter(memberships__user=user).order_by("-personal", "name")


def organization_for_user(*, user: User, slug: str | None = None) -> Organization:
    """The organization named by ``slug`` if the user is a member, else 404; without a slug, the
    user's personal organization. A foreign organization is indistinguishable from a missing one."""
    qs = organizations_for_user(user)
    org = qs.filter(slug=slug).first() if slug else qs.first()
    if org is None:
        raise Http404("organization not found")
    return org


def membership_of(*, user: User, organization: Organization) -> Membership | None:
    return Membership.objects.filter(user=user, organization=organization).first()


def get_scoped_or_404(
    queryset: QuerySet[M], *, organization: Organization, org_field: str = "organization", **lookup: object
) -> M:
    """Fetch one object of ``queryset`` that belongs to ``organization``; anything else is a 404.

    Every console view and API view fetches objects through this helper, so an outsider's request
    for another organization's object is answered exactly like a request for a missing one.
    """
    obj = queryset.filter(**{org_field: organization}, **lookup).first()
    if obj is None:
        raise Http404("not found")
    return obj


def api_tokens_for_user(user: User) -> QuerySet[ApiToken]:
    return ApiToken.objects.filter(user=user).select_related("organization").order_by("-created_at", "-id")
