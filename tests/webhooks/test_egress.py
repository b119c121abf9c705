"""Outgoing webhooks cannot be turned against the portal's own network (``portal.lib.egress``): a rebinding
name never reaches loopback, the connection goes to the address that was checked with the URL's host name for
Host, SNI and the certificate, redirects are not followed, every bad address form is refused at registration
(service, API, console) and again at each delivery with nothing sent, recorded errors do not tell an open
port from a closed one, a trickling receiver is cut at the deadline, and a claim outlives its attempt.

DNS and the network are replaced at their boundaries only (``egress_fakes``: ``socket.getaddrinfo`` and
``socket.socket.connect``, which keeps every test on this machine); the receivers are real servers on
loopback. Timeouts are shortened through settings."""

from __future__ import annotations

import socket
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone
from django.utils.html import escape
from werkzeug import Request, Response

from portal.models import AuditEvent
from portal.webhooks import sender, services
from portal.webhooks.choices import DeliveryStatus
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import WebhookError, webhook_emit, webhook_endpoint_create

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "portal"))
from egress_fakes import (  # the DNS and network stand-ins and the table of bad URLs
    BAD_NAMES,
    BAD_URLS,
    PUBLIC,
    Jail,
    Listener,
    Resolver,
    Trickler,
    free_port,
    tls_server,
)

pytestmark = pytest.mark.django_db
REFUSED = "could not deliver: the endpoint's address is not allowed"
NO_ANSWER = "could not deliver: no complete answer within 1 s"


@pytest.fixture
def short(settings):
    """A 1 s deadline per attempt; the guard on (https only, public addresses only)."""
    settings.WEBHOOK_TIMEOUT_S = 1
    settings.APP_ALLOW_HTTP_ENDPOINTS = False


@pytest.fixture
def jail(monkeypatch):
    return Jail(monkeypatch)


def _resolve(monkeypatch, answers):
    resolver = Resolver(answers)
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return resolver


def _endpoint_row(alice, alice_org, url):
    """An endpoint as registered when its name still resolved to a public address (or under other settings)."""
    return WebhookEndpoint.objects.create(
        organization=alice_org, url=url, event_types=["job.finished"], secret="whsec_test", created_by=alice
    )


def _deliver(alice_org, capture):
    with capture(execute=True):
        webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    return WebhookDelivery.objects.latest("id")


def _attempts(delivery):
    return list(delivery.attempts.values_list("number", "status_code", "response_ms", "error", "response_excerpt"))


# --- DNS rebinding -------------------------------------------------------------------------------------------------
def test_a_rebinding_name_never_reaches_loopback(
    alice, alice_org, short, jail, monkeypatch, django_capture_on_commit_callbacks
):
    """The name answers a public address to the registration's and the delivery's lookup, then 127.0.0.1: the
    delivery connects to the public address it checked (the jail turns it away), never looks the name up again,
    and the loopback server on the same port gets nothing."""
    server = Listener("127.0.0.1")
    try:
        resolver = _resolve(monkeypatch, {"rebind.example": [[PUBLIC], [PUBLIC], ["127.0.0.1"]]})
        webhook_endpoint_create(
            organization=alice_org,
            user=alice,
            url=f"https://rebind.example:{server.port}/hook",
            event_types=["job.finished"],
        )
        delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
    finally:
        server.close()
    assert server.connections == 0
    assert resolver.lookups == {"rebind.example": 2}  # registration and delivery; the client asked nobody
    assert jail.attempts == [(PUBLIC, server.port)]
    ((number, code, _ms, error, excerpt),) = _attempts(delivery)
    assert (number, code, error, excerpt) == (1, None, NO_ANSWER, "")
    assert (delivery.status, delivery.attempt_count, delivery.last_error) == (DeliveryStatus.PENDING, 1, NO_ANSWER)


def test_the_checked_address_gets_the_request_with_the_host_name_in_host_sni_and_certificate(
    alice, alice_org, short, monkeypatch, settings, tmp_path, django_capture_on_commit_callbacks
):
    """An operator's own network allowed (``OUTGOING_ALLOWED_NETWORKS``): the receiver on 127.0.0.2 speaks TLS
    with a certificate for hooks.partner.example. The name rebinds to 127.0.0.1 after the checks; the request
    still goes to 127.0.0.2, with ``Host`` and SNI hooks.partner.example and the certificate checked for that
    name — a second name on the same address, whose certificate it is not, fails and sends nothing."""
    with tls_server(tmp_path, host="127.0.0.2", names=["hooks.partner.example"]) as (receiver, bundle, sni):
        settings.OUTGOING_ALLOWED_NETWORKS = ["127.0.0.2/32"]
        settings.OUTGOING_CA_BUNDLE = str(bundle)
        seen = []

        def handler(request: Request) -> Response:
            seen.append((request.headers["Host"], request.headers["Webhook-Id"]))
            return Response("ok")

        receiver.expect_request("/hook", method="POST").respond_with_handler(handler)
        loopback = Listener("127.0.0.1", receiver.port)
        try:
            _resolve(
                monkeypatch,
                {
                    "hooks.partner.example": [["127.0.0.2"], ["127.0.0.2"], ["127.0.0.1"]],
                    "other.partner.example": [["127.0.0.2"], ["127.0.0.2"], ["127.0.0.1"]],
                },
            )
            good, _ = webhook_endpoint_create(
                organization=alice_org,
                user=alice,
                url=f"https://hooks.partner.example:{receiver.port}/hook",
                event_types=["job.finished"],
            )
            delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
            delivered = (delivery.status, delivery.last_status_code, delivery.last_error)
            delivered_event = delivery.event.public_id
            WebhookEndpoint.objects.filter(pk=good.pk).delete()
            webhook_endpoint_create(
                organization=alice_org,
                user=alice,
                url=f"https://other.partner.example:{receiver.port}/hook",
                event_types=["job.finished"],
            )
            wrong = _deliver(alice_org, django_capture_on_commit_callbacks)
        finally:
            loopback.close()
    assert seen == [(f"hooks.partner.example:{receiver.port}", delivered_event)]
    assert sni == ["hooks.partner.example", "other.partner.example"]
    assert loopback.connections == 0
    assert delivered == (DeliveryStatus.SUCCEEDED, 200, "")
    assert [(n, c, e, x) for n, c, _ms, e, x in _attempts(wrong)] == [(1, None, NO_ANSWER, "")]


def test_a_redirect_to_loopback_is_not_followed(
    alice, alice_org, settings, httpserver, django_capture_on_commit_callbacks
):
    """Redirects are never followed (a 3xx is a failed attempt), so one to the portal's own network goes
    nowhere."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the receiver itself is on loopback (the test setting)
    target = Listener("127.0.0.1")
    try:
        httpserver.expect_request("/hook", method="POST").respond_with_response(
            Response("moved", status=302, headers={"Location": f"http://127.0.0.1:{target.port}/admin"})
        )
        webhook_endpoint_create(
            organization=alice_org, user=alice, url=httpserver.url_for("/hook"), event_types=["job.finished"]
        )
        delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
    finally:
        target.close()
    assert target.connections == 0
    ((number, code, _ms, error, excerpt),) = _attempts(delivery)
    assert (number, code, error, excerpt) == (
        1,
        302,
        "could not deliver: HTTP 302 (redirects are not followed)",
        "moved",
    )
    assert (delivery.status, delivery.last_status_code) == (DeliveryStatus.PENDING, 302)


# --- bad addresses: at registration and at every delivery ------------------------------------------------------------
@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_every_bad_address_form_is_refused_at_registration_and_nothing_is_written(
    alice, alice_org, short, jail, monkeypatch, url, message
):
    _resolve(monkeypatch, BAD_NAMES)
    with pytest.raises(WebhookError) as refused:
        webhook_endpoint_create(organization=alice_org, user=alice, url=url, event_types=["job.finished"])
    assert (str(refused.value), refused.value.code, refused.value.status) == (message, "invalid", 400)
    assert WebhookEndpoint.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="webhooks.").exists()
    assert jail.attempts == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        next(bad for bad in BAD_URLS if bad[0] == url)
        for url in [
            "https://127.0.0.1/hook",
            "https://224.0.0.1/",
            "https://[::ffff:127.0.0.1]/hook",
            "https://2130706433/hook",
            "https://mixed.example/hook",
        ]
    ],
)
def test_the_api_and_the_console_refuse_bad_addresses_with_a_400_and_write_nothing(
    alice, alice_org, short, jail, monkeypatch, api_client, url, message
):
    _resolve(monkeypatch, BAD_NAMES)
    response = api_client(alice, alice_org).post(
        "/api/v1/webhooks/endpoints", {"url": url, "event_types": ["job.finished"]}, format="json"
    )
    assert (response.status_code, response.json()) == (
        400,
        {"error": {"code": "invalid", "details": None, "message": message}},
    )
    browser = Client()
    browser.force_login(alice)
    page = browser.post(f"/o/{alice_org.slug}/webhooks/", {"url": url, "event_types": ["job.finished"]})
    assert page.status_code == 400
    assert f'data-testid="webhook-error">{escape(message)}</p>' in page.content.decode()
    assert WebhookEndpoint.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="webhooks.").exists()
    assert jail.attempts == []


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_every_bad_address_form_is_refused_at_delivery_and_nothing_is_sent(
    alice, alice_org, short, jail, monkeypatch, django_capture_on_commit_callbacks, url, message
):
    """The endpoint was registered when its name still resolved to a public address (or under other settings):
    each delivery checks again, records a failed attempt and connects nowhere."""
    _resolve(monkeypatch, BAD_NAMES)
    _endpoint_row(alice, alice_org, url)
    started = timezone.now()
    delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
    assert jail.attempts == []
    assert _attempts(delivery) == [(1, None, 0, REFUSED, "")]
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code, delivery.last_error) == (
        DeliveryStatus.PENDING,
        1,
        None,
        REFUSED,
    )
    assert started + timedelta(seconds=59) < delivery.next_attempt_at < timezone.now() + timedelta(seconds=61)


def test_recorded_errors_do_not_tell_an_open_internal_port_from_a_closed_one(
    alice, alice_org, short, jail, monkeypatch, django_capture_on_commit_callbacks
):
    """The same text and time for an open and a closed port on 127.0.0.1, addressed by literal, by a name that
    resolves there, and by a name that rebinds there after the check; the open port is never connected to."""
    server = Listener("127.0.0.1")
    closed = free_port()
    try:
        _resolve(
            monkeypatch,
            {
                "internal.example": [["127.0.0.1"]],
                "rebind-open.example": [[PUBLIC], ["127.0.0.1"]],
                "rebind-closed.example": [[PUBLIC], ["127.0.0.1"]],
            },
        )
        recorded = {}
        for label, url in [
            ("literal open", f"https://127.0.0.1:{server.port}/hook"),
            ("literal closed", f"https://127.0.0.1:{closed}/hook"),
            ("name open", f"https://internal.example:{server.port}/hook"),
            ("name closed", f"https://internal.example:{closed}/hook"),
            ("rebind open", f"https://rebind-open.example:{server.port}/hook"),
            ("rebind closed", f"https://rebind-closed.example:{closed}/hook"),
        ]:
            WebhookEndpoint.objects.all().delete()
            _endpoint_row(alice, alice_org, url)
            delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
            attempt = delivery.attempts.get()
            recorded[label] = (attempt.status_code, attempt.error, attempt.response_excerpt)
            if not label.startswith("rebind"):
                assert attempt.response_ms == 0
    finally:
        server.close()
    assert server.connections == 0
    assert recorded == {
        "literal open": (None, REFUSED, ""),
        "literal closed": (None, REFUSED, ""),
        "name open": (None, REFUSED, ""),
        "name closed": (None, REFUSED, ""),
        "rebind open": (None, NO_ANSWER, ""),
        "rebind closed": (None, NO_ANSWER, ""),
    }
    assert sorted(set(jail.off_loopback())) == sorted([(PUBLIC, closed), (PUBLIC, server.port)])


# --- one deadline per attempt ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("head", "trickle"),
    [
        (b"", b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),  # the status line and headers trickle
        (b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n", b"x" * 20),  # a quick 200, then the body trickles
    ],
    ids=["headers", "body"],
)
def test_a_trickling_receiver_is_cut_at_the_deadline_and_recorded_as_failed(
    alice, alice_org, settings, django_capture_on_commit_callbacks, head, trickle
):
    """One byte a second: with ``WEBHOOK_TIMEOUT_S`` = 1 the attempt ends after 1 s (connect, headers and body
    together), the connection is closed and the attempt is a failure."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the receiver is on loopback (the test setting)
    settings.WEBHOOK_TIMEOUT_S = 1
    receiver = Trickler(head=head, trickle=trickle, interval_s=1.0)
    try:
        webhook_endpoint_create(organization=alice_org, user=alice, url=receiver.url, event_types=["job.finished"])
        started = time.monotonic()
        delivery = _deliver(alice_org, django_capture_on_commit_callbacks)
        took = time.monotonic() - started
    finally:
        receiver.close()
    assert 1.0 <= took < 2.5, took  # the deadline, not the 8 s the receiver would take
    assert receiver.connections == 1 and receiver.durations[0] < 3, receiver.durations
    ((number, code, ms, error, excerpt),) = _attempts(delivery)
    assert (number, code, error, excerpt) == (1, None, NO_ANSWER, "")
    assert 1000 <= ms < 2500
    assert (delivery.status, delivery.attempt_count, delivery.last_status_code, delivery.last_error) == (
        DeliveryStatus.PENDING,
        1,
        None,
        NO_ANSWER,
    )


def test_the_claim_lasts_the_deadline_and_a_margin(alice, alice_org, settings, httpserver, loopback, monkeypatch):
    """While an attempt runs, ``next_attempt_at`` holds the claim: now + ``WEBHOOK_TIMEOUT_S`` + max(it, 30 s)."""
    settings.WEBHOOK_TIMEOUT_S = 45
    held = []
    real_post = sender.post

    def post(**kwargs):  # the moment of sending, seen from the worker's own connection
        held.append(WebhookDelivery.objects.get().next_attempt_at)
        return real_post(**kwargs)

    monkeypatch.setattr(sender, "post", post)
    httpserver.expect_request("/hook").respond_with_response(Response("ok"))
    webhook_endpoint_create(
        organization=alice_org, user=alice, url=httpserver.url_for("/hook"), event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})  # on_commit not run
    now = timezone.now()
    delivery = services.webhook_delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk, now=now)
    assert services.webhook_claim_lease() == timedelta(seconds=90)
    assert held == [now + timedelta(seconds=90)]
    assert (delivery.status, delivery.attempt_count) == (DeliveryStatus.SUCCEEDED, 1)


def test_a_worker_whose_claim_was_taken_over_records_its_attempt_but_leaves_the_delivery_to_the_new_holder(
    alice, alice_org, httpserver, loopback, monkeypatch
):
    """Worker A stalled past its lease and worker B claimed the delivery (as B's compare-and-set would, while A
    was sending): A's attempt is recorded, but the delivery keeps B's claim instead of A's retry time."""
    httpserver.expect_request("/hook").respond_with_response(Response("down", status=503))
    real_post = sender.post
    taken_over_until = timezone.now() + timedelta(minutes=5)

    def post(**kwargs):
        WebhookDelivery.objects.update(next_attempt_at=taken_over_until)  # B's claim
        return real_post(**kwargs)

    monkeypatch.setattr(sender, "post", post)
    webhook_endpoint_create(
        organization=alice_org, user=alice, url=httpserver.url_for("/hook"), event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})  # on_commit not run
    delivery = services.webhook_delivery_attempt(delivery_id=WebhookDelivery.objects.get().pk)
    assert [(n, c, e) for n, c, _ms, e, _x in _attempts(delivery)] == [(1, 503, "could not deliver: HTTP 503")]
    assert (delivery.status, delivery.attempt_count, delivery.round_attempts, delivery.next_attempt_at) == (
        DeliveryStatus.PENDING,
        1,
        0,
        taken_over_until,
    )


@pytest.mark.django_db(transaction=True)
def test_a_claim_taken_after_the_lease_never_sends_while_the_first_attempt_may_run(
    alice, alice_org, settings, monkeypatch
):
    """Worker A's attempt meets a receiver that trickles for 8 s. Worker B tries while A's claim holds (not
    due), then — its clock 62 s on, past the lease — once A's deadline has passed: A has been cut and recorded
    by then, so B finds the delivery waiting for its retry and sends nothing. The receiver never has two
    requests of the delivery open, and got exactly one."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the receiver is on loopback (the test setting)
    settings.WEBHOOK_TIMEOUT_S = 1
    settings.WEBHOOK_RETRY_BASE_S = 3600
    monkeypatch.setattr(services, "_enqueue", lambda ids: None)  # the test drives the workers
    receiver = Trickler(trickle=b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", interval_s=0.25)
    try:
        webhook_endpoint_create(organization=alice_org, user=alice, url=receiver.url, event_types=["job.finished"])
        webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
        delivery_id = WebhookDelivery.objects.get().pk
        t0 = timezone.now()
        outcome = {}
        a_done = threading.Event()  # (the main thread waits on this, not on the database: SQLite's shared cache)

        def worker_a() -> None:
            try:
                outcome["a"] = services.webhook_delivery_attempt(delivery_id=delivery_id, now=t0)
            finally:
                connections.close_all()
                a_done.set()

        a = threading.Thread(target=worker_a)
        a.start()
        assert receiver.accepted.wait(5)
        outcome["b_early"] = services.webhook_delivery_attempt(delivery_id=delivery_id, now=t0 + timedelta(seconds=30))
        a_done.wait(4)  # A's deadline is 1 s; a receiver that held A would hold it 8 s
        outcome["b_late"] = services.webhook_delivery_attempt(delivery_id=delivery_id, now=t0 + timedelta(seconds=62))
        a.join(15)
    finally:
        receiver.close()
    assert (outcome["b_early"], outcome["b_late"]) == (None, None)
    assert (receiver.connections, receiver.max_open) == (1, 1)
    delivery = WebhookDelivery.objects.get()
    assert [(n, e) for n, _c, _ms, e, _x in _attempts(delivery)] == [(1, NO_ANSWER)]
    assert (delivery.status, delivery.attempt_count, delivery.next_attempt_at) == (
        DeliveryStatus.PENDING,
        1,
        t0 + timedelta(seconds=3600),
    )
