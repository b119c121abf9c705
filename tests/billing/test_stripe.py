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
from billing.payments import TopUpError, stripe_event_handle, stripe_event_record, topup_create
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
    body = {
        "id": f"cs_test_{form['client_reference_id']}",
        "object": "checkout.session",
        "url": f"https://checkout.stripe.test/{form['client_reference_id']}",
        "amount_total": int(form["line_items[0][price_data][unit_amount]"]),
        "currency": "cny",
    }
    return Response(json.dumps(body), content_type="application/json")


def _sign(payload: bytes, *, secret: str = SECRET, ts: int | None = None) -> str:
    ts = int(time.time()) if ts is None else ts
    sig = hmac.new(secret.encode(), f"{ts}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={ts},v1={sig}"


def _post(client: Client, event: dict, **kw) -> object:
    payload = json.dumps(event).encode()
    return client.post(
        reverse("stripe_webhook"),
        data=payload,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=_sign(payload, **kw),
    )


def _completed(topup: TopUp, event_id: str = "evt_completed_1", pi: str = "pi_1") -> dict:
    return {
        "id": event_id,
        "object": "event",
        "type": "checkout.session.completed",
        "livemode": False,
        "data": {
            "object": {
                "id": topup.stripe_session_id,
                "object": "checkout.session",
                "payment_status": "paid",
                "amount_total": topup.amount_micros // 10_000,
                "currency": "cny",
                "payment_intent": pi,
                "client_reference_id": str(topup.pk),
                "metadata": {"topup_id": str(topup.pk), "organization_id": str(topup.organization_id)},
            }
        },
    }


def _refunded(event_id: str, amount_fen: int, pi: str = "pi_1") -> dict:
    return {
        "id": event_id,
        "object": "event",
        "type": "charge.refunded",
        "data": {"object": {"id": "ch_1", "object": "charge", "payment_intent": pi, "amount_refunded": amount_fen}},
    }


def _topup(alice, alice_org, httpserver, amount="100.00") -> TopUp:
    httpserver.expect_request("/v1/checkout/sessions", method="POST").respond_with_handler(_session_handler)
    return topup_create(
        organization=alice_org,
        user=alice,
        amount=amount,
        success_url="http://testserver/ok",
        cancel_url="http://testserver/cancel",
    )


@pytest.mark.django_db
def test_a_top_up_creates_a_checkout_session_with_our_idempotency_key(alice, alice_org, stripe_settings):
    topup = _topup(alice, alice_org, stripe_settings)
    request, _ = stripe_settings.log[0]
    assert request.headers["Idempotency-Key"] == f"topup:{topup.stripe_key_uuid}" == topup.idempotency_key
    assert request.form["line_items[0][price_data][unit_amount]"] == "10000"
    assert request.form["line_items[0][price_data][currency]"] == "cny"
    assert request.form["metadata[topup_id]"] == str(topup.pk)
    assert (topup.status, topup.stripe_session_id) == (TopUpStatus.CHECKOUT_OPEN, f"cs_test_{topup.pk}")
    assert topup.checkout_url == f"https://checkout.stripe.test/{topup.pk}"
    assert wallet_balance(organization=alice_org).total_micros == 0  # nothing until the webhook


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("amount", "message"), [("5.00", "between 10.00 and 100000.00"), ("10.001", "whole fen"), ("ten", "not an amount")]
)
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
def test_a_webhook_delivered_twice_and_again_after_3_days_credits_once(
    client, alice, alice_org, stripe_settings, time_machine
):
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
        ("evt_completed_1", "processed", 1),
        ("evt_completed_2", "processed", 1),
    ]


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
def test_a_bad_signature_or_stale_timestamp_is_refused_and_changes_nothing(
    client, alice, alice_org, stripe_settings, variant
):
    topup = _topup(alice, alice_org, stripe_settings)
    payload = json.dumps(_completed(topup)).encode()
    header = {
        "tampered": _sign(payload),
        "wrong_secret": _sign(payload, secret="whsec_other"),
        "stale": _sign(payload, ts=int(time.time()) - 3600),
        "missing": None,
    }[variant]
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
def test_a_payment_whose_amount_does_not_match_is_recorded_as_failed_and_credits_nothing(
    client, alice, alice_org, stripe_settings
):
    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    event["data"]["object"]["amount_total"] = 1
    assert _post(client, event).status_code == 200
    row = StripeEvent.objects.get()
    assert row.status == StripeEventStatus.FAILED
    assert row.error == f"mismatch: top-up {topup.pk}: paid 1 cny, expected 10000 cny"
    assert wallet_balance(organization=alice_org).total_micros == 0


# --- events matched to what the portal created (issue 15) ------------------------------------------------


def _event(event_id: str, kind: str, obj: dict) -> dict:
    return {"id": event_id, "object": "event", "type": kind, "data": {"object": obj}}


def _handle(event: dict) -> StripeEvent:
    row, _ = stripe_event_record(event=event)
    return stripe_event_handle(row=row)


def _balances(*orgs) -> list[int]:
    return [wallet_balance(organization=org).paid_micros for org in orgs]


@pytest.mark.django_db
def test_a_completion_of_alices_session_naming_charlies_top_up_credits_nobody(
    client, alice, alice_org, charlie, stripe_settings, ledger_invariants
):
    from portal.models import AuditEvent
    from portal.selectors import organization_for_user

    charlie_org = organization_for_user(user=charlie)
    ann = _topup(alice, alice_org, stripe_settings)
    ben = topup_create(
        organization=charlie_org, user=charlie, amount="100.00", success_url="http://t/ok", cancel_url="http://t/no"
    )
    forged = _completed(ann, pi="pi_ann")
    forged["data"]["object"]["metadata"] = {"topup_id": str(ben.pk), "organization_id": str(charlie_org.pk)}
    assert _post(client, forged).status_code == 200
    row = StripeEvent.objects.get(event_id="evt_completed_1")
    assert (row.status, row.error) == (
        StripeEventStatus.FAILED,
        f"mismatch: session {ann.stripe_session_id}: metadata names top-up '{ben.pk}',"
        f" the session is top-up {ann.pk}'s",
    )
    audit = AuditEvent.objects.get(action="billing.stripe_event_rejected")
    assert (audit.organization_id, audit.extra["event_id"], audit.extra["reason"]) == (
        alice_org.pk,
        "evt_completed_1",
        row.error.removeprefix("mismatch: "),
    )
    assert _balances(alice_org, charlie_org) == [0, 0]
    ann.refresh_from_db()
    ben.refresh_from_db()
    assert (ann.status, ann.stripe_payment_intent, ben.status, ben.stripe_payment_intent) == (
        TopUpStatus.CHECKOUT_OPEN,
        None,
        TopUpStatus.CHECKOUT_OPEN,
        None,
    )
    # A later refund of that payment finds no credited top-up: nobody is debited.
    _post(client, _refunded("evt_refund_ann", 10_000, pi="pi_ann"))
    assert _balances(alice_org, charlie_org) == [0, 0]
    assert LedgerTransaction.objects.count() == 0
    ledger_invariants()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"id": "cs_unknown"}, "session 'cs_unknown' is not a checkout session created by this portal"),
        ({"client_reference_id": "999"}, "client_reference_id '999' is not top-up {pk}"),
        ({"metadata": {"topup_id": "{pk}", "organization_id": "999"}}, "metadata names organization '999'"),
        ({"currency": "usd"}, "paid 10000 usd, expected 10000 cny"),
    ],
)
def test_a_completion_that_differs_from_the_stored_top_up_is_a_failed_event(
    alice, alice_org, stripe_settings, change, reason, ledger_invariants
):
    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    fill = {
        k: ({kk: vv.format(pk=topup.pk) for kk, vv in v.items()} if isinstance(v, dict) else v)
        for k, v in change.items()
    }
    event["data"]["object"].update(fill)
    row = _handle(event)
    assert row.status == StripeEventStatus.FAILED and reason.format(pk=topup.pk) in row.error
    assert wallet_balance(organization=alice_org).total_micros == 0
    assert LedgerTransaction.objects.count() == 0
    ledger_invariants()


@pytest.mark.django_db
def test_staff_see_a_rejected_event_and_its_reason_in_the_admin(client, alice, alice_org, stripe_settings):
    from portal.models import User

    topup = _topup(alice, alice_org, stripe_settings)
    event = _completed(topup)
    event["data"]["object"]["id"] = "cs_forged"
    _handle(event)
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    page = client.get(reverse("admin:billing_stripeevent_changelist") + "?status__exact=failed").content.decode()
    assert "evt_completed_1" in page
    assert "mismatch: session &#x27;cs_forged&#x27; is not a checkout session created by this portal" in page


@pytest.mark.django_db
def test_an_async_payment_failure_marks_the_top_up_failed(alice, alice_org, stripe_settings, ledger_invariants):
    topup = _topup(alice, alice_org, stripe_settings)
    obj = {**_completed(topup)["data"]["object"], "payment_status": "unpaid"}
    assert _handle(_event("evt_pending", "checkout.session.completed", obj)).status == StripeEventStatus.IGNORED
    row = _handle(_event("evt_failed", "checkout.session.async_payment_failed", obj))
    assert row.status == StripeEventStatus.PROCESSED
    topup.refresh_from_db()
    assert (topup.status, topup.error) == (
        TopUpStatus.FAILED,
        "the payment failed (checkout.session.async_payment_failed)",
    )
    assert wallet_balance(organization=alice_org).total_micros == 0
    ledger_invariants()


def _dispute(event_id: str, kind: str, status: str = "needs_response", amount_fen: int = 10_000) -> dict:
    return _event(
        event_id,
        kind,
        {"id": "dp_1", "object": "dispute", "payment_intent": "pi_1", "amount": amount_fen, "status": status},
    )


@pytest.mark.django_db
def test_a_won_dispute_gives_the_money_back_and_a_lost_one_stays_debited(
    alice, alice_org, stripe_settings, ledger_invariants
):
    topup = _topup(alice, alice_org, stripe_settings)
    _handle(_completed(topup))
    _handle(_dispute("evt_d1", "charge.dispute.created"))
    assert wallet_balance(organization=alice_org).paid_micros == 0
    _handle(_dispute("evt_d2", "charge.dispute.closed", "won"))
    _handle(_dispute("evt_d3", "charge.dispute.created"))  # late redelivery of the opening: nothing
    assert wallet_balance(organization=alice_org).paid_micros == 100_000_000
    topup.refresh_from_db()
    assert (topup.refunded_micros, topup.unrecovered_micros) == (0, 0)
    assert sorted(LedgerTransaction.objects.values_list("idempotency_key", flat=True)) == [
        "dispute:dp_1:100000000",
        "dispute:dp_1:won",
        f"topup:{topup.pk}",
    ]
    ledger_invariants()


@pytest.mark.django_db
def test_a_lost_dispute_stays_debited_and_a_won_one_of_spent_money_credits_only_what_was_taken(
    alice, alice_org, stripe_settings, ledger_invariants
):
    topup = _topup(alice, alice_org, stripe_settings)
    _handle(_completed(topup))
    wallet_spend(organization=alice_org, amount_micros=60_000_000, idempotency_key="spend")
    _handle(_dispute("evt_d1", "charge.dispute.created"))
    topup.refresh_from_db()
    assert (wallet_balance(organization=alice_org).paid_micros, topup.unrecovered_micros) == (0, 60_000_000)
    _handle(_dispute("evt_lost", "charge.dispute.closed", "lost"))
    assert wallet_balance(organization=alice_org).paid_micros == 0
    _handle(_dispute("evt_won", "charge.dispute.closed", "won"))  # e.g. reversed on appeal
    topup.refresh_from_db()
    assert wallet_balance(organization=alice_org).paid_micros == 40_000_000
    assert (topup.refunded_micros, topup.unrecovered_micros) == (0, 0)
    ledger_invariants()


@pytest.mark.django_db
def test_the_sweep_applies_a_reversal_left_unapplied_for_a_paid_payment(
    alice, alice_org, stripe_settings, ledger_invariants
):
    from billing.models import PaymentReversal
    from billing.payments import payment_reversals_sweep

    topup = _topup(alice, alice_org, stripe_settings)
    _handle(_completed(topup))
    # As a lost race on the old code left it: a refund recorded, never applied.
    PaymentReversal.objects.create(payment_intent="pi_1", reference="refund:ch_1", target_micros=100_000_000)
    assert wallet_balance(organization=alice_org).paid_micros == 100_000_000
    assert payment_reversals_sweep() == 1
    assert payment_reversals_sweep() == 0
    assert wallet_balance(organization=alice_org).paid_micros == 0
    topup.refresh_from_db()
    assert topup.refunded_micros == 100_000_000
    ledger_invariants()


# --- Idempotency-Key on the API, Stripe keys unique across databases -------------------------------------


def _api_topup(user, org, key: str | None, amount: str = "200.00"):
    from rest_framework.test import APIClient

    from portal.choices import TokenScope
    from portal.services import api_token_create

    api = APIClient()
    token = api_token_create(user=user, organization=org, name="t", scope=TokenScope.WRITE)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}
    return api.post(
        "/api/v1/wallet/top-ups",
        {"amount": amount, "success_url": "https://x.test/ok", "cancel_url": "https://x.test/no"},
        format="json",
        **headers,
    )


@pytest.mark.django_db
def test_a_retried_top_up_with_the_same_idempotency_key_returns_the_same_top_up(
    alice, alice_org, charlie, stripe_settings
):
    stripe_settings.expect_request("/v1/checkout/sessions", method="POST").respond_with_handler(_session_handler)
    first = _api_topup(alice, alice_org, "retry-1")
    again = _api_topup(alice, alice_org, "retry-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert TopUp.objects.count() == 1 and len(stripe_settings.log) == 1  # one Checkout Session
    other = _api_topup(alice, alice_org, "retry-1", amount="300.00")
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert TopUp.objects.count() == 1 and len(stripe_settings.log) == 1
    from portal.selectors import organization_for_user

    theirs = _api_topup(charlie, organization_for_user(user=charlie), "retry-1")  # keys are per organization
    assert theirs.status_code == 201 and theirs.json()["id"] != first.json()["id"]
    assert _api_topup(alice, alice_org, None).status_code == 201  # no key: a new top-up each time
    assert TopUp.objects.count() == 3


@pytest.mark.django_db
def test_a_top_up_that_died_before_stripe_answered_is_resumed_by_the_retry(alice, alice_org, stripe_settings):
    stripe_settings.expect_request("/v1/checkout/sessions", method="POST").respond_with_handler(_session_handler)
    from billing.payments import topup_create_once

    topup = TopUp.objects.create(
        organization=alice_org, user=alice, amount_micros=200_000_000, request_key="k", request_sha256=""
    )
    from portal.marketplace.services import request_hash

    TopUp.objects.filter(pk=topup.pk).update(
        idempotency_key=f"topup:{topup.stripe_key_uuid}",
        request_sha256=request_hash(
            {"amount_micros": 200_000_000, "success_url": "https://x.test/ok", "cancel_url": "https://x.test/no"}
        ),
    )
    result = topup_create_once(
        organization=alice_org,
        user=alice,
        amount="200.00",
        success_url="https://x.test/ok",
        cancel_url="https://x.test/no",
        idempotency_key="k",
    )
    assert (result.replayed, result.topup.pk, result.topup.status) == (True, topup.pk, TopUpStatus.CHECKOUT_OPEN)
    assert stripe_settings.log[0][0].headers["Idempotency-Key"] == f"topup:{topup.stripe_key_uuid}"


@pytest.mark.django_db
def test_stripe_idempotency_keys_differ_between_databases_with_the_same_row_ids(alice, alice_org, stripe_settings):
    first = _topup(alice, alice_org, stripe_settings)
    TopUp.objects.all().delete()  # as a restored or staging copy reusing the row id
    from django.db import connection as conn

    if conn.vendor == "postgresql":
        with conn.cursor() as cur:
            cur.execute("SELECT setval(pg_get_serial_sequence('billing_topup', 'id'), %s, false)", [first.pk])
    else:
        with conn.cursor() as cur:
            cur.execute("UPDATE sqlite_sequence SET seq = %s WHERE name = 'billing_topup'", [first.pk - 1])
    second = _topup(alice, alice_org, stripe_settings)
    assert second.pk == first.pk
    keys = [request.headers["Idempotency-Key"] for request, _ in stripe_settings.log]
    assert keys[0] != keys[1] and all(k.startswith("topup:") and len(k) == 42 for k in keys)


# --- every event of one payment serialized (PostgreSQL, slowed commit) ----------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks and pg_sleep")
@pytest.mark.parametrize("first", ["completion", "refund"])
def test_a_refund_racing_the_completion_is_applied_in_either_order(
    alice, alice_org, stripe_settings, first, ledger_invariants
):
    """The first event's commit is held 1.5 s by a deferred trigger (``pg_sleep``); the second event is
    delivered while it waits. Either order ends with the full refund applied once."""
    topup = _topup(alice, alice_org, stripe_settings)
    table = {"completion": "billing_ledgertransaction", "refund": "billing_paymentreversal"}[first]
    events = {"completion": _completed(topup), "refund": _refunded("evt_refund_1", 10_000)}
    with connection.cursor() as cur:
        cur.execute(
            "CREATE OR REPLACE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$"
        )
        cur.execute(
            f"CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON {table} DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit()"
        )
    try:

        def deliver(event: dict) -> None:
            try:
                _handle(event)
            finally:
                connections.close_all()

        a = threading.Thread(target=deliver, args=(events[first],))
        a.start()
        with connection.cursor() as cur:  # wait until the first event sits in its slowed commit
            for _ in range(600):
                cur.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
                if cur.fetchone()[0]:
                    break
                time.sleep(0.01)
        second = "refund" if first == "completion" else "completion"
        b = threading.Thread(target=deliver, args=(events[second],))
        b.start()
        a.join(30)
        b.join(30)
    finally:
        with connection.cursor() as cur:
            cur.execute(f"DROP TRIGGER IF EXISTS test_slow_commit ON {table}")
    assert wallet_balance(organization=alice_org).paid_micros == 0
    assert sorted(LedgerTransaction.objects.values_list("idempotency_key", "kind")) == [
        ("refund:ch_1:100000000", "refund"),
        (f"topup:{topup.pk}", "top_up"),
    ]
    topup.refresh_from_db()
    assert (topup.status, topup.refunded_micros, topup.unrecovered_micros) == (TopUpStatus.PAID, 100_000_000, 0)
    assert set(StripeEvent.objects.values_list("status", flat=True)) == {"processed"}
    ledger_invariants()


# --- a Checkout Session created by Stripe whose answer timed out (issue 30) -----------------------------


@pytest.mark.django_db
def test_a_top_up_whose_stripe_call_timed_out_is_recovered_by_the_retry_with_the_same_key(
    alice, alice_org, stripe_settings, settings
):
    """Only Stripe's servers are replaced (a local stand-in behind the real ``stripe`` client): during the
    outage the stand-in creates the session but answers after the client's deadline, as Stripe does when the
    response is lost; afterwards it answers a request with a known ``Idempotency-Key`` with the session saved
    for that key (https://docs.stripe.com/api/idempotent_requests). The partner's retry with the same API
    ``Idempotency-Key`` gets the same top-up, now with Stripe's session; one session exists at Stripe."""
    from werkzeug import Response

    from billing.payments import topup_create_once
    from billing.stripe_gateway import StripeOutcomeUnknown

    settings.STRIPE_TIMEOUT_S = 0.3
    sessions: dict[str, dict] = {}
    outage = threading.Event()
    outage.set()

    def stripe_like(request):
        key = request.headers["Idempotency-Key"]
        if key not in sessions:
            body = json.loads(_session_handler(request).get_data())
            body["id"] = f"cs_test_{len(sessions) + 1}"
            sessions[key] = body
        if outage.is_set():
            time.sleep(0.6)  # past the client's deadline: the session exists, the answer is lost
        return Response(json.dumps(sessions[key]), content_type="application/json")

    stripe_settings.expect_request("/v1/checkout/sessions", method="POST").respond_with_handler(stripe_like)
    kwargs = {
        "organization": alice_org,
        "user": alice,
        "amount": "200.00",
        "success_url": "https://x.test/ok",
        "cancel_url": "https://x.test/no",
        "idempotency_key": "partner-1",
    }
    with pytest.raises(StripeOutcomeUnknown):
        topup_create_once(**kwargs)
    topup = TopUp.objects.get()
    assert (topup.status, topup.stripe_session_id) == (TopUpStatus.CREATED, None)  # not failed: outcome unknown
    assert topup.error.startswith("Stripe did not answer in time")
    outage.clear()
    result = topup_create_once(**kwargs)
    assert (result.replayed, result.topup.pk, result.topup.status) == (True, topup.pk, TopUpStatus.CHECKOUT_OPEN)
    assert (result.topup.stripe_session_id, result.topup.checkout_url, result.topup.error) == (
        "cs_test_1",
        f"https://checkout.stripe.test/{topup.pk}",
        "",
    )
    assert len(sessions) == 1 and TopUp.objects.count() == 1
    keys = {request.headers["Idempotency-Key"] for request, _ in stripe_settings.log}
    assert keys == {f"topup:{topup.stripe_key_uuid}"}
    assert wallet_balance(organization=alice_org).paid_micros == 0  # nothing credited before the webhook


@pytest.mark.django_db
def test_a_top_up_that_stripe_refused_is_failed_and_the_retry_returns_it(alice, alice_org, stripe_settings):
    """Stripe's servers replaced by a stand-in answering 400 (a definitive refusal: no session exists)."""
    from billing.payments import topup_create_once
    from billing.stripe_gateway import StripeOutcomeUnknown, StripeUnavailable

    stripe_settings.expect_request("/v1/checkout/sessions", method="POST").respond_with_json(
        {"error": {"type": "invalid_request_error", "message": "bad currency"}}, status=400
    )
    kwargs = {
        "organization": alice_org,
        "user": alice,
        "amount": "200.00",
        "success_url": "https://x.test/ok",
        "cancel_url": "https://x.test/no",
        "idempotency_key": "partner-2",
    }
    with pytest.raises(StripeUnavailable) as refused:
        topup_create_once(**kwargs)
    assert not isinstance(refused.value, StripeOutcomeUnknown)
    again = topup_create_once(**kwargs)
    assert (again.replayed, again.topup.status) == (True, TopUpStatus.FAILED)
    assert len(stripe_settings.log) == 1  # the refusal is final: Stripe is not asked again
