"""Sending: a receiver that is down gets the event once it is back (retries with backoff, every attempt
recorded), signatures verify with Stripe's own library, rotation keeps deliveries valid, the retry window ends
in ``failed``, redelivery, and ``webhook_emit``'s promises (one query, never raises, nothing on rollback).

Time is frozen and moved with time-machine; the sweep (what beat runs) drives the retries. No sleeping."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import stripe
import time_machine
from django.db import transaction
from django.test import Client
from werkzeug import Request, Response

from portal.models import AuditEvent
from portal.webhooks import tasks
from portal.webhooks.choices import DeliveryStatus
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEvent
from portal.webhooks.services import webhook_emit, webhook_endpoint_rotate

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)
DATA = {"instance_id": 7, "name": "llama", "from": "running", "to": "stopped", "reason": "finished"}


def _receiver(httpserver, answers, secrets=None):
    """Serve ``/hook`` answering ``answers`` in turn; verify every request with ``stripe.WebhookSignature``
    against each of ``secrets`` (when given). Returns (accepted: {event id: [bodies]}, received: [requests])."""
    accepted: dict[str, list[dict]] = {}
    received: list[dict] = []
    codes = iter(answers)

    def handler(request: Request) -> Response:
        body = request.get_data(as_text=True)
        header = request.headers["Webhook-Signature"]
        for secret in secrets or []:
            stripe.WebhookSignature.verify_header(body, header, secret, 300)  # raises on a bad signature
        received.append(
            {
                "id": request.headers["Webhook-Id"],
                "event": request.headers["Webhook-Event"],
                "signature": header,
                "body": body,
            }
        )
        code = next(codes)
        if code == 200:
            accepted.setdefault(request.headers["Webhook-Id"], []).append(json.loads(body))
        return Response("ok" if code == 200 else "receiver down", status=code)

    httpserver.expect_request("/hook", method="POST").respond_with_handler(handler)
    return accepted, received


def _emit(alice_org, capture, event_type="instance.state_changed", data=DATA):
    with capture(execute=True):
        webhook_emit(organization=alice_org, event_type=event_type, data=data)
    return WebhookEvent.objects.latest("id")


def test_a_receiver_down_three_times_gets_the_event_once_after_four_attempts(
    alice_org, hook, httpserver, django_capture_on_commit_callbacks
):
    endpoint, secret = hook
    accepted, received = _receiver(httpserver, [500, 500, 500, 200], secrets=[secret])
    with time_machine.travel(T0, tick=False) as clock:
        event = _emit(alice_org, django_capture_on_commit_callbacks)
        delivery = WebhookDelivery.objects.get(event=event, endpoint=endpoint)
        assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == (
            DeliveryStatus.PENDING,
            1,
            T0 + timedelta(seconds=60),
        )
        clock.shift(timedelta(seconds=59))
        assert tasks.webhook_deliveries_sweep() == 0  # not yet due
        for wait_s in (1, 120, 240):  # backoff 60 s, 120 s, 240 s after the 1st, 2nd, 3rd failure
            clock.shift(timedelta(seconds=wait_s))
            assert tasks.webhook_deliveries_sweep() == 1
        clock.shift(timedelta(days=4))
        assert tasks.webhook_deliveries_sweep() == 0  # delivered: nothing more is sent

    delivery.refresh_from_db()
    assert (
        delivery.status,
        delivery.attempt_count,
        delivery.last_status_code,
        delivery.next_attempt_at,
        delivery.delivered_at,
    ) == (DeliveryStatus.SUCCEEDED, 4, 200, None, T0 + timedelta(seconds=420))
    attempts = list(
        WebhookAttempt.objects.filter(delivery=delivery).values_list(
            "number", "started_at", "status_code", "error", "response_excerpt"
        )
    )
    assert attempts == [
        (1, T0, 500, "could not deliver: HTTP 500", "receiver down"),
        (2, T0 + timedelta(seconds=60), 500, "could not deliver: HTTP 500", "receiver down"),
        (3, T0 + timedelta(seconds=180), 500, "could not deliver: HTTP 500", "receiver down"),
        (4, T0 + timedelta(seconds=420), 200, "", "ok"),
    ]
    assert all(ms >= 0 for ms in WebhookAttempt.objects.values_list("response_ms", flat=True))
    # four requests of one event (same id), one accepted
    assert [r["id"] for r in received] == [event.public_id] * 4
    assert list(accepted) == [event.public_id]
    assert accepted[event.public_id] == [
        {
            "id": event.public_id,
            "type": "instance.state_changed",
            "created": int(T0.timestamp()),
            "organization": alice_org.slug,
            "data": DATA,
        }
    ]
    assert event.public_id.startswith("evt_") and len(event.public_id) == 28


def test_the_signature_is_stripes_scheme_and_refuses_a_wrong_secret_or_a_changed_body(
    alice_org, hook, httpserver, django_capture_on_commit_callbacks
):
    _endpoint, secret = hook
    _accepted, received = _receiver(httpserver, [200])
    with time_machine.travel(T0, tick=False):
        _emit(alice_org, django_capture_on_commit_callbacks)
        (request,) = received
        assert request["signature"].startswith(f"t={int(T0.timestamp())},v1=")
        assert request["signature"].count("v1=") == 1
        assert stripe.WebhookSignature.verify_header(request["body"], request["signature"], secret, 300)
        event = stripe.Webhook.construct_event(request["body"], request["signature"], secret, 300)
        assert (event["id"], event["type"]) == (request["id"], "instance.state_changed")
        assert json.loads(request["body"])["data"] == DATA
        with pytest.raises(stripe.SignatureVerificationError):
            stripe.WebhookSignature.verify_header(request["body"], request["signature"], "whsec_wrong", 300)
        with pytest.raises(stripe.SignatureVerificationError):
            stripe.WebhookSignature.verify_header(
                request["body"].replace("llama", "llamb"), request["signature"], secret, 300
            )


def test_after_rotation_both_secrets_verify_for_24_hours_then_only_the_new_one(
    alice, alice_org, hook, httpserver, django_capture_on_commit_callbacks
):
    endpoint, old = hook
    _accepted, received = _receiver(httpserver, [200, 200, 200])
    with time_machine.travel(T0, tick=False) as clock:
        endpoint, new = webhook_endpoint_rotate(endpoint=endpoint, user=alice)
        assert new != old and new.startswith("whsec_")
        assert (endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_expires_at) == (
            new,
            old,
            T0 + timedelta(hours=24),
        )
        _emit(alice_org, django_capture_on_commit_callbacks)
        during = received[-1]
        assert during["signature"].count("v1=") == 2
        for secret in (new, old):  # a receiver with either secret accepts the delivery
            assert stripe.WebhookSignature.verify_header(during["body"], during["signature"], secret, 300)

        clock.shift(timedelta(hours=24, seconds=1))
        _emit(alice_org, django_capture_on_commit_callbacks)
        after = received[-1]
        assert after["signature"].count("v1=") == 1
        assert stripe.WebhookSignature.verify_header(after["body"], after["signature"], new, 300)
        with pytest.raises(stripe.SignatureVerificationError):
            stripe.WebhookSignature.verify_header(after["body"], after["signature"], old, 300)
    assert AuditEvent.objects.filter(action="webhooks.endpoint_rotate", actor=alice).count() == 1


def test_a_receiver_down_for_three_days_ends_failed_after_twenty_attempts(
    alice_org, hook, httpserver, django_capture_on_commit_callbacks
):
    _receiver(httpserver, [503] * 100)
    with time_machine.travel(T0, tick=False) as clock:
        event = _emit(alice_org, django_capture_on_commit_callbacks)
        delivery = WebhookDelivery.objects.get(event=event)
        while delivery.status == DeliveryStatus.PENDING:
            clock.move_to(delivery.next_attempt_at)
            tasks.webhook_deliveries_sweep()
            delivery.refresh_from_db()
    # waits 60 s × 2^(n-1) capped at 6 h: 9 growing waits (30,660 s) and 10 of 6 h fit in 3 days (259,200 s);
    # the 21st attempt would come at 268,260 s, after the window.
    assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == (DeliveryStatus.FAILED, 20, None)
    last = WebhookAttempt.objects.filter(delivery=delivery).latest("number")
    assert (last.number, last.started_at, last.status_code) == (20, T0 + timedelta(seconds=246_660), 503)


def test_a_receiver_that_refuses_connections_loses_nothing(
    alice, alice_org, loopback, django_capture_on_commit_callbacks
):
    from pytest_httpserver import HTTPServer

    from portal.webhooks.services import webhook_endpoint_create

    server = HTTPServer(host="127.0.0.1", port=0)  # the test's own receiver: it is stopped and started again
    server.start()
    try:
        endpoint, _ = webhook_endpoint_create(
            organization=alice_org, user=alice, url=server.url_for("/hook"), event_types=["job.finished"]
        )
        server.stop()  # nobody listens on the port now
        with time_machine.travel(T0, tick=False):
            event = _emit(alice_org, django_capture_on_commit_callbacks, "job.finished", {"job_id": 1})
        delivery = WebhookDelivery.objects.get(event=event)
        attempt = delivery.attempts.get()
        assert (delivery.status, attempt.status_code, attempt.error) == (
            DeliveryStatus.PENDING,
            None,
            "could not deliver: no complete answer within 10 s",  # the same words as for any port that is shut
        )
        server.start()  # back on the same port
        assert server.url_for("/hook") == endpoint.url
        accepted, _ = _receiver(server, [200])
        with time_machine.travel(T0 + timedelta(seconds=60), tick=False):
            assert tasks.webhook_deliveries_sweep() == 1
    finally:
        if server.is_running():
            server.stop()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == (DeliveryStatus.SUCCEEDED, 2)
    assert list(accepted) == [event.public_id]


def test_a_task_run_twice_sends_once(alice_org, hook, httpserver):
    _accepted, received = _receiver(httpserver, [200, 200])
    with time_machine.travel(T0, tick=False):
        webhook_emit(
            organization=alice_org,
            event_type="wallet.balance_low",
            data={"balance_micros": 1, "threshold_micros": 10_000_000, "currency": "CNY"},
        )
        delivery = WebhookDelivery.objects.get()  # on_commit not run: as if the first enqueue was lost
        assert tasks.webhook_deliver(delivery.pk) == "succeeded"
        assert tasks.webhook_deliver(delivery.pk) == "not_due"
        assert tasks.webhook_deliveries_sweep() == 0
    assert len(received) == 1


def test_redeliver_through_the_api_and_the_console_sends_the_same_event_again(
    alice, alice_org, hook, httpserver, api_client, django_capture_on_commit_callbacks
):
    accepted, received = _receiver(httpserver, [200, 200, 200])
    event = _emit(alice_org, django_capture_on_commit_callbacks)
    delivery = WebhookDelivery.objects.get(event=event)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client(alice, alice_org).post(f"/api/v1/webhooks/deliveries/{delivery.pk}/redeliver")
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "pending" and response.json()["event_id"] == event.public_id

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    url = f"/o/{alice_org.slug}/webhooks/deliveries/{delivery.pk}/redeliver/"
    assert browser.get(url).status_code == 405
    assert browser.post(url).status_code == 403  # no CSRF token
    page = browser.get(f"/o/{alice_org.slug}/webhooks/")
    token = page.cookies["csrftoken"].value
    with django_capture_on_commit_callbacks(execute=True):
        response = browser.post(url, {"csrfmiddlewaretoken": token})
    assert response.status_code == 302

    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempt_count) == (DeliveryStatus.SUCCEEDED, 3)
    assert [r["id"] for r in received] == [event.public_id] * 3
    assert len(accepted[event.public_id]) == 3  # the receiver sees one id three times: it dedupes on it
    assert AuditEvent.objects.filter(action="webhooks.delivery_redeliver", actor=alice).count() == 2


def test_emit_costs_one_query_when_nothing_subscribes(alice_org, charlie, django_assert_num_queries):
    with django_assert_num_queries(1):
        webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    assert WebhookEvent.objects.count() == 0


def test_an_endpoint_gets_only_the_types_it_subscribed_to(alice, alice_org, loopback, httpserver):
    from portal.webhooks.services import webhook_endpoint_create

    endpoint, _ = webhook_endpoint_create(
        organization=alice_org, user=alice, url=httpserver.url_for("/hook"), event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.failed", data={"job_id": 1})
    assert WebhookEvent.objects.count() == 0
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    assert list(WebhookDelivery.objects.values_list("endpoint_id", "event__type")) == [(endpoint.pk, "job.finished")]


def test_emit_never_raises_and_leaves_the_callers_transaction_usable(alice_org, hook, caplog):
    with transaction.atomic():
        webhook_emit(organization=alice_org, event_type="no.such_event", data={})
        webhook_emit(organization=alice_org, event_type="job.finished", data={"bad": object()})  # not JSON
        webhook_emit(organization=None, event_type="job.finished", data={})
        AuditEvent.objects.create(action="caller.goes_on")  # the caller's transaction still works
    assert WebhookEvent.objects.count() == 0 and WebhookDelivery.objects.count() == 0
    assert AuditEvent.objects.filter(action="caller.goes_on").count() == 1
    assert "not recorded" in caplog.text


def test_a_rolled_back_change_sends_nothing(alice_org, hook, httpserver, django_capture_on_commit_callbacks):
    _accepted, received = _receiver(httpserver, [200])

    def failing_change() -> None:
        with transaction.atomic():
            webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
            raise RuntimeError("the change failed")

    with django_capture_on_commit_callbacks(execute=True), pytest.raises(RuntimeError):
        failing_change()
    assert WebhookEvent.objects.count() == 0 and received == []
