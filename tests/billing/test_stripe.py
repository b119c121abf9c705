"""Top-ups through Stripe Checkout and the webhook handler.

Stripe's servers are the one boundary replaced: Checkout Session creation goes to a local HTTP
stand-in (pytest-httpserver) through the official ``stripe`` client, and webhooks are signed here the
documented way (``t=<ts>,v1=HMAC-SHA256(secret, "<ts>.<payload>")``) and verified by the real library.
A real Stripe account would add: actual card payment, Stripe's retry schedule, and its event ordering.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from billing.choices import StripeEventStatus, TopUpStatus
from billing.models import LedgerTransaction, StripeEvent, TopUp
from billing.payments import TopUpError, topup_create
from billing.selectors import wallet_balance
from billing.services import wallet_spend

SECRET = "whsec_test_secret"


@pytest.fixture
def stripe_settings(settings, httpserver):
    settings.STRIPE_SECRET_KEY = "sk_test_123"
    settings.STRIPE_WEBHOOK_SECRET = SECRET
    settings.STRIPE_API_BASE = httpserver.url_for("").rstrip("/")
    return httpserver


def _session_handler(request):
    from werkzeug import Response

    form = request.form
    body = {"id": f"cs_test_{form['client_reference_id']}", "object": "checkout.session",
            "url": f"https://checkout.stripe.test/{form['client_reference_id']}",
            "amount_total": int(form["line_items[0][price_data][unit_amount]"]), "currency": "cny"}
    return Response(json.dumps(body), content_type="application/json")


def _sign(payload: bytes, *, secret: str = SECRET, ts: int | None = None) -> str:
    ts = int(time.time()) if ts is None else ts
    sig = hmac.new(secret.encode(), f"{ts}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={ts},v1={sig}"


def _post(client: Client, event: dict, **kw) -> object:
    payload = json.dumps(event).encode()
    return client.post(reverse("stripe_webhook"), data=payload, content_type="application/json",
                       HTTP_STRIPE_SIGNATURE=_sign(payload, **kw))


def _completed(topup: TopUp, event_id: str = "evt_completed_1", pi: str = "pi_1") -> dict:
    return {"id": event_id, "object": "event", "type": "checkout.session.completed", "livemode": False,
            "data": {"object": {"id": topup.stripe_session_id, "object": "checkout.session",
                                "payment_status": "paid", "amount_total": topup.amount_micros // 10_000,
                                "currency": "cny", "payment_intent": pi,
                                "metadata": {"topup_id": str(topup.pk)}}}}


def _refunded(event_id: str, amount_fen: int, pi: str = "pi_1") -> dict:
    return {"id": event_id, "object": "event", "type": "charge.refunded",
            "data": {"object": {"id": "ch_1", "object": "charge", "payment_intent": pi,
                                "amount_refunded": amount_fen}}}


def _topup(alice, alice_org, httpserver, amount="100.00") -> TopUp:
    httpserver.expect_request("/v1/checkout/sessions", method="POST").respond_with_handler(_session_handler)
    return topup_create(organization=alice_org, user=alice, amount=amount,
                        success_url="http://testserver/ok", cancel_url="http://testserver/cancel")


@pytest.mark.django_db
def test_a_top_up_creates_a_checkout_session_with_our_idempotency_key(alice, alice_org, stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    request, _ = stripe_settings.log[0]
    assert request.headers["Idempotency-Key"] == f"topup:{topup.pk}"
    assert request.form["line_items[0][price_data][unit_amount]"] == "10000"
    assert request.form["line_items[0][price_data][currency]"] == "cny"
    assert request.form["metadata[topup_id]"] == str(topup.pk)
    assert (topup.status, topup.stripe_session_id) == (TopUpStatus.CHECKOUT_OPEN, f"cs_test_{topup.pk}")
    assert topup.checkout_url == f"https://checkout.stripe.test/{topup.pk}"
    assert wallet_balance(organization=alice_org).total_micros == 0  # nothing until the webhook


@pytest.mark.django_db
@pytest.mark.parametrize(("amount", "message"), [("5.00", "between 10.00 and 100000.00"),
                                                 ("10.001", "whole fen"), ("ten", "not an amount")])
def test_bad_top_up_amounts_are_refused_and_nothing_is_created(alice, alice_org, stripe_settings, amount, message):
    with pytest.raises(TopUpError, match=message):
        topup_create(organization=alice_org, user=alice, amount=amount, success_url="x", cancel_url="y")
    assert TopUp.objects.count() == 0 and len(stripe_settings.log) == 0


@pytest.mark.django_db
def test_without_stripe_keys_the_wallet_says_top_up_is_not_configured(client, alice, alice_org, settings):
    settings.STRIPE_SECRET_KEY = ""
    client.force_login(alice)
    page = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    assert "Online top-up is not configured" in page
    response = client.post(reverse("topup_start", args=[alice_org.slug]), {"amount": "50"}, follow=True)
    assert "Online top-up is not configured" in response.content.decode()
    assert TopUp.objects.count() == 0


@pytest.mark.django_db
def test_a_webhook_delivered_twice_and_again_after_3_days_credits_once(client, alice, alice_org, stripe_settings,
                                                                       time_machine):
    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    assert _post(client, event).status_code == 200
    assert _post(client, event).status_code == 200
    time_machine.move_to(timezone.now() + timedelta(days=3))
    assert _post(client, event).status_code == 200
    # A second, different event for the same session (Stripe may send both) credits nothing more.
    assert _post(client, {**event, "id": "evt_completed_2"}).status_code == 200
    assert wallet_balance(organization=alice_org).paid_micros == 100_000_000
    assert LedgerTransaction.objects.filter(kind="top_up").count() == 1
    topup.refresh_from_db()
    assert (topup.status, topup.stripe_payment_intent) == (TopUpStatus.PAID, "pi_1")
    assert list(StripeEvent.objects.order_by("id").values_list("event_id", "status", "attempts")) == [
        ("evt_completed_1", "processed", 1), ("evt_completed_2", "processed", 1)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL for real concurrent requests")
def test_a_webhook_delivered_twice_concurrently_credits_once(alice, alice_org, stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    barrier = threading.Barrier(2)
    codes: list[int] = []

    def deliver() -> None:
        barrier.wait()
        codes.append(_post(Client(), event).status_code)
        connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert codes == [200, 200]
    assert wallet_balance(organization=alice_org).paid_micros == 100_000_000
    assert LedgerTransaction.objects.filter(kind="top_up").count() == 1


@pytest.mark.django_db
def test_a_refund_before_the_completion_event_ends_with_the_right_balance(client, alice, alice_org, stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    assert _post(client, _refunded("evt_refund_1", 3_000)).status_code == 200  # 30.00 refunded first
    assert wallet_balance(organization=alice_org).paid_micros == 0
    assert _post(client, _completed(topup)).status_code == 200
    assert wallet_balance(organization=alice_org).paid_micros == 70_000_000
    # A later cumulative refund event (total 50.00) debits only the difference; a replay nothing.
    _post(client, _refunded("evt_refund_2", 5_000))
    _post(client, _refunded("evt_refund_2", 5_000))
    _post(client, _refunded("evt_refund_1", 3_000))  # old event delivered late
    assert wallet_balance(organization=alice_org).paid_micros == 50_000_000
    topup.refresh_from_db()
    assert (topup.refunded_micros, topup.unrecovered_micros) == (50_000_000, 0)


@pytest.mark.django_db
def test_a_refund_of_spent_money_never_takes_the_balance_below_zero(client, alice, alice_org, stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    _post(client, _completed(topup))
    wallet_spend(organization=alice_org, amount_micros=80_000_000, idempotency_key="spend")
    _post(client, _refunded("evt_refund_1", 10_000))
    assert wallet_balance(organization=alice_org).paid_micros == 0
    topup.refresh_from_db()
    assert (topup.refunded_micros, topup.unrecovered_micros) == (100_000_000, 80_000_000)


@pytest.mark.django_db
@pytest.mark.parametrize("variant", ["tampered", "wrong_secret", "stale", "missing"])
def test_a_bad_signature_or_stale_timestamp_is_refused_and_changes_nothing(client, alice, alice_org,
                                                                            stripe_settings, variant):
    topup = _topup(alice, alice_org, stripe_settings)
    payload = json.dumps(_completed(topup)).encode()
    header = {"tampered": _sign(payload), "wrong_secret": _sign(payload, secret="whsec_other"),
              "stale": _sign(payload, ts=int(time.time()) - 3600), "missing": None}[variant]
    body = payload.replace(b'"amount_total": 10000', b'"amount_total": 99999') if variant == "tampered" else payload
    kwargs = {"HTTP_STRIPE_SIGNATURE": header} if header else {}
    response = client.post(reverse("stripe_webhook"), data=body, content_type="application/json", **kwargs)
    assert response.status_code == 400
    assert StripeEvent.objects.count() == 0
    assert wallet_balance(organization=alice_org).total_micros == 0


@pytest.mark.django_db
def test_unknown_event_types_are_stored_and_ignored_with_200(client, db):
    event = {"id": "evt_x", "object": "event", "type": "customer.created", "data": {"object": {"id": "cus_1"}}}
    from django.conf import settings as dj

    dj.STRIPE_WEBHOOK_SECRET = SECRET
    try:
        assert _post(client, event).status_code == 200
    finally:
        dj.STRIPE_WEBHOOK_SECRET = ""
    assert StripeEvent.objects.get().status == StripeEventStatus.IGNORED


@pytest.mark.django_db
def test_a_payment_whose_amount_does_not_match_is_recorded_as_failed_and_credits_nothing(client, alice, alice_org,
                                                                                          stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    event["data"]["object"]["amount_total"] = 1
    assert _post(client, event).status_code == 200
    row = StripeEvent.objects.get()
    assert row.status == StripeEventStatus.FAILED and "expected 10000 cny" in row.error
    assert wallet_balance(organization=alice_org).total_micros == 0
