"""Calls to external app endpoints go through the same guard as webhooks (``portal.lib.egress``): a rebinding
name never reaches loopback, redirects are not followed, every bad address form is refused when the version is
added (service, API, console) and again at each call with nothing sent, a trickling endpoint is cut at the
call's deadline, an oversized answer is refused; nothing is charged for any of them.

DNS and the network are replaced at their boundaries only (``egress_fakes``); the endpoints are real servers
on loopback. Timeouts are shortened through settings."""

from __future__ import annotations

import json
import socket
import sys
import time
from pathlib import Path

import pytest
from django.urls import reverse
from rest_framework.test import APIClient
from werkzeug import Response

from billing.models import LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from portal.choices import TokenScope
from portal.marketplace import services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import App, AppCall, AppVersion
from portal.services import api_token_create

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "portal"))
from egress_fakes import BAD_NAMES, BAD_URLS, PUBLIC, Jail, Listener, Resolver, Trickler  # stand-ins, bad URLs

pytestmark = pytest.mark.django_db
SCHEMA_IN = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
SCHEMA_OUT = {"type": "object", "required": ["output"]}
REFUSED = "The app failed: could not reach the app's endpoint: its address is not allowed; nothing was charged."
NO_ANSWER = "The app did not answer in time (no complete answer within 1 s); nothing was charged."


@pytest.fixture
def caller(charlie):
    org = charlie.organizations.get()
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="caller-topup")
    return org


@pytest.fixture
def short(settings):
    settings.APP_CALL_TIMEOUT_S = 1
    settings.APP_ALLOW_HTTP_ENDPOINTS = False


@pytest.fixture
def jail(monkeypatch):
    return Jail(monkeypatch)


def _resolve(monkeypatch, answers):
    resolver = Resolver(answers)
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    return resolver


def _draft(alice, alice_org):
    return services.app_create(
        publisher=alice_org,
        user=alice,
        name="Contract review",
        category="legal",
        description="",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=500_000,
        visibility=AppVisibility.PUBLIC,
    )


def _published(alice, alice_org, url, *, row=False):
    """A published app whose active version calls ``url``: added through the service, or (``row``) written as
    it was when its name still resolved to a public address or other settings held."""
    app = _draft(alice, alice_org)
    if row:
        AppVersion.objects.create(app=app, number=1, kind=ServingKind.EXTERNAL, endpoint_url=url, active=True)
    else:
        services.app_version_add(app=app, user=alice, kind=ServingKind.EXTERNAL, endpoint_url=url)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    app.refresh_from_db()
    return app


def _invoke(charlie, caller, app):
    client = APIClient()
    token = api_token_create(user=charlie, organization=caller, name="t", scope=TokenScope.WRITE)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    return client.post(f"/api/v1/apps/{app.slug}/invoke", {"text": "clause 3"}, format="json")


def _charged_nothing(caller):
    assert wallet_balance(organization=caller).total_micros == 10_000_000
    assert LedgerTransaction.objects.filter(kind="app_call").count() == 0


def _failed(response, status, code, message):
    assert (response.status_code, response.json()["error"]["code"], response.json()["error"]["message"]) == (
        status,
        code,
        message,
    )
    call = AppCall.objects.get()
    assert (call.status, call.error_code) == (CallStatus.FAILED, code)
    return call


def test_a_rebinding_endpoint_never_reaches_loopback(alice, alice_org, caller, charlie, short, jail, monkeypatch):
    server = Listener("127.0.0.1")
    try:
        resolver = _resolve(monkeypatch, {"rebind.example": [[PUBLIC], [PUBLIC], ["127.0.0.1"]]})
        app = _published(alice, alice_org, f"https://rebind.example:{server.port}/review")
        response = _invoke(charlie, caller, app)
    finally:
        server.close()
    assert server.connections == 0
    assert resolver.lookups == {"rebind.example": 2}  # the version's check and the call's; the client asked nobody
    assert jail.attempts == [(PUBLIC, server.port)]
    call = _failed(response, 504, "backend_timeout", NO_ANSWER)
    assert call.error == "no complete answer within 1 s"
    _charged_nothing(caller)


def test_a_redirect_is_not_followed_and_is_a_failure(alice, alice_org, caller, charlie, settings, httpserver):
    """A 3xx with a JSON body was taken as the answer; now it is a failure, and the redirect goes nowhere."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the endpoint is on loopback (the test setting)
    target = Listener("127.0.0.1")
    try:
        httpserver.expect_request("/review", method="POST").respond_with_response(
            Response(
                json.dumps({"output": "from the redirect"}),
                status=302,
                headers={"Location": f"http://127.0.0.1:{target.port}/admin"},
                content_type="application/json",
            )
        )
        app = _published(alice, alice_org, httpserver.url_for("/review"))
        response = _invoke(charlie, caller, app)
    finally:
        target.close()
    assert target.connections == 0
    _failed(
        response,
        502,
        "backend_error",
        "The app failed: the endpoint answered a redirect (HTTP 302), which is not followed; nothing was charged.",
    )
    _charged_nothing(caller)


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_every_bad_address_form_is_refused_when_a_version_is_added(
    alice, alice_org, short, jail, monkeypatch, url, message
):
    _resolve(monkeypatch, BAD_NAMES)
    app = _draft(alice, alice_org)
    with pytest.raises(services.MarketplaceError) as refused:
        services.app_version_add(app=app, user=alice, kind=ServingKind.EXTERNAL, endpoint_url=url)
    assert (str(refused.value), refused.value.code, refused.value.status) == (message, "invalid", 400)
    assert app.versions.count() == 0
    assert jail.attempts == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://224.0.0.1/", "The endpoint address 224.0.0.1 is not a public address."),
        ("https://[::ffff:127.0.0.1]/x", "The endpoint address ::ffff:7f00:1 is not a public address."),
        ("https://mixed.example/x", "The endpoint host mixed.example does not resolve to a public address."),
    ],
)
def test_the_api_and_the_console_refuse_a_bad_endpoint_with_a_400_and_write_nothing(
    client, alice, alice_org, short, jail, monkeypatch, url, message
):
    _resolve(monkeypatch, BAD_NAMES)
    app = _draft(alice, alice_org)
    api = APIClient()
    token = api_token_create(user=alice, organization=alice_org, name="t", scope=TokenScope.WRITE)
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    response = api.post(f"/api/v1/apps/{app.slug}/versions", {"kind": "external", "endpoint_url": url}, format="json")
    assert (response.status_code, response.json()["error"]) == (
        400,
        {"code": "invalid", "message": message, "details": None},
    )
    assert app.versions.count() == 0

    client.force_login(alice)
    page = client.post(
        reverse("app_create", args=[alice_org.slug]),
        {
            "name": "probe",
            "category": "general",
            "price_per_call": "0",
            "visibility": "private",
            "input_schema": json.dumps(SCHEMA_IN),
            "output_schema": json.dumps(SCHEMA_OUT),
            "endpoint_url": url,
        },
    )
    assert page.status_code == 400 and message in page.content.decode()
    assert list(App.objects.values_list("name", flat=True)) == ["Contract review"]  # no "probe" app
    assert jail.attempts == []


@pytest.mark.parametrize(("url", "message"), BAD_URLS)
def test_every_bad_address_form_is_refused_at_each_call_and_nothing_is_sent(
    alice, alice_org, caller, charlie, short, jail, monkeypatch, url, message
):
    _resolve(monkeypatch, BAD_NAMES)
    app = _published(alice, alice_org, url, row=True)
    response = _invoke(charlie, caller, app)
    assert jail.attempts == []
    call = _failed(response, 502, "backend_error", REFUSED)
    assert call.error == "could not reach the app's endpoint: its address is not allowed"
    _charged_nothing(caller)


@pytest.mark.parametrize(
    ("head", "trickle"),
    [
        (b"", b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"output": 1}'),
        (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n", b'{"output": 1}'),
    ],
    ids=["headers", "body"],
)
def test_a_trickling_endpoint_is_cut_at_the_deadline_and_charges_nothing(
    alice, alice_org, caller, charlie, settings, head, trickle
):
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the endpoint is on loopback (the test setting)
    settings.APP_CALL_TIMEOUT_S = 1
    endpoint = Trickler(head=head, trickle=trickle, interval_s=1.0)
    try:
        app = _published(alice, alice_org, endpoint.url)
        started = time.monotonic()
        response = _invoke(charlie, caller, app)
        took = time.monotonic() - started
    finally:
        endpoint.close()
    assert 1.0 <= took < 2.5, took  # the deadline, not the 8 s the receiver would take
    assert endpoint.connections == 1 and endpoint.durations[0] < 3, endpoint.durations
    call = _failed(response, 504, "backend_timeout", NO_ANSWER)
    assert (call.error, 1000 <= call.latency_ms < 2500) == ("no complete answer within 1 s", True)
    _charged_nothing(caller)


def test_an_answer_over_the_size_limit_is_refused_and_charges_nothing(
    alice, alice_org, caller, charlie, settings, httpserver
):
    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # the endpoint is on loopback (the test setting)
    settings.APP_MAX_RESPONSE_BYTES = 1024
    httpserver.expect_request("/review", method="POST").respond_with_response(
        Response(json.dumps({"output": "x" * 5000}), content_type="application/json")
    )
    app = _published(alice, alice_org, httpserver.url_for("/review"))
    response = _invoke(charlie, caller, app)
    _failed(
        response,
        502,
        "backend_error",
        "The app failed: the endpoint's answer is larger than 1024 bytes; nothing was charged.",
    )
    _charged_nothing(caller)
