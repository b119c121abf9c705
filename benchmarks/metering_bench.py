"""Metering tick time beside a set-based SQL floor, at 1k / 10k / 100k running instances, and the peak memory
of a 24-hour catch-up.

Run on PostgreSQL (the figures that matter for production):

    createdb -h 127.0.0.1 -U postgres portal_bench   # any empty database
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench .venv/bin/python benchmarks/metering_bench.py

``BENCH_CASES`` (default ``1000:100,10000:1000,100000:100,100000:10000``) lists instances:organizations.
For each case it migrates, creates the instances (8 GPUs each, running since T0, every wallet funded) and
times, in the same run and on the same rows:
- the **floor**: the database alone writing one minute for every instance — usage rows, one ledger
  transaction and its two entries per organization, the balance updates and the cursors — as one
  statement (data-modifying CTEs), rolled back; ``+FK`` adds the deferred foreign-key checks of those rows,
  which a committed tick pays at COMMIT and a rolled-back statement never does;
- the **first tick** (minute 0: cursors created) and a **steady tick** (minute 1: cursors updated), each
  charging that minute for every instance; the ratio steady tick / floor.
On PostgreSQL the tick runs the statements of ``billing.tick_sql`` (minutes planned, priced and rounded by the
database); on SQLite the portable path (no floor there). Then ``BENCH_CATCHUP`` instances (default 200) whose
workers were down for 1 hour and for 24 hours are caught up by one tick each, and the tracemalloc peak of each
is printed: flat when the tick's chunking bounds it.
"""

from __future__ import annotations

import os
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from billing.choices import AccountKind, SystemAccount, TransactionKind  # noqa: E402
from billing.metering import metering_tick  # noqa: E402
from billing.models import GpuPrice, LedgerAccount, UsageRecord, Wallet  # noqa: E402
from billing.pricing import gpu_price_at, minute_charge_micros  # noqa: E402
from billing.services import BulkPosting, ledger_post_many, system_account, wallet_spend  # noqa: E402
from instances.models import GpuType, Instance, InstanceRunSegment  # noqa: E402
from portal.models import Organization  # noqa: E402

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
PER_ORG = 10


def reset() -> None:
    with connection.cursor() as cur:
        tables = [
            "billing_usagerecord",
            "billing_meteringcursor",
            "billing_usagewriteoff",
            "billing_meteringwatermark",
            "instances_instancerunsegment",
            "instances_instancetransition",
            "instances_instance",
            "billing_ledgerentry",
            "billing_ledgertransaction",
            "billing_creditgrant",
            "billing_wallet",
        ]
        if connection.vendor == "postgresql":
            cur.execute("TRUNCATE " + ", ".join(tables) + " CASCADE")
        else:
            for t in tables:
                cur.execute(f"DELETE FROM {t}")  # noqa: S608 - fixed table names above
    LedgerAccount.objects.exclude(kind=AccountKind.SYSTEM).delete()
    Organization.objects.filter(slug__startswith="bench-").delete()


def populate(n: int, orgs_n: int, gpu_type: GpuType, *, start: datetime = T0) -> list[Organization]:
    """n instances spread over ``orgs_n`` organizations, each wallet funded with 1,000,000 CNY (one bulk
    posting), running since ``start``."""
    orgs = Organization.objects.bulk_create(
        [Organization(name=f"bench {i}", slug=f"bench-{n}-{i}") for i in range(orgs_n)], batch_size=5000
    )
    accounts = LedgerAccount.objects.bulk_create(
        [
            LedgerAccount(code=f"org:{o.pk}:paid", kind=AccountKind.WALLET_PAID, organization=o, name="paid")
            for o in orgs
        ],
        batch_size=5000,
    )
    Wallet.objects.bulk_create(
        [Wallet(organization=o, paid_account=a) for o, a in zip(orgs, accounts, strict=True)], batch_size=5000
    )
    stripe = system_account(SystemAccount.STRIPE)
    fund = 1_000_000_000_000
    with transaction.atomic():
        ledger_post_many(
            postings=[
                BulkPosting(
                    idempotency_key=f"bench-fund:{o.pk}",
                    kind=TransactionKind.TOP_UP,
                    organization_id=o.pk,
                    memo="bench",
                    metadata={},
                    created_at=start - timedelta(days=1),
                    legs=((a.pk, fund), (stripe.pk, -fund)),
                )
                for o, a in zip(orgs, accounts, strict=True)
            ],
            tracked_account_ids={a.pk for a in accounts},
        )
    instances = Instance.objects.bulk_create(
        [
            Instance(organization=orgs[i % orgs_n], name=f"i{i}", gpu_type=gpu_type, gpu_count=8, status="running")
            for i in range(n)
        ],
        batch_size=5000,
    )
    InstanceRunSegment.objects.bulk_create(
        [InstanceRunSegment(instance=inst, started_at=start) for inst in instances], batch_size=5000
    )
    return orgs


FLOOR_SQL = """
WITH seg AS (
    SELECT s.id, s.instance_id, s.started_at, i.organization_id, i.mode, i.gpu_count
    FROM instances_instancerunsegment s JOIN instances_instance i ON i.id = s.instance_id WHERE s.ended_at IS NULL
), u AS (
    INSERT INTO billing_usagerecord (organization_id, instance_id, segment_id, minute_index, minute, gpu_type, mode,
        gpu_count, price_per_gpu_hour_micros, price_minute_index, amount_micros, transaction_id)
    SELECT organization_id, instance_id, id, %(m)s, started_at + interval '1 minute' * %(m)s, 'A100-80G-SXM', mode,
        gpu_count, %(p)s, %(m)s + 1,
        (%(p)s * gpu_count * (%(m)s + 1) + 30) / 60 - (%(p)s * gpu_count * %(m)s + 30) / 60, NULL
    FROM seg ON CONFLICT DO NOTHING RETURNING organization_id, instance_id, segment_id, minute, amount_micros
), per_org AS (
    SELECT organization_id, sum(amount_micros) AS amt FROM u GROUP BY organization_id
), txn AS (
    INSERT INTO billing_ledgertransaction (idempotency_key, kind, organization_id, memo, fingerprint, metadata,
        created_at)
    SELECT 'floor:' || organization_id || ':' || %(m)s, 'usage', organization_id, 'GPU usage', '', '{}'::jsonb, now()
    FROM per_org RETURNING id, organization_id
), ent AS (
    INSERT INTO billing_ledgerentry (transaction_id, account_id, amount_micros)
    SELECT t.id, w.paid_account_id, -p.amt FROM txn t JOIN per_org p USING (organization_id)
        JOIN billing_wallet w USING (organization_id)
    UNION ALL SELECT t.id, %(revenue)s, p.amt FROM txn t JOIN per_org p USING (organization_id)
), bal AS (
    UPDATE billing_ledgeraccount a SET balance_micros = a.balance_micros - p.amt
    FROM per_org p JOIN billing_wallet w USING (organization_id) WHERE a.id = w.paid_account_id
)
INSERT INTO billing_meteringcursor (instance_id, segment_id, segment_minutes, last_minute, price_per_gpu_hour_micros,
    price_minute_index)
SELECT instance_id, segment_id, %(m)s + 1, minute, %(p)s, %(m)s + 1 FROM u
ON CONFLICT (instance_id) DO UPDATE SET segment_id = excluded.segment_id, segment_minutes = excluded.segment_minutes,
    last_minute = excluded.last_minute, price_minute_index = excluded.price_minute_index
"""


def floor(minute_index: int, price: int) -> tuple[float, float]:
    """Seconds for the database alone to write minute ``minute_index`` of every instance (rolled back): the
    statement, and the statement plus its deferred foreign-key checks (Django creates foreign keys
    ``DEFERRABLE INITIALLY DEFERRED``, so a committing tick pays them at COMMIT; ``SET CONSTRAINTS ALL
    IMMEDIATE`` runs them before the rollback)."""
    if connection.vendor != "postgresql":
        return float("nan"), float("nan")
    revenue = system_account(SystemAccount.REVENUE).pk
    start = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(FLOOR_SQL, {"m": minute_index, "p": price, "revenue": revenue})
        took = time.perf_counter() - start
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        checked = time.perf_counter() - start
        transaction.set_rollback(True)
    return took, checked


def naive_tick(now: datetime) -> None:
    """The obvious per-instance loop: one existence check, one insert and one wallet posting per instance."""
    minute = now.replace(second=0, microsecond=0)
    for inst in Instance.objects.filter(status="running").select_related("gpu_type", "organization"):
        if UsageRecord.objects.filter(instance_id=inst.pk, minute=minute).exists():
            continue
        price = gpu_price_at(gpu_type=inst.gpu_type.code, mode=inst.mode, at=minute)
        amount = minute_charge_micros(price_per_gpu_hour_micros=price, gpus=inst.gpu_count, minute_index=1)
        with transaction.atomic():
            UsageRecord.objects.create(
                instance_id=inst.pk,
                organization=inst.organization,
                minute=minute,
                gpu_type=inst.gpu_type.code,
                mode=inst.mode,
                gpu_count=inst.gpu_count,
                price_per_gpu_hour_micros=price,
                price_minute_index=1,
                amount_micros=amount,
            )
            wallet_spend(
                organization=inst.organization,
                amount_micros=amount,
                idempotency_key=f"naive:{inst.pk}:{minute:%H%M}",
                kind=TransactionKind.USAGE,
            )


def main() -> None:
    call_command("migrate", verbosity=0)
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    since = T0 - timedelta(days=3)
    if not GpuPrice.objects.filter(gpu_type="A100-80G-SXM", mode="container", effective_from=since).exists():
        GpuPrice.objects.create(
            gpu_type="A100-80G-SXM", mode="container", price_per_gpu_hour_micros=8_000_000, effective_from=since
        )  # a row entered when it took effect (not via the form)
    price = 8_000_000
    cases = [
        tuple(int(x) for x in c.split(":"))
        for c in os.environ.get("BENCH_CASES", "1000:100,10000:1000,100000:100,100000:10000").split(",")
    ]
    print(f"database: {connection.vendor}; 8 GPUs per instance; each tick charges one minute of every instance")
    print(
        f"{'instances':>9} {'orgs':>6} | {'floor s':>8} | {'+FK s':>6} | {'first tick s':>12} | {'steady tick s':>13} |"
        f" {'µs/instance':>11} | {'steady/floor':>12} | {'steady/(floor+FK)':>17}"
    )
    for n, orgs_n in cases:
        reset()
        populate(n, orgs_n, gpu_type)
        floor0, _ = floor(0, price)
        start = time.perf_counter()
        first = metering_tick(now=T0 + timedelta(seconds=30))
        first_s = time.perf_counter() - start
        floor1, checked1 = floor(1, price)
        start = time.perf_counter()
        steady = metering_tick(now=T0 + timedelta(seconds=90))
        steady_s = time.perf_counter() - start
        assert first.records == n and steady.records == n and not first.shortfalls, (first, steady)
        print(
            f"{n:>9} {orgs_n:>6} | {floor1:8.3f} | {checked1:6.3f} | {first_s:12.3f} | {steady_s:13.3f} | "
            f"{steady_s / n * 1e6:11.1f} | {steady_s / floor1:11.1f}x | {steady_s / checked1:16.1f}x"
            f"   (floor at minute 0: {floor0:.3f} s)"
        )
    catchup = int(os.environ.get("BENCH_CATCHUP", "200"))
    if catchup:
        for hours in (1, 24):
            reset()
            populate(catchup, max(1, catchup // PER_ORG), gpu_type, start=T0)
            tracemalloc.start()
            start = time.perf_counter()
            result = metering_tick(now=T0 + timedelta(hours=hours, seconds=-30))
            took = time.perf_counter() - start
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            print(
                f"catch-up of {hours:>2} h for {catchup} instances: {result.records:>8} minutes in {took:7.1f} s,"
                f" {result.passes} transactions, peak Python memory {peak / 2**20:6.1f} MiB"
            )
    reset()


if __name__ == "__main__":
    main()
