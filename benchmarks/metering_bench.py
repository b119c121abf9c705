"""Metering tick time for 1,000 / 10,000 / 100,000 running instances, and a naive per-instance loop for 1,000.

Run on PostgreSQL (the figures that matter for production):

    createdb -h 127.0.0.1 -U postgres portal_bench   # any empty database
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/portal_bench .venv/bin/python benchmarks/metering_bench.py

It migrates the database, creates instances (10 per organization, each with a funded wallet) that have
been running for one minute, and times one tick that charges that minute for all of them. Prints
seconds, records per second and the cost per instance, so linear growth shows as a constant µs/instance.
"""

from __future__ import annotations

import os
import sys
import time
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
from billing.pricing import gpu_price_at, gpu_price_set, minute_charge_micros  # noqa: E402
from billing.services import Posting, ledger_post, system_account, wallet_spend  # noqa: E402
from instances.models import GpuType, Instance, InstanceRunSegment  # noqa: E402
from portal.models import Organization  # noqa: E402

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
PER_ORG = 10


def reset() -> None:
    with connection.cursor() as cur:
        tables = ["billing_usagerecord", "billing_meteringcursor", "instances_instancerunsegment",
                  "instances_instancetransition", "instances_instance", "billing_ledgerentry",
                  "billing_ledgertransaction", "billing_creditgrant", "billing_wallet"]
        if connection.vendor == "postgresql":
            cur.execute("TRUNCATE " + ", ".join(tables) + " CASCADE")
        else:
            for t in tables:
                cur.execute(f"DELETE FROM {t}")  # noqa: S608 - fixed table names above
    LedgerAccount.objects.exclude(kind=AccountKind.SYSTEM).delete()
    Organization.objects.filter(slug__startswith="bench-").delete()


def populate(n: int, gpu_type: GpuType) -> list[Organization]:
    """n instances in n/10 organizations, each wallet funded with 1,000 CNY, running since T0."""
    orgs = Organization.objects.bulk_create(
        [Organization(name=f"bench {i}", slug=f"bench-{n}-{i}") for i in range(max(1, n // PER_ORG))])
    accounts = LedgerAccount.objects.bulk_create(
        [LedgerAccount(code=f"org:{o.pk}:paid", kind=AccountKind.WALLET_PAID, organization=o, name="paid")
         for o in orgs])
    Wallet.objects.bulk_create([Wallet(organization=o, paid_account=a) for o, a in zip(orgs, accounts, strict=True)])
    stripe = system_account(SystemAccount.STRIPE)
    with transaction.atomic():
        for o, a in zip(orgs, accounts, strict=True):
            ledger_post(idempotency_key=f"bench-fund:{o.pk}", kind=TransactionKind.TOP_UP, organization=o,
                        postings=[Posting(a, 1_000_000_000), Posting(stripe, -1_000_000_000)])
    instances = Instance.objects.bulk_create(
        [Instance(organization=orgs[i // PER_ORG], name=f"i{i}", gpu_type=gpu_type, gpu_count=8, status="running")
         for i in range(n)], batch_size=5000)
    InstanceRunSegment.objects.bulk_create(
        [InstanceRunSegment(instance=inst, started_at=T0) for inst in instances], batch_size=5000)
    return orgs


def naive_tick(now: datetime) -> None:
    """The obvious per-instance loop: one existence check, one insert and one wallet posting per instance."""
    minute = now.replace(second=0, microsecond=0)
    for inst in Instance.objects.filter(status="running").select_related("gpu_type", "organization"):
        if UsageRecord.objects.filter(instance_id=inst.pk, minute=minute).exists():
            continue
        price = gpu_price_at(gpu_type=inst.gpu_type.code, mode=inst.mode, at=minute)
        amount = minute_charge_micros(price_per_gpu_hour_micros=price, gpus=inst.gpu_count, minute_index=1)
        with transaction.atomic():
            UsageRecord.objects.create(instance_id=inst.pk, organization=inst.organization, minute=minute,
                                       gpu_type=inst.gpu_type.code, mode=inst.mode, gpu_count=inst.gpu_count,
                                       price_per_gpu_hour_micros=price, price_minute_index=1, amount_micros=amount)
            wallet_spend(organization=inst.organization, amount_micros=amount,
                         idempotency_key=f"naive:{inst.pk}:{minute:%H%M}", kind=TransactionKind.USAGE)


def main() -> None:
    call_command("migrate", verbosity=0)
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    since = T0 - timedelta(days=1)
    if not GpuPrice.objects.filter(gpu_type="A100-80G-SXM", mode="container", effective_from=since).exists():
        gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="8.00", effective_from=T0 - timedelta(days=1))
    sizes = [int(x) for x in os.environ.get("BENCH_SIZES", "1000,10000,100000").split(",")]
    print(f"database: {connection.vendor}; {PER_ORG} instances per organization; one minute charged per instance")
    results = {}
    for n in sizes:
        reset()
        populate(n, gpu_type)
        start = time.perf_counter()
        result = metering_tick(now=T0 + timedelta(seconds=30))
        took = time.perf_counter() - start
        assert result.records == n, result
        results[n] = took
        print(f"set-based tick  n={n:>7}: {took:8.3f} s  {n / took:10.0f} instances/s  "
              f"{took / n * 1e6:7.1f} µs/instance")
    reset()
    populate(1000, gpu_type)
    start = time.perf_counter()
    naive_tick(T0 + timedelta(seconds=30))
    naive = time.perf_counter() - start
    print(f"naive loop      n=   1000: {naive:8.3f} s  {1000 / naive:10.0f} instances/s")
    if 1000 in results:
        print(f"naive / set-based at 1,000 instances: {naive / results[1000]:.1f}x")
    reset()


if __name__ == "__main__":
    main()
