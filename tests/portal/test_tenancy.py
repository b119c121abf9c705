"""Tenancy: an API token is a credential of one membership, and one role table decides who may do what.

Personas: alice owns the team "acme"; bob is a member (or admin, where a test says so); charlie is an outsider.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.apps import apps
from django.db.models import Sum
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from rest_framework.test import APIClient

from billing.choices import GrantKind
from billing.services import credit_grant_create, wallet_top_up
from portal.choices import Role, TokenScope
from portal.models import ApiToken, AuditEvent, Membership
from portal.permissions import ROLE_ACTIONS, Action, PermissionRefused, authorize
from portal.services import (
    MembershipError,
    api_token_create,
    membership_add,
    membership_invite,
    membership_remove,
    organization_create,
    user_deactivate,
)
from tests.conftest import _make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(alice: Any) -> Any:
    """alice's team organization "acme" with 20.00 CNY (10.00 paid, 10.00 granted)."""
    org = organization_create(name="acme", owner=alice)
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="acme:topup")
    credit_grant_create(
        organization=org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.STAFF,
        idempotency_key="acme:grant",
        reason="test",
    )
    return org


@pytest.fixture
def bob_in_team(team: Any, alice: Any) -> Any:
    bob = _make_user("bob@example.com", "bob")
    membership_invite(organization=team, email=bob.email, role=Role.ADMIN, acting_user=alice)
    return bob


def _api(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def _api_routes() -> list[str]:
    """Every URL pattern under /api/v1/ from the URL resolver, made concrete (ids → 1, slugs → "x")."""
    found: list[str] = []

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                found.append(prefix + str(p.pattern))

    walk(get_resolver().url_patterns, "")
    routes = []
    for route in found:
        if not route.startswith("api/v1/"):
            continue
        route = route.replace("^", "").replace("$", "")
        route = re.sub(r"\(\?P<(\w+)>[^)]*\)", "1", route)
        route = re.sub(r"<int:\w+>", "1", route)
        route = re.sub(r"<(?:slug|str|path):?\w*>", "x", route)
        routes.append("/" + route)
    return sorted(set(routes))


#: Routes that do not take API tokens: the public schema and docs pages, and the runtime callback (job tokens).
TOP_UP = {"amount": "50.00", "success_url": "https://example.com/ok", "cancel_url": "https://example.com/no"}
PUBLIC_ROUTES = {"/api/v1/schema", "/api/v1/docs", "/api/v1/redoc"}


def _snapshot() -> dict[str, Any]:
    """Row counts of every model, ledger and wallet sums and the instances' states: what a request could change."""
    counts = {m._meta.label: m.objects.count() for m in apps.get_models()}
    from billing.models import LedgerEntry
    from instances.models import Instance

    return {
        "counts": counts,
        "ledger": LedgerEntry.objects.aggregate(s=Sum("amount_micros"))["s"],
        "instances": sorted(Instance.objects.values_list("pk", "status")),
        "tokens": sorted(ApiToken.objects.values_list("pk", "scope", "revoked_at")),
    }


def test_a_removed_member_gets_401_on_every_api_route_and_the_revocation_is_audited(team, alice, bob_in_team):
    write = api_token_create(user=bob_in_team, organization=team, name="w", scope=TokenScope.WRITE).plaintext
    read = api_token_create(user=bob_in_team, organization=team, name="r", scope=TokenScope.READ).plaintext
    assert _api(write).get("/api/v1/wallet").status_code == 200

    membership_remove(membership=Membership.objects.get(organization=team, user=bob_in_team), acting_user=alice)

    assert ApiToken.objects.filter(user=bob_in_team, organization=team, revoked_at__isnull=True).count() == 0
    revocations = AuditEvent.objects.filter(action="portal.api_token_revoke", actor=alice, organization=team)
    assert sorted(e.extra["reason"] for e in revocations) == ["membership_removed", "membership_removed"]
    assert {e.extra["user"] for e in revocations} == {"bob@example.com"}

    routes = _api_routes()
    assert len(routes) > 20  # the walk really found the API
    before = _snapshot()
    answers = {}
    for route in routes:
        for token in (write, read):
            for method in ("get", "post", "put", "patch", "delete"):
                response = getattr(_api(token), method)(route, {}, format="json")
                answers[(route, method)] = response.status_code
                if route in PUBLIC_ROUTES:
                    continue
                if route.startswith("/api/v1/runtime/") and method != "post":  # POST only, job tokens only
                    assert (response.status_code, response.json()["error"]["code"]) == (405, "method_not_allowed")
                    continue
                assert response.status_code == 401, (route, method, response.status_code)
                # the OpenAI-compatible routes answer in OpenAI's error shape, whose code for a dead key is this
                expected = "invalid_api_key" if route.startswith("/api/v1/openai/") else "authentication_failed"
                assert response.json()["error"]["code"] == expected, route
    assert _snapshot() == before
    for route in PUBLIC_ROUTES:  # the same answer as for anyone: the docs, or 405 for other methods
        assert {answers[(route, m)] for m in ("get", "post", "put", "patch", "delete")} in ({200, 405}, {401})


def test_a_team_member_keeps_the_console_but_a_removed_one_does_not(client, team, alice, bob_in_team):
    client.force_login(bob_in_team)
    assert client.get(f"/o/{team.slug}/wallet/").status_code == 200
    membership_remove(membership=Membership.objects.get(organization=team, user=bob_in_team), acting_user=alice)
    assert client.get(f"/o/{team.slug}/wallet/").status_code == 404


def test_a_token_never_acts_for_another_organization(team, alice, alice_org):
    """alice's personal-organization token naming her team: 404 and nothing read or written."""
    personal = api_token_create(user=alice, organization=alice_org, name="p", scope=TokenScope.WRITE).plaintext
    client = _api(personal)
    assert client.get("/api/v1/me").status_code == 200  # last_used_at is written now, not during the checks
    before = _snapshot()
    q = f"?organization={team.slug}"
    requests = [
        ("get", "/api/v1/wallet" + q, None),
        ("get", "/api/v1/wallet/ledger" + q, None),
        ("get", "/api/v1/instances" + q, None),
        ("get", "/api/v1/jobs" + q, None),
        ("get", "/api/v1/usage" + q, None),
        ("get", "/api/v1/apps/calls" + q, None),
        ("post", "/api/v1/instances" + q, {"gpu_type": "cpu-local", "gpu_count": 1, "command": ["true"]}),
        ("post", "/api/v1/wallet/top-ups" + q, TOP_UP),
    ]
    for method, url, body in requests:
        response = getattr(client, method)(url, body, format="json")
        assert response.status_code == 404, (url, response.status_code)
        assert response.json()["error"]["code"] == "not_found"
        assert team.slug not in str(response.json()["error"].get("details"))
    assert _snapshot() == before
    # its own organization named explicitly is fine
    assert client.get(f"/api/v1/wallet?organization={alice_org.slug}").json()["organization"] == alice_org.slug


def test_demoting_an_admin_narrows_their_write_tokens_in_the_same_transaction(team, alice, bob_in_team):
    created = api_token_create(user=bob_in_team, organization=team, name="w", scope=TokenScope.WRITE)
    client = _api(created.plaintext)
    membership_invite(organization=team, email=bob_in_team.email, role=Role.MEMBER, acting_user=alice)

    created.token.refresh_from_db()
    assert (created.token.scope, created.token.revoked_at) == (TokenScope.READ, None)
    event = AuditEvent.objects.get(action="portal.api_token_narrow")
    assert (event.actor, event.object_id, event.extra["reason"]) == (alice, str(created.token.pk), "role_changed")
    assert client.get("/api/v1/wallet").status_code == 200
    refused = client.post("/api/v1/wallet/top-ups", TOP_UP, format="json")
    assert refused.status_code == 403


def test_a_write_token_of_a_demoted_member_acts_as_read_even_if_the_row_was_not_narrowed(team, alice, bob_in_team):
    created = api_token_create(user=bob_in_team, organization=team, name="w", scope=TokenScope.WRITE)
    Membership.objects.filter(organization=team, user=bob_in_team).update(role=Role.MEMBER)  # behind the service
    assert _api(created.plaintext).get("/api/v1/me").json()["token_scope"] == "read"
    response = _api(created.plaintext).post(
        "/api/v1/instances", {"gpu_type": "x", "gpu_count": 1, "command": ["true"]}, format="json"
    )
    assert response.status_code == 403


def test_deactivating_a_user_revokes_every_token(team, alice, alice_org, bob_in_team):
    tokens = [
        api_token_create(user=bob_in_team, organization=org, name="t", scope=TokenScope.READ)
        for org in (team, bob_in_team.organizations.get(personal=True))
    ]
    user_deactivate(user=bob_in_team, acting_user=alice)
    for created in tokens:
        created.token.refresh_from_db()
        assert created.token.revoked_at is not None
        assert _api(created.plaintext).get("/api/v1/me").status_code == 401
    assert AuditEvent.objects.filter(action="portal.api_token_revoke", extra__reason="user_deactivated").count() == 2


def test_unticking_active_in_the_admin_revokes_tokens_too(team, bob_in_team):
    created = api_token_create(user=bob_in_team, organization=team, name="t", scope=TokenScope.READ)
    bob_in_team.is_active = False
    bob_in_team.save()
    created.token.refresh_from_db()
    assert created.token.revoked_at is not None


def test_a_member_cannot_make_themselves_admin_and_an_admin_cannot_touch_owners(client, team, alice, bob_in_team):
    membership_add(organization=team, user=bob_in_team, role=Role.MEMBER, acting_user=alice)
    with pytest.raises(MembershipError):
        membership_invite(organization=team, email=bob_in_team.email, role=Role.ADMIN, acting_user=bob_in_team)
    client.force_login(bob_in_team)
    response = client.post(f"/o/{team.slug}/members/", {"email": "bob@example.com", "role": "owner"})
    assert response.status_code == 400
    assert Membership.objects.get(organization=team, user=bob_in_team).role == Role.MEMBER

    membership_add(organization=team, user=bob_in_team, role=Role.ADMIN, acting_user=alice)
    for role in (Role.OWNER, Role.MEMBER):  # promote himself to owner, or demote the owner
        email = "bob@example.com" if role == Role.OWNER else "alice@example.com"
        with pytest.raises(MembershipError):
            membership_invite(organization=team, email=email, role=role, acting_user=bob_in_team)
    with pytest.raises(MembershipError):
        membership_remove(membership=Membership.objects.get(organization=team, user=alice), acting_user=bob_in_team)
    assert dict(Membership.objects.filter(organization=team).values_list("user__email", "role")) == {
        "alice@example.com": "owner",
        "bob@example.com": "admin",
    }


def test_the_last_owner_cannot_be_demoted(team, alice):
    with pytest.raises(MembershipError):
        membership_invite(organization=team, email=alice.email, role=Role.ADMIN, acting_user=alice)
    assert Membership.objects.get(organization=team, user=alice).role == Role.OWNER


# --- the role table, in console and API alike ----------------------------------------------------------------
ROLES = [Role.OWNER, Role.ADMIN, Role.MEMBER, Role.BILLING]


@pytest.fixture
def crew(team: Any, alice: Any) -> dict[str, Any]:
    """One user per role in the team (alice is the owner), each with a console session and the strongest
    token the role may hold; plus a factory of pending instances started by another member."""
    from django.core.management import call_command
    from django.test import Client

    from instances.models import GpuType, Instance

    call_command("seed_catalog", verbosity=0)
    people: dict[str, Any] = {}
    for role in ROLES:
        user = alice if role == Role.OWNER else _make_user(f"{role}@example.com", str(role))
        if role != Role.OWNER:
            membership_add(organization=team, user=user, role=role, acting_user=alice)
        scope = TokenScope.WRITE if role_allows_write(role) else TokenScope.READ
        browser = Client()
        browser.force_login(user)
        people[role] = {
            "user": user,
            "api": _api(api_token_create(user=user, organization=team, name="t", scope=scope).plaintext),
            "console": browser,
        }
    cpu = GpuType.objects.get(code="cpu-local")
    someone_else = _make_user("someone@example.com", "someone")
    membership_add(organization=team, user=someone_else, role=Role.MEMBER, acting_user=alice)
    people["instance_factory"] = lambda: Instance.objects.create(
        organization=team,
        created_by=someone_else,
        name="theirs",
        kind="interactive",
        gpu_type=cpu,
        gpu_count=1,
        mode="container",
        command=["sleep", "1"],
    )
    return people


def role_allows_write(role: str) -> bool:
    return Action.TOKENS_CREATE_WRITE in ROLE_ACTIONS[role]


def _expect(role: str, action: Action, *, write: bool) -> bool:
    """What the table says: the role allows the action, and through the API a write needs a write token."""
    return action in ROLE_ACTIONS[role] and (not write or role_allows_write(role))


@pytest.mark.parametrize("role", ROLES)
def test_each_role_can_do_exactly_what_the_table_says(role, crew, team):
    from instances.models import Instance

    me = crew[role]
    slug = team.slug

    # stop an instance someone else started
    for channel in ("console", "api"):
        instance = crew["instance_factory"]()
        if channel == "console":
            response = me["console"].post(f"/o/{slug}/instances/{instance.pk}/stop/")
            allowed = action_allowed(role, Action.INSTANCES_MANAGE_ANY)
        else:
            response = me["api"].post(f"/api/v1/instances/{instance.pk}/stop", format="json")
            allowed = _expect(role, Action.INSTANCES_MANAGE_ANY, write=True)
        instance.refresh_from_db()
        assert (response.status_code != 403, instance.status == "stopped") == (allowed, allowed), (channel, role)

    # launch (a GPU type that does not exist: allowed roles get past the permission check to a 400)
    api = me["api"].post("/api/v1/instances", {"gpu_type": "NOPE", "gpu_count": 1, "command": ["true"]}, format="json")
    assert api.status_code == (400 if _expect(role, Action.INSTANCES_LAUNCH, write=True) else 403), api.json()
    console = me["console"].post(
        f"/o/{slug}/instances/new/",
        {"gpu_type": "cpu-local", "gpu_count": 1, "mode": "container", "command": "sleep 1"},
    )
    launched = Instance.objects.filter(created_by=me["user"]).count()
    if action_allowed(role, Action.INSTANCES_LAUNCH):
        assert (console.status_code, launched) in ((302, 1), (400, 0))  # launched, or refused for money
        assert console.status_code != 403
    else:
        assert (console.status_code, launched) == (403, 0)

    # top up (Stripe is not configured here: allowed roles reach that refusal, 503)
    api = me["api"].post("/api/v1/wallet/top-ups", TOP_UP, format="json")
    assert api.status_code == (503 if _expect(role, Action.WALLET_TOP_UP, write=True) else 403)
    console = me["console"].post(f"/o/{slug}/wallet/top-up/", {"amount": "50"})
    assert console.status_code == (302 if action_allowed(role, Action.WALLET_TOP_UP) else 403)

    # publish an app from a checkpoint (an unknown job: allowed roles reach that 404)
    api = me["api"].post(
        "/api/v1/apps/publish", {"job_id": 999999, "checkpoint_id": 999999, "name": "x"}, format="json"
    )
    assert api.status_code == (404 if _expect(role, Action.APPS_PUBLISH, write=True) else 403), api.json()
    from portal.marketplace.models import App

    console = me["console"].post(
        f"/o/{slug}/apps/new/",
        {
            "name": f"app of {role}",
            "category": "general",
            "price_per_call": "0",
            "visibility": "private",
            "input_schema": '{"type": "object"}',
            "output_schema": '{"type": "object"}',
        },
    )
    made = App.objects.filter(publisher=team, created_by=me["user"]).count()
    assert (console.status_code, made) == ((302, 1) if action_allowed(role, Action.APPS_PUBLISH) else (403, 0))

    # the monthly cap on app calls
    console = me["console"].post(f"/o/{slug}/apps/calls/", {"cap": "12.50"})
    team.refresh_from_db()
    if action_allowed(role, Action.APPS_SET_CAP):
        assert team.app_monthly_cap_micros == 12_500_000
    else:
        assert team.app_monthly_cap_micros is None

    # tokens with the write scope (console only: tokens are made in the console)
    console = me["console"].post("/tokens/", {"organization": team.slug, "name": "more", "scope": "write"})
    made = ApiToken.objects.filter(user=me["user"], organization=team, name="more").count()
    assert made == (1 if action_allowed(role, Action.TOKENS_CREATE_WRITE) else 0)
    assert console.status_code == (200 if made else 400)


def action_allowed(role: str, action: Action) -> bool:
    return action in ROLE_ACTIONS[role]


def test_the_one_check_refuses_outsiders_and_allows_the_platform(team, charlie):
    with pytest.raises(PermissionRefused) as refused:
        authorize(user=charlie, organization=team, action=Action.INSTANCES_LAUNCH)
    assert refused.value.action == Action.INSTANCES_LAUNCH
    authorize(user=None, organization=team, action=Action.APPS_PUBLISH)  # beat tasks, the budget guard
    with pytest.raises(PermissionRefused):
        authorize(user=charlie, organization=team, action=Action.APPS_PUBLISH, staff=True)  # not staff
    charlie.is_staff = True
    authorize(user=charlie, organization=team, action=Action.APPS_PUBLISH, staff=True)


def test_a_billing_viewer_reads_the_wallet_but_cannot_launch(team, alice):
    viewer = _make_user("ledger@example.com", "ledger")
    membership_add(organization=team, user=viewer, role=Role.BILLING, acting_user=alice)
    token = api_token_create(user=viewer, organization=team, name="r", scope=TokenScope.READ).plaintext
    assert _api(token).get("/api/v1/wallet").json()["balance"] == str(Decimal("20.000000"))
    with pytest.raises(PermissionRefused):
        api_token_create(user=viewer, organization=team, name="w", scope=TokenScope.WRITE)
