"""Billing pages and API: pricing and the TCO calculator, statements, usage, top-ups, back office."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from billing.models import CreditGrant, UsageRecord
from billing.pricing import seed_price_book
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from billing.tco import TcoInputs, tco_compare
from portal.choices import TokenScope
from portal.models import AuditEvent, User
from portal.services import api_token_create

pytestmark = pytest.mark.django_db


def _api(user, org, scope=TokenScope.READ) -> APIClient:
    client = APIClient()
    token = api_token_create(user=user, organization=org, name="t", scope=scope)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
    return client


def test_tco_compare_is_exact_for_documented_inputs():
    result = tco_compare(
        TcoInputs(
            gpu_type="A100-80G-SXM",
            gpus=8,
            months=36,
            utilization=Decimal("0.6"),
            card_price=Decimal(85000),
            server_overhead=Decimal("0.35"),
            gpu_power_kw=Decimal("0.4"),
            pue=Decimal("1.5"),
            power_price=Decimal("0.8"),
            staff_monthly=Decimal(20000),
            rent_price_per_gpu_hour=Decimal("8.00"),
        )
    )
    # buy: 8 x 85000 x 1.35 = 918000 up front; monthly 0.4 x 8 x 730 x 1.5 x 0.8 + 20000 = 22803.2
    assert result.buy_total == Decimal("1738915.20")
    # rent: 730 x 0.6 x 8 x 8.00 = 28032 a month
    assert result.rent_total == Decimal("1009152.00")
    assert result.saving_percent == Decimal("42.0")
    assert result.buy_curve[0] == (0, Decimal("918000.00")) and result.rent_curve[0] == (0, Decimal("0.00"))


def test_the_pricing_page_is_public_and_the_calculator_answers_htmx(client):
    seed_price_book()
    page = client.get(reverse("pricing"))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="price-A100-80G-SXM">8.00<' in html
    params = {
        "gpu_type": "A100-80G-SXM",
        "gpus": 8,
        "months": 36,
        "utilization": 60,
        "server_overhead": 35,
        "pue": "1.5",
        "power_price": "0.80",
        "staff_monthly": 20000,
    }
    partial = client.get(reverse("pricing"), params, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial
    assert 'data-testid="tco-saving">42.0 %<' in partial and "<svg" in partial
    bad = client.get(reverse("pricing"), {**params, "gpus": 0})
    assert bad.status_code == 400 and "Ensure this value is greater than or equal to 1." in bad.content.decode()


def test_statement_page_and_csv_and_charlie_gets_404(client, alice, alice_org, charlie):
    wallet_top_up(organization=alice_org, amount_micros=50_000_000, idempotency_key="t")
    now = datetime.now(tz=UTC)
    client.force_login(alice)
    url = reverse("statement", args=[alice_org.slug, now.year, now.month])
    page = client.get(url)
    assert page.status_code == 200 and 'data-testid="closing">50.000000<' in page.content.decode()
    csv_response = client.get(url, {"format": "csv"})
    assert csv_response["Content-Type"] == "text/csv; charset=utf-8"
    assert "ledger,top_up,Top-up,1,50.000000" in csv_response.content.decode()
    assert client.get(reverse("statement", args=[alice_org.slug, now.year, 13])).status_code == 404
    client.force_login(charlie)
    assert client.get(url).status_code == 404
    assert client.get(url, {"format": "csv"}).status_code == 404


def test_usage_api_filters_and_is_scoped(alice, alice_org, charlie):
    t0 = datetime(2026, 11, 2, 10, tzinfo=UTC)
    for m in range(3):
        UsageRecord.objects.create(
            instance_id=7,
            organization=alice_org,
            minute=t0 + timedelta(minutes=m),
            gpu_type="A100-80G-SXM",
            mode="container",
            gpu_count=1,
            price_per_gpu_hour_micros=5_000_000,
            price_minute_index=m + 1,
            amount_micros=83_333,
        )
    client = _api(alice, alice_org)
    body = client.get("/api/v1/usage", {"instance": 7, "since": "2026-11-02T10:01:00+00:00"}).json()
    assert [r["minute"] for r in body["results"]] == ["2026-11-02T18:02:00+08:00", "2026-11-02T18:01:00+08:00"]
    assert body["results"][0]["amount"] == "0.083333"
    assert client.get("/api/v1/usage", {"since": "yesterday"}).status_code == 400
    outsider = _api(charlie, charlie.organizations.get())
    assert outsider.get("/api/v1/usage", {"organization": alice_org.slug}).status_code == 404
    assert outsider.get("/api/v1/usage").json()["results"] == []


def test_statement_api_equals_the_ledger(alice, alice_org):
    wallet_top_up(organization=alice_org, amount_micros=20_000_000, idempotency_key="t")
    now = datetime.now(tz=UTC)
    body = _api(alice, alice_org).get(f"/api/v1/statements/{now.year}/{now.month}").json()
    assert body["closing_micros"] == 20_000_000
    assert body["by_kind"] == [{"kind": "top_up", "count": 1, "amount_micros": 20_000_000}]
    assert _api(alice, alice_org).get(f"/api/v1/statements/{now.year}/0").status_code == 400


def test_top_up_api_says_plainly_when_payments_are_not_configured(alice, alice_org, settings):
    settings.STRIPE_SECRET_KEY = ""
    response = _api(alice, alice_org, TokenScope.WRITE).post(
        "/api/v1/wallet/top-ups",
        {"amount": "200.00", "success_url": "https://x.test/ok", "cancel_url": "https://x.test/no"},
        format="json",
    )
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "payments_not_configured"
    bad = _api(alice, alice_org, TokenScope.WRITE).post("/api/v1/wallet/top-ups", {"amount": "x"}, format="json")
    assert bad.status_code == 400 and set(bad.json()["error"]["details"]) == {"amount", "success_url", "cancel_url"}


def test_staff_grant_credit_in_admin_is_audited(client, alice_org):
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    wallet = alice_org.wallet
    response = client.post(
        reverse("admin:billing_wallet_changelist"),
        {
            "action": "grant_credit",
            "_selected_action": [wallet.pk],
            "apply": "1",
            "amount": "25.00",
            "days": 90,
            "reason": "conference voucher",
        },
    )
    assert response.status_code == 302
    grant = CreditGrant.objects.get(wallet=wallet)
    assert (grant.kind, grant.amount_micros, grant.reason) == ("staff", 25_000_000, "conference voucher")
    assert wallet_balance(organization=alice_org).trial_micros == 25_000_000
    assert AuditEvent.objects.filter(action="admin.grant_credit", staff=True, actor=staff).count() == 1


def test_staff_adjustment_needs_a_reason_and_posts_a_balanced_transaction(client, alice_org):
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    url = reverse("admin:billing_wallet_changelist")
    no_reason = client.post(
        url,
        {
            "action": "post_adjustment",
            "_selected_action": [alice_org.wallet.pk],
            "apply": "1",
            "amount": "5.00",
            "reason": "",
        },
    )
    assert no_reason.status_code == 200 and "This field is required." in no_reason.content.decode()
    assert wallet_balance(organization=alice_org).paid_micros == 0
    client.post(
        url,
        {
            "action": "post_adjustment",
            "_selected_action": [alice_org.wallet.pk],
            "apply": "1",
            "amount": "5.00",
            "reason": "goodwill",
        },
    )
    assert wallet_balance(organization=alice_org).paid_micros == 5_000_000
    assert AuditEvent.objects.filter(action="billing.adjustment", staff=True).count() == 1
    # the ledger itself is read-only in the admin
    assert client.get(reverse("admin:billing_ledgertransaction_add")).status_code == 403


def test_absurd_calculator_inputs_get_a_form_error_not_a_server_error(client):
    seed_price_book()
    params = {
        "gpu_type": "A100-80G-SXM",
        "gpus": 8,
        "months": 36,
        "utilization": 60,
        "server_overhead": 35,
        "pue": "1.5",
        "power_price": "0.80",
        "staff_monthly": 20000,
    }
    for field in ("card_price", "staff_monthly", "power_price"):
        response = client.get(reverse("pricing"), {**params, field: "1e30"})
        assert response.status_code == 400, field
        assert "Ensure this value is less than or equal to" in response.content.decode()
