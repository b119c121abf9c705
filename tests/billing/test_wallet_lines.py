"""What the wallet says (issue 18): staff grants shown as "Credit from staff" with their own expiry (and their
balance in the back office), statements only from the organization's first month, and ledger lines and
statements that name the instance, the job and the app."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from billing.choices import GrantKind, TransactionKind
from billing.metering import metering_tick
from billing.pricing import gpu_price_set
from billing.services import credit_grant_create, wallet_spend, wallet_top_up
from instances.models import GpuType, Instance, InstanceRunSegment, TrainingJob
from portal.models import Organization, User

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)


def _api(user):
    api = APIClient()
    api.force_authenticate(user)
    return api


# --- d: staff grants ------------------------------------------------------------------------------------------
def test_a_staff_grant_is_credit_from_staff_with_its_own_expiry_beside_the_trial(
    client, alice, alice_org, time_machine
):
    time_machine.move_to(datetime(2026, 12, 1, 4, 0, tzinfo=UTC))
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=datetime(2026, 12, 31, 4, 0, tzinfo=UTC),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    credit_grant_create(
        organization=alice_org,
        amount_micros=50_000_000,
        expires_at=datetime(2027, 3, 1, 4, 0, tzinfo=UTC),
        kind=GrantKind.STAFF,
        idempotency_key="staff",
        reason="conference voucher",
    )
    client.force_login(alice)
    for url in (reverse("wallet", args=[alice_org.slug]), reverse("dashboard", args=[alice_org.slug])):
        html = client.get(url).content.decode()
        # times in the user's zone (Asia/Shanghai, +8)
        assert '<li data-testid="grant-trial">Trial credit: 10.00 CNY, expires 2026-12-31 12:00</li>' in html, url
        assert '<li data-testid="grant-staff">Credit from staff: 50.00 CNY, expires 2027-03-01 12:00</li>' in html, url
        assert "<h2>Credit</h2>" in html
    from billing.selectors import wallet_grants

    assert [(g.kind, g.label, g.balance_micros) for g in wallet_grants(organization=alice_org)] == [
        ("trial", "Trial credit", 10_000_000),
        ("staff", "Credit from staff", 50_000_000),
    ]


def test_a_trial_alone_is_still_called_trial_credit(client, alice, alice_org):
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=datetime.now(UTC) + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    client.force_login(alice)
    html = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    assert "<h2>Trial credit</h2>" in html and 'data-testid="grant-staff"' not in html


def test_the_admin_wallet_list_shows_paid_credit_and_total(client, alice_org, bob):
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    wallet_top_up(organization=alice_org, amount_micros=3_000_000, idempotency_key="t")
    url = reverse("admin:billing_wallet_changelist")
    resp = client.post(
        url,
        {
            "action": "grant_credit",
            "_selected_action": [alice_org.wallet.pk],
            "apply": "1",
            "amount": "25.00",
            "days": 90,
            "reason": "voucher",
        },
    )
    assert resp.status_code == 302
    html = client.get(url).content.decode()
    assert '<td class="field-paid_balance">3.000000</td>' in html
    assert '<td class="field-credit_balance">25.000000</td>' in html
    assert '<td class="field-total_balance">28.000000</td>' in html
    # a grant past its expiry no longer counts, even before the expiry task posts it
    from billing.models import CreditGrant

    CreditGrant.objects.update(expires_at=datetime.now(UTC) - timedelta(seconds=1))
    html = client.get(url).content.decode()
    assert '<td class="field-credit_balance">0.000000</td>' in html


def test_a_staff_grant_without_a_reason_is_refused_and_grants_nothing(client, alice_org):
    from billing.models import CreditGrant

    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    resp = client.post(
        reverse("admin:billing_wallet_changelist"),
        {
            "action": "grant_credit",
            "_selected_action": [alice_org.wallet.pk],
            "apply": "1",
            "amount": "25.00",
            "days": 90,
            "reason": "",
        },
    )
    assert resp.status_code == 200 and "This field is required." in resp.content.decode()
    assert CreditGrant.objects.count() == 0


# --- e: statement months --------------------------------------------------------------------------------------
def test_statements_are_offered_from_the_first_month_only(client, alice, alice_org, time_machine):
    time_machine.move_to(datetime(2026, 12, 1, 4, 0, tzinfo=UTC))
    Organization.objects.filter(pk=alice_org.pk).update(created_at=datetime(2026, 9, 15, tzinfo=UTC))
    client.force_login(alice)
    html = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    months = [m for m in ("2026-12", "2026-11", "2026-10", "2026-09", "2026-08") if f">{m}</a>" in html]
    assert months == ["2026-12", "2026-11", "2026-10", "2026-09"]
    assert client.get(reverse("statement", args=[alice_org.slug, 2026, 9])).status_code == 200
    refused = client.get(reverse("statement", args=[alice_org.slug, 2026, 8]))
    assert refused.status_code == 404
    resp = _api(alice).get("/api/v1/statements/2026/8")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "no_statement"
    assert resp.json()["error"]["message"] == "alice has statements from 2026-09 on; there is none for 2026-08."


def test_a_ledger_transaction_before_creation_opens_its_month(alice_org, time_machine):
    from billing.statement_months import statement_months

    time_machine.move_to(datetime(2026, 7, 20, tzinfo=UTC))
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="old")  # imported history
    Organization.objects.filter(pk=alice_org.pk).update(created_at=datetime(2026, 9, 15, tzinfo=UTC))
    alice_org.refresh_from_db()
    now = datetime(2026, 9, 30, 17, 0, tzinfo=UTC)  # 2026-10-01 01:00 in Shanghai
    assert statement_months(organization=alice_org, tz_name="Asia/Shanghai", now=now) == [
        (2026, 10),
        (2026, 9),
        (2026, 8),
        (2026, 7),
    ]
    assert statement_months(organization=alice_org, tz_name="UTC", now=now, limit=2) == [(2026, 9), (2026, 8)]


# --- f: lines that name what they are for ---------------------------------------------------------------------
@pytest.fixture
def usage(alice_org, time_machine):
    """A training job (legal-tiny) and an interactive instance (box) that ran 3 minutes each on 2026-11-02."""
    time_machine.move_to(T0 - timedelta(days=5))
    gpu = GpuType.objects.create(code="A100-80G-SXM", name="A100", memory_gib=80)
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=T0 - timedelta(days=5))
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup")
    job_inst = Instance.objects.create(organization=alice_org, name="legal-tiny", gpu_type=gpu, gpu_count=1)
    job = TrainingJob.objects.create(instance=job_inst, organization=alice_org, name="legal-tiny")
    box = Instance.objects.create(organization=alice_org, name="box", gpu_type=gpu, gpu_count=1, kind="interactive")
    for inst in (job_inst, box):
        InstanceRunSegment.objects.create(instance=inst, started_at=T0, ended_at=T0 + timedelta(minutes=3))
    time_machine.move_to(T0 + timedelta(minutes=5))
    metering_tick()
    wallet_spend(
        organization=alice_org,
        amount_micros=2_000_000,
        idempotency_key="call-1",
        kind=TransactionKind.APP_CALL,
        memo="App call: Contract review",
        metadata={"app": "contract-review", "call": 1},
    )
    wallet_spend(
        organization=alice_org,
        amount_micros=500_000,
        idempotency_key="call-2",
        kind=TransactionKind.APP_CALL,
        memo="App call: Contract review",
        metadata={"app": "contract-review", "call": 2},
    )
    return job, job_inst, box


def test_the_ledger_names_the_job_and_the_instance_of_gpu_usage(client, alice, alice_org, usage):
    job, _job_inst, box = usage
    client.force_login(alice)
    html = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    assert f"<td>GPU usage: legal-tiny (job {job.pk}), box (instance {box.pk})</td>" in html
    assert "<td>App call: Contract review</td>" in html
    partial = client.get(reverse("wallet", args=[alice_org.slug]), HTTP_HX_REQUEST="true").content.decode()
    assert f"GPU usage: legal-tiny (job {job.pk}), box (instance {box.pk})" in partial


def test_the_statement_names_instances_jobs_and_apps(client, alice, alice_org, usage):
    job, job_inst, box = usage
    client.force_login(alice)
    url = reverse("statement", args=[alice_org.slug, 2026, 11])
    html = client.get(url).content.decode()
    assert f'<td data-testid="usage-instance-{job_inst.pk}">legal-tiny (job {job.pk})</td>' in html
    assert f'<td data-testid="usage-instance-{box.pk}">box (instance {box.pk})</td>' in html
    assert '<tr><td>App call: Contract review</td><td class="num">2</td><td class="num">2.500000</td></tr>' in html
    csv_text = client.get(url + "?format=csv").content.decode()
    # 3 minutes of one A100 at 6.00 CNY per GPU-hour = 0.30 CNY
    assert (
        f"usage,instance {job_inst.pk}: legal-tiny (job {job.pk}),1 x A100-80G-SXM (container),3 min,-0.300000"
        in csv_text
    )
    assert "app-call,App call: Contract review,,2 calls,-2.500000" in csv_text


def test_charlie_sees_none_of_alices_lines(client, charlie, alice_org, usage):
    client.force_login(charlie)
    assert client.get(reverse("wallet", args=[alice_org.slug])).status_code == 404
    assert client.get(reverse("statement", args=[alice_org.slug, 2026, 11])).status_code == 404
