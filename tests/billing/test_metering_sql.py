"""The PostgreSQL tick (``billing.tick_sql``) writes exactly what the portable tick writes.

One scenario holds every case the SQL computes itself: a catch-up across a price change, across local midnight
(a new month in Asia/Shanghai), across two grant expiries, a shortfall, an instance with two run segments both
partly uncharged whose run at one price continues from its cursor, odd-second segment starts, small chunks and
two organization shards. The catch-up runs once the portable way (rolled back) and once the PostgreSQL way; the
usage records, cursors, ledger transactions, balances and tick results must be identical.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from billing import metering
from billing.choices import GrantKind, SystemAccount
from billing.metering import TickResult, metering_tick
from billing.models import LedgerAccount, LedgerTransaction, MeteringCursor, UsageRecord
from billing.pricing import gpu_price_set
from billing.services import credit_grant_create, system_account, wallet_top_up
from instances.models import GpuType, Instance, InstanceRunSegment

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the SQL tick runs on PostgreSQL only")

MIDNIGHT = datetime(2026, 11, 30, 16, 0, tzinfo=UTC)  # 2026-12-01 00:00 in Asia/Shanghai
T = MIDNIGHT - timedelta(minutes=40)
S = timedelta(seconds=1)
M = timedelta(minutes=1)


def _segment(org, gpu_type, gpus, *spans) -> Instance:
    inst = Instance.objects.create(organization=org, name="i", gpu_type=gpu_type, gpu_count=gpus, status="running")
    for start, end in spans:
        InstanceRunSegment.objects.create(instance=inst, started_at=start, ended_at=end)
    return inst


def _state() -> dict[str, object]:
    """Everything a tick writes, by natural keys (ids of transactions differ between the two runs)."""
    usage = sorted(
        (
            r.organization_id,
            r.instance_id,
            r.segment_id,
            r.minute_index,
            r.minute,
            r.gpu_type,
            r.mode,
            r.gpu_count,
            r.price_per_gpu_hour_micros,
            r.price_minute_index,
            r.amount_micros,
            r.transaction.idempotency_key if r.transaction_id else None,
        )
        for r in UsageRecord.objects.select_related("transaction")
    )
    transactions = sorted(
        (
            t.idempotency_key,
            t.organization_id,
            t.memo,
            t.created_at,
            sorted(t.metadata.items()),
            sorted(t.entries.values_list("account_id", "amount_micros")),
        )
        for t in LedgerTransaction.objects.filter(kind="usage").prefetch_related("entries")
    )
    cursors = sorted(MeteringCursor.objects.values_list())
    balances = sorted(LedgerAccount.objects.filter(track_balance=True).values_list("code", "balance_micros"))
    return {"usage": usage, "transactions": transactions, "cursors": cursors, "balances": balances}


def _catch_up(now: datetime) -> tuple[TickResult, ...]:
    return tuple(metering_tick(now=now, shard=(k, 2), chunk_rows=9) for k in (0, 1))


def _summary(results: tuple[TickResult, ...]) -> list[tuple[object, ...]]:
    return [(r.records, r.charged_micros, r.organizations, r.shortfalls, r.passes, r.conflicts) for r in results]


@pytest.mark.django_db(transaction=False)
def test_the_sql_tick_writes_exactly_what_the_portable_tick_writes(alice, alice_org, time_machine, monkeypatch):
    from portal.services import organization_create

    time_machine.move_to(T - timedelta(days=30))
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=T - timedelta(days=30))
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=MIDNIGHT - 5 * M)
    lab, tiny = (organization_create(name=name, owner=alice) for name in ("lab", "tiny"))
    time_machine.move_to(T - timedelta(days=1))
    credit_grant_create(
        organization=alice_org,
        amount_micros=1_000_000,
        expires_at=MIDNIGHT - 12 * M + 30 * S,
        kind=GrantKind.TRIAL,
        idempotency_key="trial-alice",
    )
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup-alice")
    credit_grant_create(
        organization=tiny,
        amount_micros=500_000,
        expires_at=MIDNIGHT + 3 * M,
        kind=GrantKind.TRIAL,
        idempotency_key="trial-tiny",
    )
    wallet_top_up(organization=tiny, amount_micros=20_000, idempotency_key="topup-tiny")  # runs short
    wallet_top_up(organization=lab, amount_micros=100_000_000, idempotency_key="topup-lab")
    _segment(alice_org, gpu_type, 1, (T + 7 * S, None))
    _segment(alice_org, gpu_type, 3, (T + 20 * S, T + 9 * M + 5 * S), (T + 15 * M + 40 * S, None))
    _segment(tiny, gpu_type, 2, (T + 3 * S, None))
    _segment(lab, gpu_type, 8, (T, MIDNIGHT + 2 * M + 59 * S))
    time_machine.move_to(T + 2 * M)
    live = metering_tick(now=T + 2 * M)  # minutes 0-1 of each segment begun by then: cursors exist
    assert live.records == 9  # 2 minutes of three segments, 3 of the one that began at T
    assert live.portable_chunks == 0

    now = MIDNIGHT + 10 * M + 13 * S
    time_machine.move_to(now)
    with monkeypatch.context() as patch, transaction.atomic():
        patch.setattr(metering, "_tick_in_sql", metering._tick_in_python)
        portable = _catch_up(now)
        expected = _state()
        transaction.set_rollback(True)
    in_sql = _catch_up(now)

    assert _summary(in_sql) == _summary(portable)
    assert [r.portable_chunks for r in in_sql] == [0, 0]  # every chunk charged by the SQL statements
    assert _state() == expected
    usage = expected["usage"]
    assert len(usage) == sum(r.records for r in in_sql) + live.records == 189  # 51 + (9 + 35) + 51 + 43
    assert {row[8] for row in usage} == {5_000_000, 6_000_000}  # both prices charged
    assert {t[0].split(":")[2][:8] for t in expected["transactions"]} == {"20261130"}  # UTC day of first minutes
    assert sum(r.shortfalls.get(tiny.pk, 0) for r in in_sql) > 0
    assert metering_tick(now=now).records == 0  # nothing left over, nothing charged twice


@pytest.mark.django_db(transaction=False)
def test_both_ticks_charge_an_open_segment_only_up_to_its_last_sighting(alice, alice_org, time_machine, monkeypatch):
    """Open segments seen by a reconcile (``seen_until``) are charged up to the sighting, inclusive, by both
    engines alike: a sighting inside a minute, one exactly at a minute's start (that minute counts), one
    before a price change, none at all (charged up to the tick), and a closed segment (its end wins)."""
    time_machine.move_to(T - timedelta(days=2))
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=T - timedelta(days=2))
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=T + 4 * M)
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup-alice")
    spans = [(T + 7 * S, T + 3 * M + 30 * S), (T, T + 5 * M), (T + 20 * S, T + 2 * M), (T, None)]
    for start, seen in spans:
        inst = Instance.objects.create(
            organization=alice_org, name="i", gpu_type=gpu_type, gpu_count=1, status="running"
        )
        InstanceRunSegment.objects.create(instance=inst, started_at=start, seen_until=seen)
    closed = Instance.objects.create(organization=alice_org, name="c", gpu_type=gpu_type, gpu_count=1, status="stopped")
    InstanceRunSegment.objects.create(
        instance=closed, started_at=T, ended_at=T + 6 * M + 1 * S, seen_until=T + 2 * M
    )  # fmt: skip
    now = T + 8 * M + 10 * S
    time_machine.move_to(now)
    system_account(SystemAccount.REVENUE)  # made once, outside the rolled-back run (ids are compared)
    with monkeypatch.context() as patch, transaction.atomic():
        patch.setattr(metering, "_tick_in_sql", metering._tick_in_python)
        portable = _catch_up(now)
        expected = _state()
        transaction.set_rollback(True)
    in_sql = _catch_up(now)

    assert _summary(in_sql) == _summary(portable)
    assert _state() == expected
    per_instance: dict[int, int] = {}
    for row in expected["usage"]:
        per_instance[row[1]] = per_instance.get(row[1], 0) + 1
    # 4 minutes begun by 3:30 (+7 s start) · 6 by 5:00 (the minute begun at the sighting counts) · 2 by 2:00
    # (+20 s start) · 9 by the tick at 8:10 (no sighting) · 7 by the closed segment's end 6:01
    assert sorted(per_instance.values()) == [2, 4, 6, 7, 9]
    assert sum(r.records for r in in_sql) == 28
