"""Calls that go wrong between the reservation and the posting, and requests that must be refused before
anything is reserved: non-JSON numbers, over-long keys, oversized "try it" input, stale reservations, and a
publisher's own calls."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient
from werkzeug import Response

from billing.models import LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from portal.choices import Role, TokenScope
from portal.marketplace import calls, services, tasks
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.services import api_token_create, membership_add

pytestmark = pytest.mark.django_db
SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


@pytest.fixture
def caller(charlie):
    org = charlie.organizations.get()
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="caller-topup")
    return org


def _app(alice, alice_org, *, kind=ServingKind.ECHO, url="", price=500_000):
    """A public app of alice's organization, reviewed and published."""
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Echo",
        category="general",
        description="",
        input_schema=SCHEMA,
        output_schema={"type": "object"},
        price_per_call_micros=price,
        visibility=AppVisibility.PUBLIC,
    )
    services.app_version_add(app=app, user=alice, kind=kind, endpoint_url=url)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)


def _client(user, org) -> APIClient:
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Bearer "
        + api_token_create(user=user, organization=org, name="t", scope=TokenScope.WRITE).plaintext
    )
    return client


def test_nan_or_infinity_in_a_request_is_refused_before_anything_is_reserved(alice, alice_org, bob):
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="t")
    app = _app(alice, alice_org)
    membership_add(organization=alice_org, user=bob, role=Role.ADMIN, acting_user=None)  # write tokens: admins
    client = _client(bob, alice_org)
    for body in ('{"text": "x", "n": NaN}', '{"text": "x", "n": -Infinity}'):
        response = client.post(
            f"/api/v1/apps/{app.slug}/invoke", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="nan"
        )
        assert response.status_code == 400, response.content
        assert (
            response.json()["error"]["code"] == "invalid_json"
            and "is not a JSON value" in response.json()["error"]["message"]
        )
    assert AppCall.objects.count() == 0


def test_a_backend_answering_nan_costs_nothing_and_holds_nothing(
    alice, alice_org, caller, charlie, httpserver, settings
):
    settings.APP_ALLOW_HTTP_ENDPOINTS = True
    httpserver.expect_request("/x", method="POST").respond_with_handler(
        lambda request: Response('{"output": NaN}', content_type="application/json")
    )
    app = _app(alice, alice_org, kind=ServingKind.EXTERNAL, url=httpserver.url_for("/x"))
    with pytest.raises(services.CallFailed, match="not JSON"):
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"})
    assert AppCall.objects.get().status == CallStatus.FAILED
    assert wallet_balance(organization=caller).total_micros == 10_000_000


def test_a_posting_that_fails_releases_the_reservation(alice, alice_org, caller, charlie, monkeypatch):
    app = _app(alice, alice_org)

    def broken_spend(**kw):
        raise RuntimeError("database went away")

    monkeypatch.setattr(calls, "wallet_spend", broken_spend)
    with pytest.raises(services.CallFailed, match="nothing was charged") as failed:
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"}, idempotency_key="k")
    assert failed.value.code == "settle_failed"
    call = AppCall.objects.get()
    assert (call.status, call.error_code) == (CallStatus.FAILED, "settle_failed")
    assert not LedgerTransaction.objects.filter(kind="app_call").exists()
    monkeypatch.undo()
    retried = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"}, idempotency_key="k")
    assert (retried.call.pk, retried.call.attempts, retried.call.status) == (call.pk, 2, CallStatus.SUCCEEDED)
    assert wallet_balance(organization=caller).total_micros == 9_500_000


def test_an_idempotency_key_over_200_characters_is_refused_with_400(alice, alice_org, caller, charlie):
    app = _app(alice, alice_org)
    response = _client(charlie, caller).post(
        f"/api/v1/apps/{app.slug}/invoke", {"text": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 201
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"
    assert AppCall.objects.count() == 0
    ok = _client(charlie, caller).post(
        f"/api/v1/apps/{app.slug}/invoke", {"text": "a"}, format="json", HTTP_IDEMPOTENCY_KEY="k" * 200
    )
    assert ok.status_code == 200 and ok.json()["cost"] == "0.500000"
    assert AppCall.objects.get().idempotency_key == "k" * 200
    assert wallet_balance(organization=caller).total_micros == 9_500_000


def test_stale_reservations_are_released_and_stop_holding_money(alice, alice_org, charlie, settings):
    settings.APP_CALL_TIMEOUT_S = 30
    caller = charlie.organizations.get()
    wallet_top_up(organization=caller, amount_micros=600_000, idempotency_key="small")
    app = _app(alice, alice_org)
    now = timezone.now()
    old = AppCall.objects.create(
        app=app, caller=caller, request_sha256="0" * 64, price_micros=500_000, reserved_at=now - timedelta(seconds=151)
    )
    fresh = AppCall.objects.create(
        app=app, caller=caller, request_sha256="1" * 64, price_micros=50_000, reserved_at=now - timedelta(seconds=149)
    )
    with pytest.raises(services.CallRefused):  # 0.60 − 0.55 held < 0.50
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"})
    assert tasks.app_calls_release_stale() == 1
    assert tasks.app_calls_release_stale() == 0
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert (old.status, old.error_code) == (CallStatus.FAILED, "expired")
    assert fresh.status == CallStatus.RESERVED
    assert calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "b"}).call.price_micros == 500_000
    assert wallet_balance(organization=caller).total_micros == 100_000


def test_a_publisher_calling_its_own_app_pays_only_the_platforms_part(alice, alice_org):
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="t")
    app = _app(alice, alice_org)
    result = calls.app_invoke(app=app, caller=alice_org, user=alice, payload={"text": "own"})
    assert (result.call.price_micros, result.call.publisher_share_micros) == (150_000, 0)  # 0.50 less 70 %
    assert wallet_balance(organization=alice_org).total_micros == 850_000
    txn = LedgerTransaction.objects.get(kind="app_call")
    assert sorted(txn.entries.values_list("account__code", "amount_micros")) == [
        (f"org:{alice_org.pk}:paid", -150_000),
        ("system:revenue", 150_000),
    ]


def test_try_it_refuses_input_over_the_request_limit(client, alice, alice_org, caller, charlie, settings):
    settings.APP_MAX_REQUEST_BYTES = 1_000
    app = _app(alice, alice_org, price=10_000)
    client.force_login(charlie)
    url = reverse("app_try", args=[caller.slug, app.slug])
    html = client.post(url, {"payload": json.dumps({"text": "y" * 2_000})}).content.decode()
    assert "The request exceeds 1000 bytes." in html
    assert AppCall.objects.count() == 0
    ok = client.post(url, {"payload": json.dumps({"text": "y" * 900})}).content.decode()
    assert 'data-testid="try-output"' in ok
    nan = client.post(url, {"payload": '{"text": NaN}'}).content.decode()
    assert "NaN and Infinity are not JSON numbers." in nan
    assert AppCall.objects.count() == 1 and wallet_balance(organization=caller).total_micros == 9_990_000


def test_call_errors_reach_the_chinese_console_in_chinese(client, alice, alice_org, charlie):
    """The refusals come from the services; they are translated like the rest of the console."""
    app = _app(alice, alice_org)
    client.force_login(charlie)
    url = reverse("app_try", args=[charlie.organizations.get().slug, app.slug])
    html = client.post(url, {"payload": "{}"}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "输入不符合应用的模式（位置 $）" in html
    broke = client.post(url, {"payload": '{"text": "a"}'}, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "钱包余额不足以支付本次调用（0.500000 元），请先充值。" in broke
    assert AppCall.objects.count() == 0
