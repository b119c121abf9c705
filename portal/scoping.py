"""The one organization-scoped lookup of every console view and API view (STYLE.md "Views, htmx, API").

Two functions, used the same way in both places:

* ``request_organization(request, slug=None)`` — the organization a request acts for. Console views pass the
  ``<org>`` slug of their URL; API views pass nothing and the ``?organization=`` query parameter is read.
  An API token acts only for its own organization. A foreign organization is a 404, exactly like a missing one.
* ``scoped_get_or_404(model_or_queryset, *, organization, org_field="organization", **lookup)`` — one object
  that belongs to that organization, else 404 (also for a lookup value that is not even well formed).

Lists are read through the apps' selectors (``instances_for_org(org)`` …), which take the organization too;
an API viewset scopes its ``get_queryset`` through ``request_organization`` and DRF's ``get_object`` looks up
inside it. ``tests/portal/test_architecture.py`` fails when a view or API module fetches an object of an
organization-owned model any other way (``Model.objects.get(``, ``get_object_or_404(``) or resolves the
organization itself.
"""

from __future__ import annotations

from typing import TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest
from rest_framework.request import Request

from portal.api.errors import ApiError
from portal.models import ApiToken, Organization, User
from portal.selectors import organization_for_user

M = TypeVar("M", bound=Model)


def request_organization(request: HttpRequest | Request, slug: str | None = None) -> Organization:
    """The organization ``request`` acts for; raises ``Http404`` (console) or ``ApiError`` 404 (API token).

    With an API token: the token's organization, always — a token is a credential of one membership, so a slug
    naming any other organization is refused with 404 ``not_found`` (as for an outsider) before anything is
    read. With a session (console or API): the organization named by ``slug`` (console: the URL's ``<org>``;
    API: ``?organization=``) if the user is a member, else 404 (indistinguishable from a missing one); without
    a slug, the user's personal organization.
    """
    if slug is None and isinstance(request, Request):
        slug = request.query_params.get("organization")
    token = getattr(request, "auth", None)
    if isinstance(token, ApiToken):
        token_org = token.organization
        if slug is not None and slug != token_org.slug:
            raise ApiError(
                "not_found",
                "Organization not found for this API token: a token acts only for the "
                f"organization it was created for ({token_org.slug}).",
                404,
            )
        return token_org
    user = request.user
    if not isinstance(user, User):  # views are behind login; an anonymous request sees no organization
        raise Http404("organization not found")
    return organization_for_user(user=user, slug=slug)


def scoped_get_or_404(
    model_or_queryset: type[M] | QuerySet[M],
    *,
    organization: Organization,
    org_field: str = "organization",
    **lookup: object,
) -> M:
    """The one object of ``model_or_queryset`` matching ``lookup`` whose ``org_field`` (a field path such as
    ``"organization"``, ``"publisher"``, ``"job__organization"``) is ``organization``; else ``Http404``.

    An outsider's request for another organization's object, a missing object and a malformed lookup value
    (``pk="abc"``) are answered alike. Pass a queryset to keep its ``select_related`` and extra filters.
    """
    if isinstance(model_or_queryset, QuerySet):
        queryset = model_or_queryset
    else:
        queryset = model_or_queryset._default_manager.all()
    try:
        obj = queryset.filter(**{org_field: organization}, **lookup).first()
    except (ValueError, TypeError, ValidationError):
        obj = None
    if obj is None:
        raise Http404("not found")
    return obj
