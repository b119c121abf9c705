"""``portal.scoping``: the organization a request acts for and the one scoped lookup, called directly
(the tenancy tests check the pages and endpoints built on them)."""

from __future__ import annotations

from typing import Any

import pytest
from django.http import Http404
from django.test import RequestFactory
from rest_framework.request import Request

from portal.api.errors import ApiError
from portal.choices import TokenScope
from portal.models import Membership
from portal.scoping import request_organization, scoped_get_or_404
from portal.selectors import organization_for_user
from portal.services import api_token_create


def _console(user: Any) -> Any:
    request = RequestFactory().get("/")
    request.user = user
    return request


def _api(user: Any, *, query: str = "", token: Any = None) -> Request:
    request = Request(RequestFactory().get(f"/api/v1/x{query}"))
    request.user, request.auth = user, token
    return request


def test_a_member_acts_for_the_organization_of_the_url_and_an_outsider_gets_404(alice, alice_org, bob, charlie):
    assert request_organization(_console(bob), slug=alice_org.slug) == alice_org
    assert request_organization(_console(bob)) == organization_for_user(user=bob)  # no slug: the personal one
    with pytest.raises(Http404):
        request_organization(_console(charlie), slug=alice_org.slug)
    with pytest.raises(Http404):
        request_organization(_console(charlie), slug="no-such-org")


def test_an_api_session_reads_the_organization_parameter(alice_org, bob, charlie):
    assert request_organization(_api(bob, query=f"?organization={alice_org.slug}")) == alice_org
    with pytest.raises(Http404):
        request_organization(_api(charlie, query=f"?organization={alice_org.slug}"))


def test_a_token_acts_only_for_its_own_organization(alice, alice_org, bob):
    token = api_token_create(user=bob, organization=alice_org, name="b", scope=TokenScope.READ).token
    bob_own = Membership.objects.exclude(organization=alice_org).get(user=bob).organization  # his personal one
    assert request_organization(_api(bob, token=token)) == alice_org
    assert request_organization(_api(bob, query=f"?organization={alice_org.slug}", token=token)) == alice_org
    with pytest.raises(ApiError) as refused:
        request_organization(_api(bob, query=f"?organization={bob_own.slug}", token=token))
    assert (refused.value.status_code, refused.value.error_code) == (404, "not_found")


def test_the_scoped_lookup_finds_only_the_organizations_own_objects(alice, alice_org, bob, charlie):
    bobs = Membership.objects.get(organization=alice_org, user=bob)
    charlie_org = organization_for_user(user=charlie)
    assert scoped_get_or_404(Membership, organization=alice_org, pk=bobs.pk) == bobs
    assert scoped_get_or_404(Membership.objects.select_related("user"), organization=alice_org, user=bob) == bobs
    for organization, pk in ((charlie_org, bobs.pk), (alice_org, 10**9), (alice_org, "abc"), (alice_org, None)):
        with pytest.raises(Http404):
            scoped_get_or_404(Membership, organization=organization, pk=pk)
