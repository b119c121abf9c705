"""The organization's own monthly cap on app calls and the console page of its calls."""

from __future__ import annotations

import pytest

from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from portal.marketplace import calls, services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.models import AuditEvent, Organization

pytestmark = pytest.mark.django_db
SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


@pytest.fixture
def echo_app(charlie):
    """A public echo app at 0.50 CNY a call, published by charlie's organization."""
    org = charlie.organizations.get()
    app = services.app_create(
        publisher=org,
        user=charlie,
        name="Echo",
        category="general",
        description="",
        input_schema=SCHEMA,
        output_schema={"type": "object"},
        price_per_call_micros=500_000,
        visibility=AppVisibility.PUBLIC,
    )
    services.app_version_add(app=app, user=charlie, kind=ServingKind.ECHO)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=charlie)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)


@pytest.fixture
def funded(alice_org):
    wallet_top_up(organization=alice_org, amount_micros=10_000_000, idempotency_key="alice-topup")
    return alice_org


def test_the_organizations_own_cap_overrides_the_platform_default(alice, funded, echo_app, settings):
    settings.APP_MONTHLY_CAP_MICROS = 100_000_000
    services.app_call_cap_set(organization=funded, user=alice, cap_micros=1_200_000)
    for key in ("a", "b"):
        calls.app_invoke(app=echo_app, caller=funded, user=alice, payload={"text": key}, idempotency_key=key)
    with pytest.raises(services.MonthlyCapReached):
        calls.app_invoke(app=echo_app, caller=funded, user=alice, payload={"text": "c"}, idempotency_key="c")
    assert wallet_balance(organization=funded).total_micros == 9_000_000
    services.app_call_cap_set(organization=funded, user=alice, cap_micros=None)  # back to the default: 100 CNY
    assert Organization.objects.get(pk=funded.pk).app_monthly_cap_micros is None
    result = calls.app_invoke(app=echo_app, caller=funded, user=alice, payload={"text": "c"}, idempotency_key="c")
    assert result.call.status == CallStatus.SUCCEEDED
    audit = AuditEvent.objects.filter(action="marketplace.call_cap_set").order_by("id")
    assert list(audit.values_list("extra", flat=True)) == [
        {"from_micros": None, "to_micros": 1_200_000},
        {"from_micros": 1_200_000, "to_micros": None},
    ]


def test_only_owners_and_admins_set_the_cap_and_a_cap_must_be_positive(client, alice, bob, funded):
    with pytest.raises(services.NotAManager):
        services.app_call_cap_set(organization=funded, user=bob, cap_micros=5_000_000)
    with pytest.raises(services.MarketplaceError, match="must be positive"):
        services.app_call_cap_set(organization=funded, user=alice, cap_micros=0)
    client.force_login(bob)
    response = client.post(f"/o/{funded.slug}/apps/calls/", {"cap": "5.00"})
    assert response.status_code == 400 and "Only owners and admins can set" in response.content.decode()
    client.force_login(alice)
    response = client.post(f"/o/{funded.slug}/apps/calls/", {"cap": "0"})
    assert response.status_code == 400
    assert Organization.objects.get(pk=funded.pk).app_monthly_cap_micros is None
    response = client.post(f"/o/{funded.slug}/apps/calls/", {"cap": "5.00"})
    assert response.status_code == 302
    assert Organization.objects.get(pk=funded.pk).app_monthly_cap_micros == 5_000_000


def test_the_calls_page_lists_the_organizations_calls_with_their_cost(client, alice, funded, echo_app, charlie):
    calls.app_invoke(app=echo_app, caller=funded, user=alice, payload={"text": "ok"}, idempotency_key="ok")
    with pytest.raises(services.CallFailed):
        calls.app_invoke(
            app=echo_app,
            caller=funded,
            user=alice,
            payload={"text": "x"},
            idempotency_key="bad",
            fail_after_reserve=RuntimeError("crash"),
        )
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/apps/calls/").content.decode()
    assert html.count('data-testid="call-row"') == 2
    assert "0.500000" in html and "backend_error" in html
    assert "This month: 0.500000 CNY on app calls" in html and "no monthly cap" in html
    partial = client.get(f"/o/{funded.slug}/apps/calls/?page=1", HTTP_HX_REQUEST="true").content.decode()
    assert partial.count('data-testid="call-row"') == 2 and "<html" not in partial
    assert AppCall.objects.filter(caller=funded).count() == 2
    client.force_login(charlie)
    assert client.get(f"/o/{funded.slug}/apps/calls/").status_code == 404
    assert client.post(f"/o/{funded.slug}/apps/calls/", {"cap": "1.00"}).status_code == 404
    assert Organization.objects.get(pk=funded.pk).app_monthly_cap_micros is None
