"""Apps priced per 1,000 tokens as well as per call: the hold, the charge for the tokens the output reports,
the allowance cap, rounding to the micro-CNY, and outputs that do not report tokens.

The app is served by an external endpoint on a local HTTP server (pytest-httpserver) standing in for the
publisher's HTTPS service; everything on the portal's side is real.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient
from werkzeug import Response

from billing.models import LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from portal.choices import TokenScope
from portal.marketplace import calls, services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.services import api_token_create

pytestmark = pytest.mark.django_db
SCHEMA_IN = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string"}, "max_new_tokens": {"type": "integer"}},
}
SCHEMA_OUT = {"type": "object", "required": ["output"]}


@pytest.fixture
def caller(charlie):
    org = charlie.organizations.get()
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="caller-topup")
    return org


@pytest.fixture
def endpoint(httpserver, settings, monkeypatch):
    """The publisher's endpoint: ``state["body"]`` is what it returns; ``state["held"]`` lists (status, price)
    of each call row as ``call_reserve`` returned it, i.e. what was held while the endpoint ran."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True
    state = {"body": {"output": "clause 3 is risky", "tokens": 37}, "held": []}
    reserve = calls.call_reserve

    def spying_reserve(**kw):
        call = reserve(**kw)
        state["held"].append([(call.status, call.price_micros)])
        return call

    monkeypatch.setattr(calls, "call_reserve", spying_reserve)

    def handler(request):
        return Response(json.dumps(state["body"]), content_type="application/json")

    httpserver.expect_request("/generate", method="POST").respond_with_handler(handler)
    state["url"] = httpserver.url_for("/generate")
    return state


def _app(alice, alice_org, url, *, per_call=100_000, per_1k=2_000_000, visibility=AppVisibility.PUBLIC, lineage=None):
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Clause finder",
        category="legal",
        description="",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=per_call,
        price_per_1k_tokens_micros=per_1k,
        visibility=visibility,
    )
    services.app_version_add(app=app, user=alice, kind=ServingKind.EXTERNAL, endpoint_url=url, lineage=lineage)
    if visibility == AppVisibility.PUBLIC:
        services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
        return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)


def test_a_call_holds_its_token_allowance_and_is_charged_for_the_tokens_reported(
    alice, alice_org, caller, charlie, endpoint
):
    app = _app(alice, alice_org, endpoint["url"])
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION="Bearer "
        + api_token_create(user=charlie, organization=caller, name="t", scope=TokenScope.WRITE).plaintext
    )
    response = client.post(f"/api/v1/apps/{app.slug}/invoke", {"text": "第三条", "max_new_tokens": 100}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    # held while running: 0.10 + 2.00 × 100 / 1000 = 0.30 CNY
    assert endpoint["held"] == [[(CallStatus.RESERVED, 300_000)]]
    # charged: 0.10 + 2.00 × 37 / 1000 = 0.174 CNY, 70 % of it to the publisher
    assert (body["cost"], body["billed_tokens"]) == ("0.174000", 37)
    call = AppCall.objects.get()
    assert (call.status, call.price_micros, call.publisher_share_micros, call.billed_tokens) == (
        CallStatus.SUCCEEDED,
        174_000,
        121_800,
        37,
    )
    assert wallet_balance(organization=caller).total_micros == 9_826_000
    assert wallet_balance(organization=alice_org).paid_micros == 121_800
    txn = LedgerTransaction.objects.get(kind="app_call")
    assert sorted(txn.entries.values_list("account__code", "amount_micros")) == sorted(
        [(f"org:{caller.pk}:paid", -174_000), (f"org:{alice_org.pk}:paid", 121_800), ("system:revenue", 52_200)]
    )
    assert txn.metadata["tokens"] == 37
    assert client.get("/api/v1/apps/calls").json()["results"][0]["billed_tokens"] == 37
    assert client.get(f"/api/v1/apps/{app.slug}").json()["price_per_1k_tokens"] == "2.000000"


def test_tokens_beyond_the_allowance_are_not_charged(alice, alice_org, caller, charlie, endpoint):
    endpoint["body"] = {"output": "long answer", "tokens": 150}
    app = _app(alice, alice_org, endpoint["url"])
    result = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a", "max_new_tokens": 100})
    assert (result.call.billed_tokens, result.call.price_micros) == (100, 300_000)
    assert wallet_balance(organization=caller).total_micros == 9_700_000


def test_without_max_new_tokens_the_allowance_is_the_setting_and_charges_round_up(
    alice, alice_org, caller, charlie, endpoint, settings
):
    settings.APP_MAX_BILLED_TOKENS = 500
    endpoint["body"] = {"output": "x", "tokens": 1}
    app = _app(alice, alice_org, endpoint["url"], per_call=0, per_1k=1_500)
    result = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"})
    assert endpoint["held"] == [[(CallStatus.RESERVED, 750)]]  # 1,500 micros × 500 / 1000
    assert (result.call.billed_tokens, result.call.price_micros) == (1, 2)  # 1.5 micros rounded up
    assert wallet_balance(organization=caller).total_micros == 9_999_998
    assert wallet_balance(organization=alice_org).paid_micros == 1  # 70 % of 2 micros, rounded down


def test_an_output_without_a_token_count_is_invalid_and_costs_nothing(alice, alice_org, caller, charlie, endpoint):
    endpoint["body"] = {"output": "no count"}
    app = _app(alice, alice_org, endpoint["url"])
    with pytest.raises(services.CallFailed, match="no integer `tokens` count"):
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a", "max_new_tokens": 10})
    call = AppCall.objects.get()
    assert (call.status, call.error_code, call.billed_tokens) == (CallStatus.FAILED, "backend_error", None)
    assert not LedgerTransaction.objects.filter(kind="app_call").exists()
    assert wallet_balance(organization=caller).total_micros == 10_000_000


def test_a_token_price_alone_makes_an_app_paid_for_the_license_check(alice, alice_org, endpoint):
    lineage = [
        {
            "dataset": "Legal corpus",
            "license": "Research only v1",
            "commercial_use": False,
            "derivative_models": True,
            "attribution": "",
        }
    ]
    with pytest.raises(services.LicenseForbidsPublishing, match="does not allow commercial use"):
        _app(
            alice,
            alice_org,
            endpoint["url"],
            per_call=0,
            per_1k=1_000,
            visibility=AppVisibility.PRIVATE,
            lineage=lineage,
        )
