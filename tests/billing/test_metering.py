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
def a100(db, time_machine):
    time_machine.move_to(T0 - timedelta(days=30))  # the price row is entered when it takes effect
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
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=T0 + timedelta(days=29),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
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
    assert (first.records, first.charged_micros) == (
        10,
        cumulative_charge_micros(price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=10),
    )
    assert (second.records, second.charged_micros) == (0, 0)
    assert _usage(inst) == (10, 833_333)


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="two concurrent beat processes need PostgreSQL locks")
def test_two_beat_processes_ticking_in_parallel_charge_60_minutes(alice_org, time_machine):
    gpu_type = GpuType.objects.create(code="A100-80G-SXM", name="A100", memory_gib=80)
    time_machine.move_to(T0 - timedelta(days=1))
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
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=T0 + timedelta(days=29),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
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
def test_the_tick_is_set_based_queries_do_not_grow_with_instances(
    funded, a100, time_machine, django_assert_max_num_queries
):
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
    wallet_spend(
        organization=funded,
        amount_micros=3_000_000,
        idempotency_key="license",
        kind=TransactionKind.LICENSE_FEE,
        memo="license",
    )
    ledger_adjust(
        organization=funded,
        amount_micros=-500_000,
        reason="correction",
        staff_user=funded.memberships.first().user,
        idempotency_key="adj",
    )
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


# --- per started minute of use, catch-up at the right grants, write-offs, months (issue 15) ---------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("start", "end", "minutes"),
    [
        (datetime(2026, 11, 2, 6, 38, 40, tzinfo=UTC), datetime(2026, 11, 2, 6, 43, 4, tzinfo=UTC), 5),  # 4 min 24 s
        (T0, T0 + timedelta(seconds=60), 1),
        (T0 + timedelta(seconds=15), T0 + timedelta(seconds=76), 2),  # 61 s
    ],
)
def test_it_charges_each_started_minute_of_use_counted_from_the_segment_start(
    funded, a100, time_machine, start, end, minutes, ledger_invariants
):
    inst = _instance(funded, a100, start=start, end=end)
    for t in (start, end, end + timedelta(minutes=5)):  # ticks at the second boundaries, then a late one
        time_machine.move_to(t)
        metering_tick(now=t)
    rows = list(
        UsageRecord.objects.filter(instance_id=inst.pk)
        .order_by("minute_index")
        .values_list("minute_index", "minute", "amount_micros")
    )
    assert [(i, m) for i, m, _ in rows] == [(i, start + i * MIN) for i in range(minutes)]
    assert sum(a for *_, a in rows) == cumulative_charge_micros(
        price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=minutes
    )
    ledger_invariants()


@pytest.mark.django_db
def test_a_running_minute_is_charged_the_moment_it_begins_and_once(funded, a100, time_machine):
    start = T0 + timedelta(seconds=30)
    inst = _instance(funded, a100, start=start)
    for t, expected in (
        (start, 1),
        (start + timedelta(seconds=59, microseconds=999_999), 1),
        (start + MIN, 2),
        (start + MIN, 2),
    ):
        time_machine.move_to(t)
        metering_tick(now=t)
        assert _usage(inst)[0] == expected


def test_the_integer_rounding_is_the_decimal_half_up_rounding():
    from decimal import Decimal

    from billing.money import round_micros

    for price in (1, 2_490_000, 5_000_000, 16_000_000, 7_777_777):
        for gpus in (1, 3, 7, 8, 1024):
            for minutes in (0, 1, 2, 30, 59, 61, 1440):
                assert cumulative_charge_micros(
                    price_per_gpu_hour_micros=price, gpus=gpus, minutes=minutes
                ) == round_micros(Decimal(price) * gpus * minutes / 60)


@pytest.mark.django_db
def test_a_catch_up_after_an_outage_charges_each_minute_against_the_grants_valid_then(
    alice_org, a100, time_machine, ledger_invariants
):
    from billing.models import CreditGrant

    time_machine.move_to(T0 - timedelta(days=1))
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=T0 + timedelta(minutes=30),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup")
    _instance(alice_org, a100, start=T0)
    _ticks(time_machine, T0, T0 + timedelta(minutes=19))  # minutes 0-19 charged live
    # workers down from 10:20 to 10:40; the trial grant expires at 10:30 meanwhile
    time_machine.move_to(T0 + timedelta(minutes=40, seconds=1))
    from billing.tasks import expire_credit_grants

    assert expire_credit_grants() == 0  # not posted while a catch-up may still need it
    result = metering_tick()
    assert result.records == 21  # minutes 20-40
    grant = CreditGrant.objects.get()
    # minutes 0-29 (before the expiry) came from the grant, 30-40 from the paid balance
    assert grant.account.balance_micros == 10_000_000 - cumulative_charge_micros(
        price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=30
    )
    bal = wallet_balance(organization=alice_org)
    assert bal.paid_micros == 100_000_000 - (
        cumulative_charge_micros(price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=41) - 2_500_000
    )
    assert LedgerTransaction.objects.filter(kind="usage").count() == 20 + 2  # the catch-up split at 10:30
    time_machine.move_to(T0 + timedelta(minutes=30, hours=24, seconds=1))
    assert expire_credit_grants() == 1
    grant.refresh_from_db()
    assert grant.account.balance_micros == 0
    ledger_invariants()


@pytest.mark.django_db
def test_minutes_older_than_the_lookback_are_written_off_visibly(
    client, alice, funded, a100, time_machine, settings, ledger_invariants
):
    from django.urls import reverse

    from billing.models import UsageWriteOff
    from portal.models import AuditEvent

    settings.METERING_LOOKBACK_HOURS = 24
    time_machine.move_to(T0 - MIN)
    metering_tick()  # a tick ran before the outage
    ended = _instance(funded, a100, start=T0, end=T0 + timedelta(hours=1))  # entirely before the window
    running = _instance(funded, a100, start=T0)
    now = T0 + timedelta(hours=30, seconds=5)
    time_machine.move_to(now)
    result = metering_tick()
    assert result.written_off_minutes == 60 + 361  # 10:00:00 to 16:00:00 began before 16:00:05 a day earlier
    assert sorted(UsageWriteOff.objects.values_list("instance_id", "first_minute", "minutes")) == [
        (ended.pk, T0, 60),
        (running.pk, T0, 361),
    ]
    assert _usage(running)[0] == 24 * 60  # 16:01 (day 2) to 16:00 (day 3)
    assert _usage(ended) == (0, 0)
    assert AuditEvent.objects.filter(action="billing.usage_written_off").count() == 2
    assert metering_tick().written_off_minutes == 0  # once
    st = statement_build(organization=funded, year=2026, month=11, tz_name="Asia/Shanghai")
    assert [(x.instance_id, x.minutes, x.amount_micros) for x in st.write_offs] == [
        (ended.pk, 60, 5_000_000),
        (running.pk, 361, 30_083_333),
    ]
    assert (
        f"write-off,instance {running.pk},older than the metering lookback (not charged),361 min,30.083333"
        in statement_csv(st)
    )
    client.force_login(alice)
    page = client.get(reverse("statement", args=[funded.slug, 2026, 11])).content.decode()
    assert f'data-testid="write-off-{running.pk}">30.083333' in page
    ledger_invariants()


@pytest.mark.django_db
def test_a_shortfall_is_its_own_line_on_the_statement_page_csv_and_api(
    client, alice, alice_org, a100, time_machine, ledger_invariants
):
    from django.urls import reverse
    from rest_framework.test import APIClient

    from portal.services import api_token_create

    time_machine.move_to(T0 - timedelta(minutes=1))
    wallet_top_up(organization=alice_org, amount_micros=1_000_000, idempotency_key="small")
    _instance(alice_org, a100, gpus=8, start=T0)
    time_machine.move_to(T0 + timedelta(minutes=2, seconds=5))
    assert metering_tick().shortfalls == {alice_org.pk: 1_000_000}
    st = statement_build(organization=alice_org, year=2026, month=11, tz_name="Asia/Shanghai")
    assert (st.usage_total_micros, st.usage_uncovered_micros) == (2_000_000, 1_000_000)
    assert "usage,shortfall,usage the balance could not cover (not charged),,1.000000" in statement_csv(st)
    client.force_login(alice)
    page = client.get(reverse("statement", args=[alice_org.slug, 2026, 11])).content.decode()
    assert 'data-testid="usage-shortfall">1.000000' in page
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION="Bearer "
        + api_token_create(user=alice, organization=alice_org, name="t", scope="read").plaintext
    )
    body = api.get("/api/v1/statements/2026/11").json()
    assert (body["usage_total_micros"], body["usage_uncovered_micros"]) == (2_000_000, 1_000_000)
    ledger_invariants()


@pytest.mark.django_db
def test_late_ticks_across_local_midnight_keep_each_months_usage_and_ledger_equal(
    client, alice, funded, a100, time_machine, ledger_invariants
):
    from django.urls import reverse
    from rest_framework.test import APIClient

    from portal.services import api_token_create

    midnight = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)  # 2026-12-01 00:00 in Asia/Shanghai
    inst = _instance(funded, a100, gpus=3, start=midnight - timedelta(minutes=10), end=midnight + timedelta(minutes=10))
    _ticks(time_machine, midnight - timedelta(minutes=10), midnight - timedelta(minutes=6))
    time_machine.move_to(midnight + timedelta(minutes=5, seconds=30))  # late: minutes 23:55-00:05 at once
    metering_tick()
    time_machine.move_to(midnight + timedelta(minutes=20))
    metering_tick()
    assert _usage(inst)[0] == 20
    api = APIClient()
    api.credentials(
        HTTP_AUTHORIZATION="Bearer "
        + api_token_create(user=alice, organization=funded, name="t", scope="read").plaintext
    )
    client.force_login(alice)
    per_minute = cumulative_charge_micros(price_per_gpu_hour_micros=5_000_000, gpus=3, minutes=1)
    assert per_minute == 250_000
    for month, year in ((11, 2026), (12, 2026)):
        st = statement_build(organization=funded, year=year, month=month, tz_name="Asia/Shanghai")
        usage_ledger = -sum(k.amount_micros for k in st.by_kind if k.kind == "usage")
        assert [(u.minutes, u.amount_micros) for u in st.usage] == [(10, 2_500_000)]
        assert usage_ledger == st.usage_total_micros == 2_500_000
        assert st.usage_uncovered_micros == 0
        body = api.get(f"/api/v1/statements/{year}/{month}").json()
        assert [u["amount_micros"] for u in body["usage"]] == [2_500_000]
        assert [k["amount_micros"] for k in body["by_kind"] if k["kind"] == "usage"] == [-2_500_000]
        page = client.get(reverse("statement", args=[funded.slug, year, month])).content.decode()
        assert 'data-testid="kind-usage">-2.500000' in page and 'data-testid="usage-total">2.500000' in page
        csv_text = statement_csv(st)
        assert ",10 min,-2.500000\r\n" in csv_text
        assert [line.rsplit(",", 1)[1] for line in csv_text.splitlines() if line.startswith("ledger,usage,")] == [
            "-2.500000"
        ]
    ledger_invariants()


@pytest.mark.django_db
def test_small_chunks_and_organization_shards_charge_exactly_what_one_big_pass_does(
    alice, alice_org, a100, time_machine, ledger_invariants
):
    from portal.services import organization_create

    orgs = [alice_org, *(organization_create(name=f"lab {i}", owner=alice) for i in (1, 2))]
    time_machine.move_to(T0 - timedelta(days=1))
    for i, org in enumerate(orgs):
        credit_grant_create(
            organization=org,
            amount_micros=1_000_000,
            expires_at=T0 + timedelta(minutes=7 + i),
            kind=GrantKind.TRIAL,
            idempotency_key=f"trial-{i}",
        )
        wallet_top_up(organization=org, amount_micros=100_000_000, idempotency_key=f"topup-{i}")
    instances = [_instance(org, a100, gpus=g, start=T0 + timedelta(seconds=7 * g)) for org in orgs for g in (1, 3)]
    now = T0 + timedelta(minutes=30, seconds=10)
    time_machine.move_to(now)
    results = [metering_tick(now=now, shard=(k, 2), chunk_rows=7) for k in (0, 1)]  # a 30-minute catch-up
    assert sum(r.passes for r in results) > len(orgs)  # many small transactions
    assert metering_tick(now=now).records == 0  # nothing left for an unsharded tick
    for inst in instances:
        minutes = 31 if inst.gpu_count == 1 else 30  # started at 10:00:07 / 10:00:21
        assert _usage(inst) == (
            minutes,
            cumulative_charge_micros(price_per_gpu_hour_micros=5_000_000, gpus=inst.gpu_count, minutes=minutes),
        )
    for i, org in enumerate(orgs):  # each grant paid exactly for the minutes begun before its expiry
        grant_spent = -sum(
            LedgerEntry.objects.filter(account__grant__wallet__organization=org, transaction__kind="usage").values_list(
                "amount_micros", flat=True
            )
        )
        before = list(UsageRecord.objects.filter(organization=org, minute__lt=T0 + timedelta(minutes=7 + i)))
        assert grant_spent == min(1_000_000, sum(r.amount_micros for r in before))
    ledger_invariants()
