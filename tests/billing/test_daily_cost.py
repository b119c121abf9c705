"""The wallet's "Cost per day" chart: what the organization's wallet was charged per day, by kind of spend,
from the ledger (GPU usage, app calls, dataset license fees, other spend), in the user's time zone."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse

from billing.choices import GrantKind, TransactionKind
from billing.models import CreditGrant
from billing.services import credit_grant_create, credit_grant_expire, ledger_adjust, wallet_spend, wallet_top_up
from billing.statements import daily_cost
from portal.models import User
from portal.selectors import organization_for_user

NOW = datetime(2026, 3, 10, 4, 0, tzinfo=UTC)  # 12:00 on 10 March in Asia/Shanghai (UTC+8)


def _at(time_machine, when: datetime) -> None:
    time_machine.move_to(when, tick=False)


@pytest.fixture
def spent(alice_org, charlie, time_machine):
    """Alice's organization spends on four kinds over 30 days; charlie's organization publishes the app."""
    charlie_org = organization_for_user(user=charlie)
    _at(time_machine, datetime(2026, 2, 1, tzinfo=UTC))
    wallet_top_up(organization=alice_org, amount_micros=50_000_000, idempotency_key="top-up")
    # 23:59:59 on 8 February in Shanghai: 31 days before today, outside the chart
    _at(time_machine, datetime(2026, 2, 8, 15, 59, 59, tzinfo=UTC))
    wallet_spend(organization=alice_org, amount_micros=9_990_000, idempotency_key="u0", kind=TransactionKind.USAGE)
    # 00:00 on 9 February in Shanghai: the chart's first day
    _at(time_machine, datetime(2026, 2, 8, 16, 0, tzinfo=UTC))
    wallet_spend(organization=alice_org, amount_micros=400_000, idempotency_key="u1", kind=TransactionKind.USAGE)
    # 8 March: 1.50 of GPU usage paid 1.00 from a trial grant and 0.50 from the paid balance
    _at(time_machine, datetime(2026, 3, 8, 2, 0, tzinfo=UTC))
    credit_grant_create(
        organization=alice_org,
        amount_micros=1_000_000,
        kind=GrantKind.TRIAL,
        expires_at=NOW + timedelta(days=30),
        idempotency_key="trial",
    )
    _at(time_machine, datetime(2026, 3, 8, 3, 0, tzinfo=UTC))
    wallet_spend(organization=alice_org, amount_micros=1_500_000, idempotency_key="u2", kind=TransactionKind.USAGE)
    # 23:30 UTC on 8 March = 07:30 on 9 March in Shanghai: a dataset license fee
    _at(time_machine, datetime(2026, 3, 8, 23, 30, tzinfo=UTC))
    wallet_spend(
        organization=alice_org, amount_micros=3_000_000, idempotency_key="lic", kind=TransactionKind.LICENSE_FEE
    )
    # 10 March: an app call of 2.00 (1.40 to the publisher), 0.25 of other spend, and things that are not spend
    _at(time_machine, datetime(2026, 3, 10, 1, 0, tzinfo=UTC))
    wallet_spend(
        organization=alice_org,
        amount_micros=2_000_000,
        idempotency_key="call",
        kind=TransactionKind.APP_CALL,
        credit_wallets=[(charlie_org.pk, 1_400_000)],
    )
    wallet_spend(organization=alice_org, amount_micros=250_000, idempotency_key="misc", kind=TransactionKind.SPEND)
    staff = User.objects.create_user(email="staff@example.com", password="x" * 12, is_staff=True)
    ledger_adjust(
        organization=alice_org, amount_micros=-100_000, reason="correction", staff_user=staff, idempotency_key="adj"
    )
    promo = credit_grant_create(
        organization=alice_org,
        amount_micros=700_000,
        kind=GrantKind.PROMOTIONAL,
        expires_at=NOW + timedelta(hours=1),
        idempotency_key="promo",
    )
    _at(time_machine, NOW)
    CreditGrant.objects.filter(pk=promo.pk).update(expires_at=NOW - timedelta(minutes=1))
    credit_grant_expire(grant=CreditGrant.objects.get(pk=promo.pk))
    return charlie_org


def _nonzero(days):
    return {c.day: {k: v for k, v in c.micros_by_kind.items() if v} for c in days if c.total_micros}


def test_each_day_holds_what_the_wallet_was_charged_by_kind_in_the_users_time_zone(
    alice_org, spent, django_assert_num_queries
):
    with django_assert_num_queries(1):
        days = daily_cost(organization=alice_org)
    assert [c.day for c in days] == [date(2026, 2, 9) + timedelta(days=i) for i in range(30)]
    assert days[-1].day == date(2026, 3, 10)
    assert _nonzero(days) == {
        date(2026, 2, 9): {"usage": 400_000},
        date(2026, 3, 8): {"usage": 1_500_000},
        date(2026, 3, 9): {"license_fee": 3_000_000},
        date(2026, 3, 10): {"app_call": 2_000_000, "spend": 250_000},
    }
    assert days[-1].micros_by_kind == {
        "usage": 0,
        "storage": 0,
        "app_call": 2_000_000,
        "license_fee": 0,
        "spend": 250_000,
    }
    assert days[-1].total_micros == 2_250_000


def test_the_days_follow_the_time_zone_asked_for(alice_org, spent):
    assert _nonzero(daily_cost(organization=alice_org, tz_name="UTC")) == {
        date(2026, 3, 8): {"usage": 1_500_000, "license_fee": 3_000_000},
        date(2026, 3, 10): {"app_call": 2_000_000, "spend": 250_000},
    }


def test_a_publishers_revenue_share_is_not_a_cost(spent):
    assert _nonzero(daily_cost(organization=spent)) == {}


def test_the_wallet_chart_stacks_the_kinds_and_names_each_days_total(client, alice, alice_org, charlie, spent):
    client.force_login(alice)
    html = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    assert "2026-03-10 · App call: 2.00 CNY (Total 2.25 CNY)" in html
    assert "2026-03-10 · Spend: 0.25 CNY (Total 2.25 CNY)" in html
    assert "2026-03-09 · Dataset license fee: 3.00 CNY (Total 3.00 CNY)" in html
    assert "2026-03-08 · GPU usage: 1.50 CNY (Total 1.50 CNY)" in html
    assert "2026-02-09 · GPU usage: 0.40 CNY (Total 0.40 CNY)" in html
    assert html.count('<rect class="bar bar-') == 5
    assert '<text x="4" y="12" class="axis">3.00 CNY</text>' in html  # the largest day
    client.force_login(charlie)
    assert client.get(reverse("wallet", args=[alice_org.slug])).status_code == 404
