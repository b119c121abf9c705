"""Registering endpoints: only owners and admins, only public https URLs (the SSRF guard of app endpoints), the
secret shown once; the API and the console page; an outsider (charlie) gets 404 for everything of alice's."""

from __future__ import annotations

import ipaddress
import re
import socket

import pytest
from django.test import Client

from portal.choices import Role
from portal.models import AuditEvent
from portal.services import membership_add
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint, WebhookEvent
from portal.webhooks.services import (
    WebhookError,
    WebhookForbidden,
    webhook_emit,
    webhook_endpoint_create,
)

pytestmark = pytest.mark.django_db
PUBLIC = "93.184.215.14"  # a globally routable address (example.com's)


@pytest.fixture
def resolver(monkeypatch):
    """DNS stand-in: ``*.example`` names resolve to the address in their first label (``10-0-0-5.example`` →
    10.0.0.5); everything else to a public address. No network."""

    def fake_getaddrinfo(host, port, *args, **kwargs):
        try:
            address = str(ipaddress.ip_address(host))  # a literal address resolves to itself
        except ValueError:
            address = host.split(".")[0].replace("-", ".") if host.endswith(".example") else PUBLIC
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)


def _nothing_written():
    assert WebhookEndpoint.objects.count() == 0
    assert not AuditEvent.objects.filter(action__startswith="webhooks.").exists()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("https://127.0.0.1/hook", "The endpoint address 127.0.0.1 is not a public address."),
        ("https://169.254.169.254/latest/meta-data/", "address 169.254.169.254 is not a public address."),
        ("https://10-0-0-5.example/hook", "host 10-0-0-5.example does not resolve to a public address."),
        ("https://192-168-1-20.example:8443/hook", "192-168-1-20.example does not resolve to a public address."),
        ("https://[::1]/hook", "The endpoint address ::1 is not a public address."),
        ("http://hooks.partner.com/hook", "must be an https:// URL"),
        ("ftp://hooks.partner.com/hook", "is not a valid https:// URL"),
        ("https://hooks.partner.com/" + "a" * 500, "longer than 500 characters"),
        ("", "Enter the endpoint's URL"),
    ],
)
def test_a_private_or_malformed_url_is_refused_and_nothing_is_written(alice, alice_org, resolver, url, message):
    with pytest.raises(WebhookError, match=re.escape(message)):
        webhook_endpoint_create(organization=alice_org, user=alice, url=url, event_types=["job.finished"])
    _nothing_written()


def test_the_api_refuses_a_metadata_address_with_the_envelope(alice, alice_org, api_client):
    response = api_client(alice, alice_org).post(
        "/api/v1/webhooks/endpoints",
        {"url": "https://169.254.169.254/latest/meta-data/", "event_types": ["job.finished"]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "code": "invalid",
            "details": None,
            "message": "The endpoint address 169.254.169.254 is not a public address.",
        }
    }
    _nothing_written()


@pytest.mark.parametrize(
    ("types", "message"),
    [
        ([], "Pick at least one event type"),
        (["job.exploded"], "Unknown event type job.exploded"),
        ("job.finished", "Pick at least one event type"),
    ],
)
def test_unknown_or_missing_event_types_are_refused(alice, alice_org, resolver, types, message):
    with pytest.raises(WebhookError, match=message):
        webhook_endpoint_create(
            organization=alice_org, user=alice, url="https://hooks.partner.com/x", event_types=types
        )
    _nothing_written()


def test_an_owner_registers_an_endpoint_and_sees_the_secret_once(alice, alice_org, resolver, api_client):
    client = api_client(alice, alice_org)
    response = client.post(
        "/api/v1/webhooks/endpoints",
        {
            "url": " https://hooks.partner.com/gpu ",
            "description": "prod",
            "event_types": ["wallet.balance_low", "instance.state_changed", "wallet.balance_low"],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    endpoint = WebhookEndpoint.objects.get()
    assert body["secret"] == endpoint.secret and body["secret"].startswith("whsec_") and len(body["secret"]) == 49
    assert (body["id"], body["url"], body["description"], body["event_types"]) == (
        endpoint.pk,
        "https://hooks.partner.com/gpu",
        "prod",
        ["instance.state_changed", "wallet.balance_low"],
    )
    listed = client.get("/api/v1/webhooks/endpoints").json()["results"]
    assert [e["id"] for e in listed] == [endpoint.pk] and "secret" not in listed[0]
    assert "secret" not in client.get(f"/api/v1/webhooks/endpoints/{endpoint.pk}").json()
    audit = AuditEvent.objects.get(action="webhooks.endpoint_create")
    assert (audit.actor, audit.organization, audit.extra["url"]) == (alice, alice_org, "https://hooks.partner.com/gpu")

    rotated = client.post(f"/api/v1/webhooks/endpoints/{endpoint.pk}/rotate")
    assert rotated.status_code == 200
    endpoint.refresh_from_db()
    assert rotated.json()["secret"] == endpoint.secret != body["secret"] == endpoint.previous_secret

    assert client.delete(f"/api/v1/webhooks/endpoints/{endpoint.pk}").status_code == 204
    assert WebhookEndpoint.objects.count() == 0
    assert AuditEvent.objects.filter(action="webhooks.endpoint_delete", actor=alice).count() == 1


def test_an_admin_may_register_but_a_plain_member_may_not(alice, alice_org, bob, charlie, resolver, api_client):
    with pytest.raises(WebhookForbidden, match="Only owners and admins"):
        webhook_endpoint_create(
            organization=alice_org, user=bob, url="https://hooks.partner.com/x", event_types=["job.finished"]
        )
    response = api_client(bob, alice_org).post(
        "/api/v1/webhooks/endpoints",
        {"url": "https://hooks.partner.com/x", "event_types": ["job.finished"]},
        format="json",
    )
    assert response.status_code == 403  # a member holds read tokens only (portal.permissions)
    assert response.json()["error"]["code"] == "permission_denied"
    browser = Client()
    browser.force_login(bob)
    page = browser.post(
        f"/o/{alice_org.slug}/webhooks/", {"url": "https://hooks.partner.com/x", "event_types": ["job.finished"]}
    )
    assert page.status_code == 403
    assert "Only owners and admins of the organization manage its webhooks." in page.content.decode()
    _nothing_written()

    membership_add(organization=alice_org, user=charlie, role=Role.ADMIN, acting_user=alice)
    endpoint, _ = webhook_endpoint_create(
        organization=alice_org, user=charlie, url="https://hooks.partner.com/x", event_types=["job.finished"]
    )
    assert endpoint.organization == alice_org


def test_a_member_sees_the_page_but_cannot_rotate_delete_or_redeliver(alice, alice_org, bob, resolver, api_client):
    endpoint, secret = webhook_endpoint_create(
        organization=alice_org, user=alice, url="https://hooks.partner.com/x", event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    delivery = WebhookDelivery.objects.get()
    client = api_client(bob, alice_org)
    assert client.get("/api/v1/webhooks/endpoints").status_code == 200
    assert client.post(f"/api/v1/webhooks/endpoints/{endpoint.pk}/rotate").status_code == 403
    assert client.delete(f"/api/v1/webhooks/endpoints/{endpoint.pk}").status_code == 403
    assert client.post(f"/api/v1/webhooks/deliveries/{delivery.pk}/redeliver").status_code == 403
    browser = Client()
    browser.force_login(bob)
    page = browser.get(f"/o/{alice_org.slug}/webhooks/")
    assert page.status_code == 200 and "Redeliver" not in page.content.decode()
    assert browser.post(f"/o/{alice_org.slug}/webhooks/endpoints/{endpoint.pk}/rotate/").status_code == 403
    endpoint.refresh_from_db()
    assert (endpoint.secret, endpoint.previous_secret) == (secret, "")
    assert WebhookEndpoint.objects.count() == 1


def test_charlie_gets_404_for_alices_endpoints_and_deliveries(alice, alice_org, charlie, resolver, api_client):
    endpoint, secret = webhook_endpoint_create(
        organization=alice_org, user=alice, url="https://hooks.partner.com/x", event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    delivery = WebhookDelivery.objects.get()
    charlie_org = charlie.organizations.get()
    client = api_client(charlie, charlie_org)
    for method, url in [
        ("get", f"/api/v1/webhooks/endpoints/{endpoint.pk}"),
        ("delete", f"/api/v1/webhooks/endpoints/{endpoint.pk}"),
        ("post", f"/api/v1/webhooks/endpoints/{endpoint.pk}/rotate"),
        ("get", f"/api/v1/webhooks/deliveries/{delivery.pk}"),
        ("post", f"/api/v1/webhooks/deliveries/{delivery.pk}/redeliver"),
        ("get", f"/api/v1/webhooks/endpoints?organization={alice_org.slug}"),
        ("get", f"/api/v1/webhooks/deliveries?organization={alice_org.slug}"),
    ]:
        response = getattr(client, method)(url)
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.json()["error"]["code"] == "not_found"
    assert client.get("/api/v1/webhooks/endpoints").json()["results"] == []
    assert client.get("/api/v1/webhooks/deliveries").json()["results"] == []
    assert client.get(f"/api/v1/webhooks/deliveries?endpoint={endpoint.pk}").json()["results"] == []

    browser = Client()
    browser.force_login(charlie)
    assert browser.get(f"/o/{alice_org.slug}/webhooks/").status_code == 404
    for url in [
        f"/o/{alice_org.slug}/webhooks/endpoints/{endpoint.pk}/rotate/",
        f"/o/{alice_org.slug}/webhooks/endpoints/{endpoint.pk}/delete/",
        f"/o/{alice_org.slug}/webhooks/deliveries/{delivery.pk}/redeliver/",
        f"/o/{charlie_org.slug}/webhooks/endpoints/{endpoint.pk}/rotate/",
        f"/o/{charlie_org.slug}/webhooks/endpoints/{endpoint.pk}/delete/",
        f"/o/{charlie_org.slug}/webhooks/deliveries/{delivery.pk}/redeliver/",
    ]:
        assert browser.post(url).status_code == 404, url
    endpoint.refresh_from_db()
    assert (endpoint.secret, WebhookEndpoint.objects.count(), delivery.attempt_count) == (secret, 1, 0)
    assert WebhookEvent.objects.count() == 1
    assert not AuditEvent.objects.filter(actor=charlie, action__startswith="webhooks.").exists()


def test_bad_filters_and_ids_are_4xx(alice, alice_org, api_client):
    client = api_client(alice, alice_org)
    assert client.get("/api/v1/webhooks/deliveries?status=lost").status_code == 400
    assert client.get("/api/v1/webhooks/deliveries?endpoint=abc").status_code == 400
    assert client.get("/api/v1/webhooks/deliveries?endpoint=1%002").status_code == 400
    assert client.get("/api/v1/webhooks/endpoints/abc").status_code == 404
    assert client.get("/api/v1/webhooks/endpoints/1.json").status_code == 404
    assert client.get("/api/v1/webhooks/deliveries/99999999").status_code == 404


def test_the_console_page_lists_endpoints_and_deliveries_paginated(
    alice, alice_org, resolver, django_assert_max_num_queries
):
    endpoint, _ = webhook_endpoint_create(
        organization=alice_org, user=alice, url="https://hooks.partner.com/x", event_types=["job.finished"]
    )
    for i in range(25):
        webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": i})
    browser = Client()
    browser.force_login(alice)
    with django_assert_max_num_queries(15):
        page = browser.get(f"/o/{alice_org.slug}/webhooks/")
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('data-testid="endpoint-row"') == 1 and html.count('data-testid="delivery-row"') == 20
    assert "1 / 2" in html and "https://hooks.partner.com/x" in html
    second = browser.get(f"/o/{alice_org.slug}/webhooks/?page=2", HTTP_HX_REQUEST="true")
    assert second.content.decode().count('data-testid="delivery-row"') == 5
    assert "<html" not in second.content.decode()  # the htmx partial only

    created = browser.post(
        f"/o/{alice_org.slug}/webhooks/",
        {"url": "https://hooks.partner.com/second", "event_types": ["job.failed", "job.finished"]},
        follow=True,
    )
    assert created.status_code == 200
    second_endpoint = WebhookEndpoint.objects.get(url="https://hooks.partner.com/second")
    assert second_endpoint.event_types == ["job.finished", "job.failed"]
    assert f"Signing secret (shown once): {second_endpoint.secret}" in created.content.decode()
    assert endpoint.pk != second_endpoint.pk


def test_staff_see_endpoints_and_deliveries_in_the_back_office_without_secrets(alice, alice_org, resolver):
    from portal.models import User

    endpoint, secret = webhook_endpoint_create(
        organization=alice_org, user=alice, url="https://hooks.partner.com/x", event_types=["job.finished"]
    )
    webhook_emit(organization=alice_org, event_type="job.finished", data={"job_id": 1})
    delivery = WebhookDelivery.objects.get()
    staff = User.objects.create_superuser("staff@example.com", "pw")
    browser = Client()
    browser.force_login(staff)
    for url in [
        "/admin/webhooks/webhookendpoint/",
        f"/admin/webhooks/webhookendpoint/{endpoint.pk}/change/",
        "/admin/webhooks/webhookdelivery/",
        f"/admin/webhooks/webhookdelivery/{delivery.pk}/change/",
        "/admin/webhooks/webhookevent/",
    ]:
        response = browser.get(url)
        assert response.status_code == 200, url
        assert secret not in response.content.decode()
