"""Per-minute metering, cumulative rounding, price changes, the budget guard and statements.

Time is frozen (time-machine); instances and their run segments are created directly, as the
instances app records them when an instance enters and leaves ``running``.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, connections

from billing.choices import GrantKind, TransactionKind
from billing.metering import budget_guard, metering_tick
from billing.models import LedgerEntry, LedgerTransaction, UsageRecord
from billing.pricing import cumulative_charge_micros, gpu_price_set
from billing.selectors import wallet_balance
from billing.services import credit_grant_create, wallet_top_up
from billing.statements import statement_build, statement_csv
from instances.models import GpuType, Instance, InstanceRunSegment

T0 = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def a100(db):
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=T0 - timedelta(days=30))
    return gpu_type


def _instance(org, gpu_type, *, gpus=1, start=T0, end=None, status="running") -> Instance:
    inst = Instance.objects.create(organization=org, name="i", gpu_type=gpu_type, gpu_count=gpus, status=status)
    InstanceRunSegment.objects.create(instance=inst, started_at=start, ended_at=end)
    return inst


def _ticks(time_machine, start: datetime, end: datetime, *, skip: set[datetime] = frozenset()):
    t = start
    while t <= end:
        if t not in skip:
            time_machine.move_to(t + timedelta(seconds=1))
            metering_tick(now=t + timedelta(seconds=1))
        t += MIN


@pytest.fixture
def funded(alice_org, time_machine):
    time_machine.move_to(T0 - timedelta(days=5))  # posted in October
    credit_grant_create(organization=alice_org, amount_micros=10_000_000, expires_at=T0 + timedelta(days=29),
                        kind=GrantKind.TRIAL, idempotency_key="trial")
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup")
    return alice_org


def _usage(instance) -> tuple[int, int]:
    rows = UsageRecord.objects.filter(instance_id=instance.pk)
    return rows.count(), sum(rows.values_list("amount_micros", flat=True))


@pytest.mark.django_db
def test_a_worker_restart_at_1030_still_charges_exactly_60_minutes(funded, a100, time_machine):
    inst = _instance(funded, a100, start=T0, end=T0 + timedelta(minutes=59, seconds=30))
    _ticks(time_machine, T0, T0 + timedelta(minutes=29))
    # the worker is down from 10:30 to 10:33; the first tick after the restart catches up
    _ticks(time_machine, T0 + timedelta(minutes=34), T0 + timedelta(minutes=70))
    assert _usage(inst) == (60, 5_000_000)
    minutes = list(UsageRecord.objects.filter(instance_id=inst.pk).order_by("minute").values_list("minute", flat=True))
    assert minutes == [T0 + i * MIN for i in range(60)]


@pytest.mark.django_db
def test_a_tick_skipped_for_five_minutes_charges_each_minute_once(funded, a100, time_machine):
    inst = _instance(funded, a100, start=T0, end=T0 + timedelta(minutes=59, seconds=30))
    skipped = {T0 + timedelta(minutes=m) for m in range(20, 25)}
    _ticks(time_machine, T0, T0 + timedelta(minutes=61), skip=skipped)
    assert _usage(inst) == (60, 5_000_000)


@pytest.mark.django_db
def test_a_duplicate_tick_charges_nothing(funded, a100, time_machine):
    inst = _instance(funded, a100, start=T0)
    time_machine.move_to(T0 + timedelta(minutes=9, seconds=5))
    first = metering_tick()
    second = metering_tick()
    assert (first.records, first.charged_micros) == (10, cumulative_charge_micros(
        price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=10))
    assert (second.records, second.charged_micros) == (0, 0)
    assert _usage(inst) == (10, 833_333)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="two concurrent beat processes need PostgreSQL locks")
def test_two_beat_processes_ticking_in_parallel_charge_60_minutes(alice_org, time_machine):
    gpu_type = GpuType.objects.create(code="A100-80G-SXM", name="A100", memory_gib=80)
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=T0 - timedelta(days=1))
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup")
    inst = _instance(alice_org, gpu_type, start=T0, end=T0 + timedelta(minutes=59, seconds=30))
    for minute in range(0, 62):
        now = T0 + timedelta(minutes=minute, seconds=2)
        barrier = threading.Barrier(2)

        def beat(now=now, barrier=barrier) -> None:
            barrier.wait()
            try:
                metering_tick(now=now)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=beat) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert _usage(inst) == (60, 5_000_000)
    assert wallet_balance(organization=alice_org).paid_micros == 95_000_000


@pytest.mark.django_db
def test_120_minutes_of_one_a100_at_5_cny_cost_exactly_10_cny_of_trial_credit(alice_org, a100, time_machine):
    time_machine.move_to(T0 - timedelta(hours=1))
    credit_grant_create(organization=alice_org, amount_micros=10_000_000, expires_at=T0 + timedelta(days=29),
                        kind=GrantKind.TRIAL, idempotency_key="trial")
    inst = _instance(alice_org, a100, start=T0, end=T0 + timedelta(minutes=120))
    _ticks(time_machine, T0, T0 + timedelta(minutes=125))
    assert _usage(inst) == (120, 10_000_000)
    bal = wallet_balance(organization=alice_org, now=T0 + timedelta(minutes=125))
    assert (bal.trial_micros, bal.paid_micros) == (0, 0)
    spent = LedgerEntry.objects.filter(transaction__kind=TransactionKind.USAGE, account__organization=alice_org)
    assert sum(spent.values_list("amount_micros", flat=True)) == -10_000_000


@pytest.mark.django_db
def test_a_price_change_at_noon_charges_earlier_minutes_at_the_old_price(funded, a100, time_machine):
    noon = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=noon)
    inst = _instance(funded, a100, gpus=2, start=noon - timedelta(minutes=30), end=noon + timedelta(minutes=30))
    _ticks(time_machine, noon - timedelta(minutes=30), noon + timedelta(minutes=31))
    rows = UsageRecord.objects.filter(instance_id=inst.pk)
    before = rows.filter(minute__lt=noon)
    after = rows.filter(minute__gte=noon)
    assert set(before.values_list("price_per_gpu_hour_micros", flat=True)) == {5_000_000}
    assert set(after.values_list("price_per_gpu_hour_micros", flat=True)) == {6_000_000}
    assert sum(before.values_list("amount_micros", flat=True)) == 5_000_000  # 30 min x 2 GPUs x 5.00/h
    assert sum(after.values_list("amount_micros", flat=True)) == 6_000_000
    assert list(after.order_by("minute").values_list("price_minute_index", flat=True))[:2] == [1, 2]


@pytest.mark.django_db
def test_the_tick_is_set_based_queries_do_not_grow_with_instances(funded, a100, time_machine,
                                                                   django_assert_max_num_queries):
    from django.db import connection as conn
    from django.test.utils import CaptureQueriesContext

    for _ in range(1):
        _instance(funded, a100, start=T0)
    time_machine.move_to(T0 + timedelta(seconds=30))
    with CaptureQueriesContext(conn) as one:
        metering_tick()
    for _ in range(25):
        _instance(funded, a100, start=T0 + timedelta(minutes=1))
    time_machine.move_to(T0 + timedelta(minutes=1, seconds=30))
    with CaptureQueriesContext(conn) as many:
        result = metering_tick()
    assert result.records == 26
    assert len(many.captured_queries) <= len(one.captured_queries) <= 30  # the first tick also creates accounts


@pytest.mark.django_db
def test_the_budget_guard_stops_work_before_the_balance_goes_negative(alice_org, a100, time_machine):
    time_machine.move_to(T0 - timedelta(minutes=1))
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="small")  # 1.00 CNY
    inst = _instance(alice_org, a100, gpus=8, start=T0)  # 8 x 5.00/h = 0.666667 CNY per minute
    time_machine.move_to(T0 + timedelta(seconds=5))
    metering_tick()
    assert wallet_balance(organization=alice_org).total_micros == 333_333
    stopped = budget_guard()
    assert stopped == [inst.pk]
    inst.refresh_from_db()
    assert inst.status == "stopping"
    assert inst.transitions.filter(to_status="stopping", reason__icontains="budget").exists()
    assert wallet_balance(organization=alice_org).total_micros >= 0


@pytest.mark.django_db
def test_usage_beyond_the_balance_is_never_charged_below_zero(alice_org, a100, time_machine):
    time_machine.move_to(T0 - timedelta(minutes=1))
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="small")
    _instance(alice_org, a100, gpus=8, start=T0)
    time_machine.move_to(T0 + timedelta(minutes=2, seconds=5))
    result = metering_tick()
    assert result.shortfalls == {alice_org.pk: 1_000_000}  # 3 minutes = 2.00 CNY, 1.00 covered
    assert wallet_balance(organization=alice_org).total_micros == 0


@pytest.mark.django_db
def test_statement_totals_equal_the_ledger_for_a_month_with_every_kind_of_line(funded, a100, time_machine):
    from billing.services import ledger_adjust, wallet_spend

    inst = _instance(funded, a100, gpus=2, start=T0, end=T0 + timedelta(minutes=45))
    _ticks(time_machine, T0, T0 + timedelta(minutes=46))
    wallet_spend(organization=funded, amount_micros=3_000_000, idempotency_key="license",
                 kind=TransactionKind.LICENSE_FEE, memo="license")
    ledger_adjust(organization=funded, amount_micros=-500_000, reason="correction",
                  staff_user=funded.memberships.first().user, idempotency_key="adj")
    time_machine.move_to(datetime(2026, 12, 1, 12, tzinfo=UTC))
    st = statement_build(organization=funded, year=2026, month=11, tz_name="Asia/Shanghai")
    kinds = {k.kind: k.amount_micros for k in st.by_kind}
    assert kinds == {"usage": -7_500_000, "license_fee": -3_000_000, "adjustment": -500_000}
    assert st.opening_micros == 110_000_000  # trial grant and top-up were posted in October (Shanghai time)
    assert st.closing_micros == 110_000_000 - 11_000_000
    ledger_total = sum(LedgerEntry.objects.filter(account__organization=funded).values_list("amount_micros", flat=True))
    assert st.closing_micros == ledger_total
    assert [(u.instance_id, u.minutes, u.amount_micros) for u in st.usage] == [(inst.pk, 45, 7_500_000)]
    assert st.usage_uncovered_micros == 0
    csv_text = statement_csv(st)
    assert "usage,instance " in csv_text and "-7.500000" in csv_text and "closing" in csv_text
    assert LedgerTransaction.objects.filter(kind="usage").count() == 46 - 1


@pytest.mark.django_db(transaction=True)
def test_low_balance_notices_mail_managers_once_and_clear_when_topped_up(alice_org, bob, a100, time_machine, client):
    from django.core import mail
    from django.urls import reverse

    from billing.models import LowBalanceNotice
    from billing.notices import low_balance_notices

    time_machine.move_to(T0 - timedelta(minutes=1))
    wallet_top_up(organization=alice_org, amount_micros=12_000_000, idempotency_key="t1")  # 12.00 CNY
    _instance(alice_org, a100, gpus=1, start=T0)
    time_machine.move_to(T0 + timedelta(seconds=5))
    metering_tick()
    mail.outbox.clear()
    assert low_balance_notices() == 1  # below 50, not below 10
    assert low_balance_notices() == 0  # already open: no second mail
    assert [m.to for m in mail.outbox] == [["alice@example.com"]]  # owners and admins only, not bob
    assert "balance below 50.00 CNY" in mail.outbox[0].subject
    client.force_login(bob)
    page = client.get(reverse("dashboard", args=[alice_org.slug])).content.decode()
    assert 'data-testid="low-balance"' in page
    assert 'data-testid="burn-rate">Running instances cost 5.00 CNY per hour.' in page
    assert "Your balance lasts 2 h 22 min." in page  # 11.916667 CNY // 0.083334 CNY per minute = 142 min
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="t2")
    low_balance_notices()
    assert LowBalanceNotice.objects.filter(cleared_at__isnull=True).count() == 0
    assert 'data-testid="low-balance"' not in client.get(reverse("dashboard", args=[alice_org.slug])).content.decode()
