"""Partner API: tokens, scopes, wallet, ledger, schema, and outsiders' 404s (API and console)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone
from openapi_spec_validator import validate
from rest_framework.test import APIClient

from billing.choices import GrantKind
from billing.services import credit_grant_create, wallet_spend, wallet_top_up
from portal.choices import TokenScope
from portal.models import ApiToken
from portal.services import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def funded(alice_org):
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    wallet_top_up(organization=alice_org, amount_micros=5_000_000, idempotency_key="topup:1")
    for i in range(3):
        wallet_spend(organization=alice_org, amount_micros=1_000_000, idempotency_key=f"spend:{i}")
    return alice_org


def _client(plaintext: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return client


def test_a_token_authenticates_and_reads_the_wallet(alice, funded):
    created = api_token_create(user=alice, organization=funded, name="ci", scope=TokenScope.READ)
    assert ApiToken.objects.get().secret_sha256 != created.plaintext.split("_", 2)[2]  # stored hashed
    response = _client(created.plaintext).get("/api/v1/wallet")
    assert response.status_code == 200
    body = response.json()
    assert body["organization"] == funded.slug
    assert (body["balance"], body["trial_balance"], body["paid_balance"]) == ("12.000000", "7.000000", "5.000000")
    assert body["balance_micros"] == 12_000_000
    assert [g["remaining"] for g in body["grants"]] == ["7.000000"]

    me = _client(created.plaintext).get("/api/v1/me").json()
    assert me["email"] == "alice@example.com" and me["token_organization"] == funded.slug
    assert me["token_scope"] == "read"


def test_last_used_is_written_at_most_once_a_minute(alice, alice_org):
    created = api_token_create(user=alice, organization=alice_org, name="ci", scope=TokenScope.READ)
    client = _client(created.plaintext)
    assert ApiToken.objects.get().last_used_at is None
    assert client.get("/api/v1/me").status_code == 200
    first = ApiToken.objects.get().last_used_at
    assert first is not None
    assert client.get("/api/v1/me").status_code == 200
    assert ApiToken.objects.get().last_used_at == first  # within the minute: no write
    ApiToken.objects.update(last_used_at=first - timedelta(seconds=61))
    assert client.get("/api/v1/me").status_code == 200
    assert ApiToken.objects.get().last_used_at > first


def test_the_ledger_is_cursor_paginated(alice, funded):
    created = api_token_create(user=alice, organization=funded, name="ci", scope=TokenScope.READ)
    client = _client(created.plaintext)
    first = client.get("/api/v1/wallet/ledger", {"page_size": 3}).json()
    assert [line["amount"] for line in first["results"]] == ["-1.000000", "-1.000000", "-1.000000"]
    assert first["previous"] is None and first["next"]
    second = client.get(first["next"]).json()
    assert [line["kind"] for line in second["results"]] == ["top_up", "credit_grant"]
    assert [line["amount_micros"] for line in second["results"]] == [5_000_000, 10_000_000]
    assert second["next"] is None


def test_a_revoked_token_is_refused_with_401(alice, funded):
    created = api_token_create(user=alice, organization=funded, name="ci", scope=TokenScope.WRITE)
    client = _client(created.plaintext)
    assert client.delete(f"/api/v1/tokens/{created.token.pk}").status_code == 200
    response = client.get("/api/v1/wallet")
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "authentication_failed", "message": "Invalid or revoked API token.", "details": None}
    }
    assert response["WWW-Authenticate"] == 'Bearer realm="api"'


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer gpp_x", "Bearer gpp_abc_def", "Bearer nonsense"])
def test_malformed_tokens_are_refused_with_401(alice, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/me")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_no_credentials_gets_401_not_authenticated(db):
    response = APIClient().get("/api/v1/wallet")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"


def test_a_read_token_cannot_revoke(alice, alice_org):
    created = api_token_create(user=alice, organization=alice_org, name="ro", scope=TokenScope.READ)
    response = _client(created.plaintext).delete(f"/api/v1/tokens/{created.token.pk}")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    created.token.refresh_from_db()
    assert created.token.revoked_at is None


def test_charlie_gets_404_for_alices_wallet_ledger_and_tokens_in_the_api(alice, alice_org, charlie):
    alice_token = api_token_create(user=alice, organization=alice_org, name="a", scope=TokenScope.WRITE)
    charlie_token = api_token_create(
        user=charlie, organization=charlie.organizations.get(), name="c", scope=TokenScope.WRITE
    ).plaintext
    client = _client(charlie_token)
    for url in ("/api/v1/wallet", "/api/v1/wallet/ledger"):
        response = client.get(url, {"organization": alice_org.slug})
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"
    assert client.get(f"/api/v1/tokens/{alice_token.token.pk}").status_code == 404
    assert client.delete(f"/api/v1/tokens/{alice_token.token.pk}").status_code == 404
    alice_token.token.refresh_from_db()
    assert alice_token.token.revoked_at is None


def test_bob_as_member_reads_alices_org_wallet(bob, funded):
    created = api_token_create(user=bob, organization=funded, name="b", scope=TokenScope.READ)
    assert _client(created.plaintext).get("/api/v1/wallet").json()["balance"] == "12.000000"


def test_charlie_gets_404_for_alices_console_pages(client, alice, alice_org, charlie):
    token = api_token_create(user=alice, organization=alice_org, name="a", scope=TokenScope.READ).token
    client.force_login(charlie)
    for name in ("dashboard", "wallet", "instances", "jobs", "datasets", "apps"):
        assert client.get(reverse(name, args=[alice_org.slug])).status_code == 404, name
    assert client.post(reverse("api_token_revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
    assert "gpp_" + token.prefix not in client.get(reverse("api_tokens")).content.decode()


def test_the_console_wallet_pages_ledger_lines_and_serves_an_htmx_partial(client, alice, funded):
    client.force_login(alice)
    page = client.get(reverse("wallet", args=[funded.slug]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<html" in html and "12.00 CNY" in html and "-1.000000" in html
    partial = client.get(reverse("wallet", args=[funded.slug]), HTTP_HX_REQUEST="true")
    assert "<html" not in partial.content.decode() and "<table" in partial.content.decode()


def test_tokens_are_created_in_the_console_and_shown_once(client, alice, alice_org):
    client.force_login(alice)
    response = client.post(reverse("api_tokens"), {"name": "laptop", "organization": alice_org.slug, "scope": "write"})
    html = response.content.decode()
    token = ApiToken.objects.get(name="laptop")
    assert f"gpp_{token.prefix}_" in html and token.scope == "write"
    assert f"gpp_{token.prefix}_" in client.get(reverse("api_tokens")).content.decode()
    plaintext = html.split(f"gpp_{token.prefix}_", 1)[1].split("<", 1)[0]
    assert plaintext not in client.get(reverse("api_tokens")).content.decode()  # shown once only


def test_the_openapi_schema_validates(db):
    response = APIClient().get("/api/v1/schema")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    validate(schema)
    assert {"/api/v1/me", "/api/v1/wallet", "/api/v1/wallet/ledger", "/api/v1/tokens"} <= set(schema["paths"])
    docs = APIClient().get("/api/v1/docs")
    assert docs.status_code == 200 and "cdn" not in docs.content.decode().lower()


def test_throttling_limits_each_token(alice, alice_org, settings):
    from django.core.cache import cache

    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/min"}}
    from rest_framework.settings import api_settings
    from rest_framework.throttling import SimpleRateThrottle

    previous = SimpleRateThrottle.THROTTLE_RATES
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    try:
        token = api_token_create(user=alice, organization=alice_org, name="t", scope=TokenScope.READ)
        client = _client(token.plaintext)
        codes = [client.get("/api/v1/me").status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        assert client.get("/api/v1/me").json()["error"]["code"] == "throttled"
    finally:
        SimpleRateThrottle.THROTTLE_RATES = previous
        cache.clear()


def test_the_dashboard_speaks_chinese_when_the_browser_asks_for_it(client, alice, alice_org):
    client.force_login(alice)
    url = reverse("dashboard", args=[alice_org.slug])
    html = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9").content.decode()
    assert '<html lang="zh-hans">' in html
    assert "试用额度" in html and "概览" in html and "钱包" in html
    html_en = client.get(reverse("dashboard", args=[alice_org.slug]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Trial credit" in html_en and "试用额度" not in html_en


def test_every_catalogue_entry_is_translated():
    from pathlib import Path

    po = (Path(__file__).resolve().parents[2] / "portal/locale/zh_Hans/LC_MESSAGES/django.po").read_text()
    import re

    untranslated = re.findall(r'msgid ("(?:[^"\\]|\\.)+")\nmsgstr ""\n(?!")', po + "\n")
    assert untranslated == []
    assert "#, fuzzy" not in po


def test_an_oversized_api_body_gets_413_in_the_envelope(alice, alice_org):
    token = api_token_create(user=alice, organization=alice_org, name="w", scope=TokenScope.WRITE)
    client = _client(token.plaintext)
    response = client.post("/api/v1/jobs", '{"x": "' + "a" * (3 * 1024 * 1024) + '"}', content_type="application/json")
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "body_too_large"
