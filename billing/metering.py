"""Per-minute metering and the budget guard (Celery beat, every minute).

Rules (DESIGN.md §4, issue 6):
- a minute is charged when an instance was running at any moment of it (its run segment overlaps the
  minute), at the price in force when the minute started;
- one ``UsageRecord`` per (instance, minute), enforced by a unique constraint: a duplicate tick, a
  retried task, a worker killed mid-tick or two beat processes charge nothing extra, and minutes missed
  while workers were down are charged by the next tick;
- amounts follow ``billing.pricing.minute_charge_micros`` (cumulative rounding at one price);
- the tick is set-based: one query for the run segments, one for the cursors, one for the price book,
  then per organization one transaction that takes the wallet lock once, inserts the records in bulk and
  posts one ledger transaction (trial credit first, via ``wallet_spend``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.choices import TransactionKind
from billing.models import MeteringCursor, UsageRecord, Wallet
from billing.pricing import PriceBook, minute_charge_micros
from billing.selectors import wallet_balance
from billing.services import InsufficientFunds, wallet_spend
from portal.audit import audit_log
from portal.models import Organization

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)


def floor_minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def last_running_minute(ended_at: datetime) -> datetime:
    """The start of the last minute a segment ending at ``ended_at`` touched (exclusive end)."""
    floor = floor_minute(ended_at)
    return floor - MINUTE if floor == ended_at else floor


@dataclass
class TickResult:
    """What one tick did: records created, micro-CNY charged, organizations skipped (already charged by
    a concurrent tick), shortfalls (micro-CNY that the balance could not cover) per organization id."""

    records: int = 0
    charged_micros: int = 0
    organizations: int = 0
    conflicts: int = 0
    shortfalls: dict[int, int] = field(default_factory=dict)


def metering_tick(*, now: datetime | None = None) -> TickResult:
    """Charge every started, not yet charged instance-minute up to ``now``; returns a ``TickResult``.

    Looks back ``METERING_LOOKBACK_HOURS`` for segments that ended while no worker ran. Safe to run
    concurrently and repeatedly (see module docstring).
    """
    from instances.selectors import run_segments_overlapping  # the instances app's read interface

    now = now or timezone.now()
    current = floor_minute(now)
    window_start = current - timedelta(hours=settings.METERING_LOOKBACK_HOURS)
    segments = list(run_segments_overlapping(window_start, current + MINUTE))
    result = TickResult()
    if not segments:
        return result
    cursors = {c.instance_id: c for c in MeteringCursor.objects.filter(
        instance_id__in={s["instance_id"] for s in segments})}
    prices = PriceBook({s["gpu_type"] for s in segments})

    per_org: dict[int, list[UsageRecord]] = defaultdict(list)
    new_cursors: dict[int, MeteringCursor] = {}
    for seg in segments:  # ordered by (instance, started_at)
        iid = seg["instance_id"]
        cursor = new_cursors.get(iid) or cursors.get(iid)
        first = max(floor_minute(seg["started_at"]), window_start)
        if cursor is not None:
            first = max(first, cursor.last_minute + MINUTE)
        last = current if seg["ended_at"] is None else min(current, last_running_minute(seg["ended_at"]))
        minute = first
        while minute <= last:
            price = prices.at(seg["gpu_type"], seg["mode"], minute)
            if price is None:
                log.error("no price for %s/%s at %s: instance %s not charged", seg["gpu_type"], seg["mode"],
                          minute, iid)
                break
            index = cursor.price_minute_index + 1 if cursor and cursor.price_per_gpu_hour_micros == price else 1
            amount = minute_charge_micros(price_per_gpu_hour_micros=price, gpus=seg["gpu_count"], minute_index=index)
            per_org[seg["organization_id"]].append(UsageRecord(
                instance_id=iid, organization_id=seg["organization_id"], minute=minute, gpu_type=seg["gpu_type"],
                mode=seg["mode"], gpu_count=seg["gpu_count"], price_per_gpu_hour_micros=price,
                price_minute_index=index, amount_micros=amount))
            cursor = MeteringCursor(instance_id=iid, last_minute=minute, price_per_gpu_hour_micros=price,
                                    price_minute_index=index)
            new_cursors[iid] = cursor
            minute += MINUTE

    for org_id, records in per_org.items():
        _charge_organization(org_id, records, [new_cursors[i] for i in {r.instance_id for r in records}], result)
    return result


def _charge_organization(org_id: int, records: list[UsageRecord], cursors: list[MeteringCursor],
                         result: TickResult) -> None:
    total = sum(r.amount_micros for r in records)
    digest = hashlib.sha256(";".join(f"{r.instance_id}@{r.minute:%Y%m%d%H%M}" for r in records).encode())
    key = f"usage:{org_id}:{records[0].minute:%Y%m%d%H%M}:{digest.hexdigest()[:40]}"
    try:
        with transaction.atomic():
            organization = Organization(pk=org_id)  # only its id is needed; saves a query per organization
            Wallet.objects.select_for_update().get(organization_id=org_id)  # the one lock per organization
            txn = _spend_or_shortfall(organization, total, key, records, result) if total > 0 else None
            for record in records:
                record.transaction = txn
            UsageRecord.objects.bulk_create(records)  # the unique constraint refuses minutes charged already
            MeteringCursor.objects.bulk_create(
                cursors, update_conflicts=True, unique_fields=["instance_id"],
                update_fields=["last_minute", "price_per_gpu_hour_micros", "price_minute_index"])
    except IntegrityError:
        result.conflicts += 1  # a concurrent tick charged these minutes first; nothing charged here
        return
    result.records += len(records)
    result.charged_micros += total - result.shortfalls.get(org_id, 0)
    result.organizations += 1


def _spend_or_shortfall(organization: Organization, total: int, key: str, records: list[UsageRecord],
                        result: TickResult) -> Any:
    minutes: defaultdict[int, int] = defaultdict(int)
    for r in records:
        minutes[r.instance_id] += 1
    metadata = {"instances": {str(k): v for k, v in minutes.items()}, "records": len(records)}
    try:
        return wallet_spend(organization=organization, amount_micros=total, idempotency_key=key,
                            kind=TransactionKind.USAGE, memo="GPU usage", metadata=metadata)
    except InsufficientFunds as exc:
        # The budget guard should have stopped the work first; take what is left, record the rest.
        shortfall = total - exc.available_micros
        result.shortfalls[organization.pk] = shortfall
        audit_log(action="billing.usage_shortfall", organization=organization,
                  extra={"shortfall_micros": shortfall, "key": key})
        if exc.available_micros > 0:
            return wallet_spend(organization=organization, amount_micros=exc.available_micros, idempotency_key=key,
                                kind=TransactionKind.USAGE, memo="GPU usage (partly uncovered)",
                                metadata={**metadata, "shortfall_micros": shortfall})
        return None


# --- budget guard -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Burn:
    """An organization's spend rate from its running instances, in micro-CNY per minute (exact Decimal
    would be nicer for display; integer micros per minute rounded up is what the guard needs)."""

    per_minute_micros: int
    instance_ids: tuple[int, ...]


def burn_rates(*, now: datetime | None = None, organization: Organization | None = None) -> dict[int, Burn]:
    """Spend per minute of every organization with running instances (set-based), or of one organization
    (the dashboard asks for its own only)."""
    from instances.selectors import run_segments_overlapping

    now = now or timezone.now()
    current = floor_minute(now)
    rows = run_segments_overlapping(current, current + MINUTE).filter(ended_at__isnull=True)
    if organization is not None:
        rows = rows.filter(instance__organization_id=organization.pk)
    segments = list(rows)
    prices = PriceBook({s["gpu_type"] for s in segments})
    per_org: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s in segments:
        price = prices.at(s["gpu_type"], s["mode"], current) or 0
        per_org[s["organization_id"]].append((s["instance_id"], -(-price * s["gpu_count"] // 60)))
    return {org: Burn(sum(c for _, c in items), tuple(i for i, _ in items)) for org, items in per_org.items()}


def budget_guard(*, now: datetime | None = None) -> list[int]:
    """Stop (after a final checkpoint) every running instance of organizations whose balance cannot cover
    ``BUDGET_GUARD_MINUTES`` more minutes; open or clear low-balance notices. Returns stopped instance ids.
    """
    from instances.selectors import instances_for_org
    from instances.services import instance_stop

    stopped: list[int] = []
    rates = burn_rates(now=now)
    for org_id, burn in rates.items():
        organization = Organization.objects.get(pk=org_id)
        balance = wallet_balance(organization=organization, now=now).total_micros
        if balance < burn.per_minute_micros * settings.BUDGET_GUARD_MINUTES:
            for instance in instances_for_org(organization).filter(pk__in=burn.instance_ids):
                instance_stop(instance=instance, reason="budget")
                stopped.append(instance.pk)
            audit_log(action="billing.budget_guard_stop", organization=organization,
                      extra={"balance_micros": balance, "burn_per_minute_micros": burn.per_minute_micros,
                             "instances": list(burn.instance_ids)})
    return stopped
