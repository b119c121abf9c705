"""App calls: reservation, billing per call with the publisher's share, idempotent retries, failures,
schema errors, licenses, and outsiders.

External endpoints are a local HTTP server (pytest-httpserver) standing in for the publisher's HTTPS
service; a real deployment adds TLS and the publisher's own latency.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone
from rest_framework.test import APIClient
from werkzeug import Response

from billing.models import LedgerEntry, LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_spend, wallet_top_up
from portal.choices import TokenScope
from portal.marketplace import calls, services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.services import api_token_create

pytestmark = pytest.mark.django_db
SCHEMA_IN = {
    "type": "object",
    "required": ["text"],
    "properties": {"text": {"type": "string", "maxLength": 50}},
    "additionalProperties": False,
}
SCHEMA_OUT = {"type": "object", "required": ["output"]}


@pytest.fixture
def caller(charlie):
    org = charlie.organizations.get()
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="caller-topup")
    return org


def _app(
    alice,
    alice_org,
    *,
    kind=ServingKind.ECHO,
    url="",
    price=500_000,
    visibility=AppVisibility.PUBLIC,
    lineage=None,
    settings=None,
):
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Contract review",
        category="legal",
        description="Finds risky clauses.",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=price,
        visibility=visibility,
    )
    version, secret = services.app_version_add(app=app, user=alice, kind=kind, endpoint_url=url, lineage=lineage)
    return app, version, secret


def _publish(app, alice):
    if app.visibility == AppVisibility.PUBLIC:
        services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
        services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    else:
        services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)
    app.refresh_from_db()
    return app


def _api(user, org) -> APIClient:
    client = APIClient()
    token = api_token_create(user=user, organization=org, name="t", scope=TokenScope.WRITE)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    return client


def test_a_call_is_charged_once_and_the_publisher_gets_its_share_in_the_same_transaction(
    alice, alice_org, caller, charlie
):
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    response = _api(charlie, caller).post(
        f"/api/v1/apps/{app.slug}/invoke", {"text": "第一条 合同"}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["output"] == {"output": {"text": "第一条 合同"}} and body["cost"] == "0.500000"
    assert wallet_balance(organization=caller).total_micros == 9_500_000
    assert wallet_balance(organization=alice_org).paid_micros == 350_000  # 70 %
    txn = LedgerTransaction.objects.get(kind="app_call")
    legs = sorted(txn.entries.values_list("account__code", "amount_micros"))
    assert legs == sorted(
        [(f"org:{caller.pk}:paid", -500_000), (f"org:{alice_org.pk}:paid", 350_000), ("system:revenue", 150_000)]
    )
    assert LedgerEntry.objects.aggregate(s=Sum("amount_micros"))["s"] == 0


def test_retries_with_the_same_key_run_and_cost_once_even_after_an_injected_failure(alice, alice_org, caller, charlie):
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    with pytest.raises(services.CallFailed, match="nothing was charged"):
        calls.app_invoke(
            app=app,
            caller=caller,
            user=charlie,
            payload={"text": "a"},
            idempotency_key="k",
            fail_after_reserve=RuntimeError("worker crashed after reserving"),
        )
    assert AppCall.objects.get().status == CallStatus.FAILED
    assert wallet_balance(organization=caller).total_micros == 10_000_000
    first = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"}, idempotency_key="k")
    again = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"}, idempotency_key="k")
    assert (first.replayed, again.replayed) == (False, True)
    assert first.call.pk == again.call.pk and again.call.attempts == 2
    assert AppCall.objects.count() == 1
    assert LedgerTransaction.objects.filter(kind="app_call").count() == 1
    assert wallet_balance(organization=caller).total_micros == 9_500_000
    with pytest.raises(services.IdempotencyConflict):
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "b"}, idempotency_key="k")


def test_a_call_refused_by_the_schema_gets_422_with_the_path_and_costs_nothing(alice, alice_org, caller, charlie):
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    response = _api(charlie, caller).post(f"/api/v1/apps/{app.slug}/invoke", {"text": "x" * 51}, format="json")
    assert response.status_code == 422
    err = response.json()["error"]
    assert err["code"] == "input_invalid" and err["details"]["path"] == "$.text"
    assert "is too long" in err["message"]
    assert AppCall.objects.count() == 0 and wallet_balance(organization=caller).total_micros == 10_000_000


def test_an_oversized_body_gets_413(alice, alice_org, caller, charlie, settings):
    settings.APP_MAX_REQUEST_BYTES = 1024
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    response = _api(charlie, caller).post(f"/api/v1/apps/{app.slug}/invoke", {"text": "y" * 2000}, format="json")
    assert response.status_code == 413 and response.json()["error"]["code"] == "body_too_large"
    assert AppCall.objects.count() == 0


def test_an_external_endpoint_gets_signed_requests(alice, alice_org, caller, charlie, httpserver, settings):
    settings.APP_ALLOW_HTTP_ENDPOINTS = True
    seen = {}

    def handler(request):
        seen["sig"] = request.headers["X-Portal-Signature"]
        seen["body"] = request.get_data()
        return Response(json.dumps({"output": "risky: clause 3"}), content_type="application/json")

    httpserver.expect_request("/review", method="POST").respond_with_handler(handler)
    app, _, secret = _app(alice, alice_org, kind=ServingKind.EXTERNAL, url=httpserver.url_for("/review"))
    _publish(app, alice)
    result = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "clause 3"})
    assert result.output == {"output": "risky: clause 3"}
    ts, mac = (part.split("=", 1)[1] for part in seen["sig"].split(","))
    assert abs(int(ts) - time.time()) < 60
    assert mac == hmac.new(secret.encode(), f"{ts}.".encode() + seen["body"], hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    ("answer", "code", "status"),
    [("timeout", "backend_timeout", 504), ("500", "backend_error", 502), ("invalid", "backend_error", 502)],
)
def test_a_backend_that_fails_times_out_or_answers_invalid_output_costs_nothing(
    alice, alice_org, caller, charlie, httpserver, settings, answer, code, status
):
    settings.APP_ALLOW_HTTP_ENDPOINTS = True
    settings.APP_CALL_TIMEOUT_S = 1

    def handler(request):
        if answer == "timeout":
            time.sleep(1.5)
        if answer == "500":
            return Response("boom", status=500)
        return Response(json.dumps({"not_output": 1}), content_type="application/json")

    httpserver.expect_request("/x").respond_with_handler(handler)
    app, _, _ = _app(alice, alice_org, kind=ServingKind.EXTERNAL, url=httpserver.url_for("/x"))
    _publish(app, alice)
    response = _api(charlie, caller).post(f"/api/v1/apps/{app.slug}/invoke", {"text": "a"}, format="json")
    assert response.status_code == status and response.json()["error"]["code"] == code
    call = AppCall.objects.get()
    assert (call.status, call.error_code) == (CallStatus.FAILED, code)
    assert wallet_balance(organization=caller).total_micros == 10_000_000
    assert LedgerTransaction.objects.filter(kind="app_call").count() == 0


def test_a_call_the_wallet_cannot_cover_is_refused_with_402(alice, alice_org, charlie):
    app, _, _ = _app(alice, alice_org, price=20_000_000)
    _publish(app, alice)
    poor = charlie.organizations.get()
    response = _api(charlie, poor).post(f"/api/v1/apps/{app.slug}/invoke", {"text": "a"}, format="json")
    assert response.status_code == 402 and response.json()["error"]["code"] == "insufficient_funds"
    assert AppCall.objects.count() == 0


def test_publishing_is_refused_when_a_training_license_forbids_commercial_use_but_allowed_private(alice, alice_org):
    lineage = [
        {
            "dataset": "Legal corpus",
            "license": "Research only v1",
            "commercial_use": False,
            "derivative_models": True,
            "attribution": "Data: Legal corpus",
        }
    ]
    app, _, _ = _app(alice, alice_org, lineage=lineage)
    with pytest.raises(services.LicenseForbidsPublishing, match=r"Research only v1.*does not allow commercial use"):
        services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    app.refresh_from_db()
    assert app.state == AppState.DRAFT and app.attributions == ["Data: Legal corpus"]
    private, _, _ = _app(alice, alice_org, lineage=lineage, price=0, visibility=AppVisibility.PRIVATE)
    assert services.app_transition(app=private, to=AppState.PUBLISHED, acting_user=alice).state == AppState.PUBLISHED


def test_a_public_app_goes_live_only_after_staff_review(alice, alice_org):
    app, _, _ = _app(alice, alice_org)
    with pytest.raises(services.IllegalAppTransition, match="staff review"):
        services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=alice)


def test_outsiders_cannot_invoke_a_private_app_nor_read_another_publishers_usage(alice, alice_org, caller, charlie):
    app, _, _ = _app(alice, alice_org, visibility=AppVisibility.PRIVATE)
    _publish(app, alice)
    client = _api(charlie, caller)
    for method, url in [
        ("post", f"/api/v1/apps/{app.slug}/invoke"),
        ("get", f"/api/v1/apps/{app.slug}"),
        ("get", f"/api/v1/apps/{app.slug}/revenue"),
        ("get", f"/api/v1/apps/{app.slug}/versions"),
    ]:
        response = getattr(client, method)(url, {"text": "a"}, format="json") if method == "post" else client.get(url)
        assert response.status_code == 404, url
    assert AppCall.objects.count() == 0
    # a public app: charlie may call it, but the publisher endpoints stay 404
    public, _, _ = _app(alice, alice_org)
    _publish(public, alice)
    assert client.get(f"/api/v1/apps/{public.slug}/revenue").status_code == 404
    owner = _api(alice, alice_org).get(f"/api/v1/apps/{public.slug}/revenue").json()
    assert owner == {"app": public.slug, "calls": 0, "gross_micros": 0, "revenue_micros": 0}


def test_the_console_try_it_form_bills_like_the_api(client, alice, alice_org, caller, charlie):
    from django.urls import reverse

    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    client.force_login(charlie)
    page = client.get(reverse("app_detail", args=[caller.slug, app.slug]))
    assert page.status_code == 200 and "0.500000 CNY" in page.content.decode()
    result = client.post(
        reverse("app_try", args=[caller.slug, app.slug]), {"payload": '{"text": "hi"}'}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'data-testid="try-output"' in result and "hi" in result
    assert wallet_balance(organization=caller).total_micros == 9_500_000
    bad = client.post(reverse("app_try", args=[caller.slug, app.slug]), {"payload": '{"txt": 1}'}).content.decode()
    assert "input does not match the app&#x27;s schema at $" in bad
    assert wallet_balance(organization=caller).total_micros == 9_500_000
    listing = client.get(reverse("apps", args=[caller.slug]), {"q": "contract"}).content.decode()
    assert "Contract review" in listing


def test_app_slugs_never_hide_other_routes(alice, alice_org):
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Publish",
        category="general",
        description="",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=0,
    )
    assert app.slug == "publish-app"


def test_chinese_names_get_pinyin_slugs_and_duplicates_a_number(alice, alice_org):
    from portal.services import organization_create

    def create(name):
        return services.app_create(
            publisher=alice_org,
            user=alice,
            name=name,
            category="legal",
            description="",
            input_schema=SCHEMA_IN,
            output_schema=SCHEMA_OUT,
            price_per_call_micros=0,
        ).slug

    assert [create("法律助手"), create("法律助手"), create("医疗问答 v2"), create("!!!")] == [
        "fa-lv-zhu-shou",
        "fa-lv-zhu-shou-2",
        "yi-liao-wen-da-v2",
        "app",
    ]
    assert organization_create(name="法律团队", owner=alice).slug == "fa-lv-tuan-dui"


def test_endpoints_on_private_or_link_local_addresses_are_refused(alice, alice_org, settings):
    settings.APP_ALLOW_HTTP_ENDPOINTS = False
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Probe",
        category="general",
        description="",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=0,
    )
    for url in ["https://169.254.169.254/latest", "https://127.0.0.1/x", "https://10.0.0.8/x", "https://[::1]/x"]:
        with pytest.raises(services.MarketplaceError, match="is not a public address"):
            services.app_version_add(app=app, user=alice, kind=ServingKind.EXTERNAL, endpoint_url=url)
    assert app.versions.count() == 0


def test_a_refused_endpoint_in_the_console_creates_no_app(client, alice, alice_org, settings):
    from django.urls import reverse

    from portal.marketplace.models import App

    settings.APP_ALLOW_HTTP_ENDPOINTS = False
    client.force_login(alice)
    response = client.post(
        reverse("app_create", args=[alice_org.slug]),
        {
            "name": "bad",
            "category": "general",
            "price_per_call": "0",
            "visibility": "private",
            "input_schema": json.dumps(SCHEMA_IN),
            "output_schema": json.dumps(SCHEMA_OUT),
            "endpoint_url": "https://169.254.169.254/latest",
        },
    )
    assert response.status_code == 400 and "is not a public address" in response.content.decode()
    assert App.objects.count() == 0


def test_deep_or_huge_inputs_get_clear_errors_that_do_not_echo_the_input(alice, alice_org, caller, charlie):
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    client = _api(charlie, caller)
    deep = "[" * 30000 + "]" * 30000
    response = client.post(f"/api/v1/apps/{app.slug}/invoke", deep, content_type="application/json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_json"
    response = client.post(f"/api/v1/apps/{app.slug}/invoke", {"text": "z" * 20000}, format="json")
    assert response.status_code == 422 and len(response.content) < 1500
    assert AppCall.objects.count() == 0


def test_a_publisher_can_try_a_draft_app_and_empty_objects_are_valid_input(client, alice, alice_org):
    from django.urls import reverse

    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="t")
    app, _, _ = _app(alice, alice_org)
    client.force_login(alice)
    result = client.post(reverse("app_try", args=[alice_org.slug, app.slug]), {"payload": "{}"}).content.decode()
    assert "This field is required." not in result
    assert "$: &#x27;text&#x27; is a required property" in result
    ok = client.post(reverse("app_try", args=[alice_org.slug, app.slug]), {"payload": '{"text": "hi"}'})
    assert '"text": "hi"' in ok.content.decode().replace("&quot;", '"')


def test_an_open_reservation_holds_its_price_against_a_second_call(alice, alice_org, charlie, monkeypatch):
    caller = charlie.organizations.get()
    wallet_top_up(organization=caller, amount_micros=800_000, idempotency_key="small-topup")
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    forward = calls.serving.forward
    refused = []

    def forward_while_a_second_call_comes_in(**kw):
        with pytest.raises(services.CallRefused) as exc:  # 0.80 − 0.50 reserved leaves 0.30 < 0.50
            calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "second"}, idempotency_key="k2")
        refused.append(exc.value.status)
        return forward(**kw)

    monkeypatch.setattr(calls.serving, "forward", forward_while_a_second_call_comes_in)
    first = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "first"}, idempotency_key="k1")
    assert refused == [402]
    assert first.call.status == CallStatus.SUCCEEDED and first.call.price_micros == 500_000
    assert list(AppCall.objects.values_list("idempotency_key", "status")) == [("k1", CallStatus.SUCCEEDED)]
    assert wallet_balance(organization=caller).total_micros == 300_000
    assert wallet_balance(organization=alice_org).paid_micros == 350_000


def test_a_wallet_emptied_during_the_call_releases_it_and_charges_nothing(
    alice, alice_org, caller, charlie, monkeypatch
):
    """GPU metering may spend the wallet while a call runs: the posting then fails, the call is released."""
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    forward = calls.serving.forward

    def forward_while_metering_spends(**kw):
        wallet_spend(organization=caller, amount_micros=9_800_000, idempotency_key="gpu-usage")
        return forward(**kw)

    monkeypatch.setattr(calls.serving, "forward", forward_while_metering_spends)
    with pytest.raises(services.CallRefused, match="no longer covers"):
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "a"}, idempotency_key="k")
    call = AppCall.objects.get()
    assert (call.status, call.error_code, call.ledger_transaction_id) == (CallStatus.FAILED, "insufficient_funds", None)
    assert not LedgerTransaction.objects.filter(kind="app_call").exists()
    assert wallet_balance(organization=caller).total_micros == 200_000
    assert wallet_balance(organization=alice_org).paid_micros == 0


def test_the_monthly_cap_counts_succeeded_and_open_calls_of_this_month(alice, alice_org, caller, charlie, settings):
    settings.APP_MONTHLY_CAP_MICROS = 1_200_000
    app, _, _ = _app(alice, alice_org)
    _publish(app, alice)
    for key in ("a", "b"):
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": key}, idempotency_key=key)
    AppCall.objects.create(
        app=app,
        caller=caller,
        request_sha256="0" * 64,
        status=CallStatus.SUCCEEDED,
        price_micros=5_000_000,
        created_at=calls.month_start(timezone.now()) - timedelta(seconds=1),
    )
    with pytest.raises(services.MonthlyCapReached):  # 1.00 this month + 0.50 > 1.20; last month's 5.00 not counted
        calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": "c"}, idempotency_key="c")
    assert AppCall.objects.filter(idempotency_key="c").count() == 0
    assert wallet_balance(organization=caller).total_micros == 9_000_000


def test_a_publishers_own_calls_explain_their_cost_and_the_app_page_shows_the_ledgers_revenue(
    client, alice, alice_org, caller, charlie
):
    """Issue 25: "Try it" said "Call (0.010000 CNY)" and then "Cost 0.003000 CNY" to the publisher, and the app
    said "No revenue yet" after its calls: own calls are charged the price less the publisher's share (never
    paid out to oneself), so they earn no revenue. Both are now said with their exact amounts; the revenue
    shown is what the ledger credited to the publisher."""
    import re

    from django.urls import reverse

    def text(html, testid):
        found = re.search(rf'data-testid="{testid}">(.*?)</p>', html, re.S)
        assert found, html
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()

    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="own-calls")
    app, _, _ = _app(alice, alice_org, price=10_000)  # 0.010000 CNY a call, 70 % to the publisher
    _publish(app, alice)
    client.force_login(alice)
    detail, try_url = (
        reverse("app_detail", args=[alice_org.slug, app.slug]),
        reverse("app_try", args=[alice_org.slug, app.slug]),
    )
    page = client.get(detail).content.decode()
    assert text(page, "own-call-price") == (
        "Your own app: a call costs you its price 0.010000 CNY less your publisher share 0.007000 CNY = 0.003000 CNY; "
        "the share is left out, not paid to you, so your own calls earn no revenue."
    )
    for _ in range(4):
        result = client.post(try_url, {"payload": '{"text": "hi"}'}, HTTP_HX_REQUEST="true").content.decode()
        assert re.fullmatch(
            r"Price 0\.010000 CNY − your publisher share 0\.007000 CNY \(your own app: the share is left out, not "
            r"paid to you\) = cost 0\.003000 CNY, \d+ ms",
            text(result, "try-cost"),
        )
    assert wallet_balance(organization=alice_org).paid_micros == 1_000_000 - 4 * 3_000
    page = client.get(detail).content.decode()
    assert 'data-testid="revenue_chart-empty">No revenue yet.<' in page
    assert (
        text(page, "revenue-summary") == "Revenue in these 30 days: 0.000000 CNY from 0 calls by other organizations."
    )
    assert text(page, "revenue-own-calls") == (
        "4 calls by your own organization: charged 0.012000 CNY (the price less your publisher share); your own "
        "calls earn no revenue."
    )

    # another organization's call: the full price, 70 % credited to the publisher by the ledger
    client.force_login(charlie)
    other = client.post(
        reverse("app_try", args=[caller.slug, app.slug]), {"payload": '{"text": "hi"}'}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert re.fullmatch(r"Cost 0\.010000 CNY, \d+ ms", text(other, "try-cost"))
    foreign = client.get(reverse("app_detail", args=[caller.slug, app.slug])).content.decode()
    assert 'data-testid="revenue-summary"' not in foreign and 'data-testid="own-call-price"' not in foreign
    credited = LedgerEntry.objects.filter(
        transaction__kind="app_call", account__code=f"org:{alice_org.pk}:paid", amount_micros__gt=0
    ).aggregate(s=Sum("amount_micros"))["s"]
    assert credited == 7_000
    client.force_login(alice)
    page = client.get(detail).content.decode()
    assert text(page, "revenue-summary") == "Revenue in these 30 days: 0.007000 CNY from 1 call by other organizations."
    assert 'data-testid="revenue_chart-empty"' not in page
    assert wallet_balance(organization=alice_org).paid_micros == 1_000_000 - 4 * 3_000 + 7_000
