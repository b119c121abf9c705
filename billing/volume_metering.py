"""Metering of persistent volumes (beat, with the minute tick): one charge per started volume-hour.

Rules (DESIGN.md §4, issue 14 item 3):
- a volume is billed per **started hour of existence**, counted from its creation: hour k (0-based) begins at
  ``created_at + k h`` and is charged once it has begun, until the volume is deleted (a volume kept 2 h 10 min
  pays 3 hours; one deleted 59 min after creation pays 1). Attached or not, running or not: the disk is held;
- the price is the price book's storage rate in force when the hour began (``PriceBook.storage_at``, micro-CNY
  per GB-hour) times the volume's size in whole GB, by the one charging rule
  (``billing.pricing.volume_hour_charge_micros`` → ``cumulative_charge_micros``): the exact price of h hours
  rounded once minus that of h − 1 hours. With integer micro-CNY per GB-hour and whole GB each hour is exact,
  so no remainder exists to carry;
- one ``VolumeUsage`` row per (volume, hour index), enforced by a unique constraint, and one ledger
  transaction per row with the idempotency key ``volume-usage:<volume id>:<hour index>``, written in the same
  database transaction: a duplicate tick, a retried task or two beat processes charge nothing extra; hours
  missed while workers were down are charged by the next tick, each against the grants valid when it began;
- what the balance cannot cover is recorded on the row as ``shortfall_micros`` (shown on the statement) and
  audited; nothing goes below zero.

Why hours and not minutes: a volume exists for weeks; per-minute rows would be 1,440 a day per volume for
amounts of a few micro-CNY. Hours keep the table small and the price exact.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from billing.choices import TransactionKind
from billing.ledger import InsufficientFunds
from billing.memos import memo
from billing.models import VolumeUsage, Wallet
from billing.pricing import PriceBook, volume_hour_charge_micros
from billing.services import wallet_create, wallet_spend
from portal.audit import audit_log
from portal.models import Organization

log = logging.getLogger(__name__)
HOUR = timedelta(hours=1)
MICRO = timedelta(microseconds=1)


def started_hours(*, created_at: datetime, until: datetime) -> int:
    """Hours begun in [created_at, until): ceil((until − created_at) / 1 h), 0 when empty. 2 h 10 min → 3."""
    micros = (until - created_at) // MICRO
    return -(-micros // 3_600_000_000) if micros > 0 else 0


@dataclass
class VolumeTickResult:
    """What one volume tick did: hours charged (rows written), micro-CNY charged, micro-CNY uncovered."""

    hours: int = 0
    charged_micros: int = 0
    shortfall_micros: int = 0


def volume_metering_tick(*, now: datetime | None = None) -> VolumeTickResult:
    """Charge every begun, not yet charged volume-hour up to ``now``; returns a ``VolumeTickResult``.

    Reads the volumes through ``instances.interactive.volumes.volumes_to_meter`` (the instances app's read
    interface, imported here because billing sits below it). Safe to run concurrently and repeatedly."""
    from instances.interactive.volumes import volumes_to_meter

    now = now or timezone.now()
    result = VolumeTickResult()
    volumes = list(volumes_to_meter(now=now))
    done = dict(
        VolumeUsage.objects.filter(volume_id__in=[v["id"] for v in volumes])
        .values("volume_id")
        .annotate(last=Max("hour_index"))
        .values_list("volume_id", "last")
    )
    prices = PriceBook(set())
    for v in volumes:
        end = now + MICRO if v["deleted_at"] is None else min(v["deleted_at"], now + MICRO)
        total = started_hours(created_at=v["created_at"], until=end)
        first = done[v["id"]] + 1 if v["id"] in done else 0
        for index in range(first, total):
            hour = v["created_at"] + index * HOUR
            price = prices.storage_at(hour)
            amount = volume_hour_charge_micros(
                price_per_gb_hour_micros=price, size_gb=v["size_gb"], hour_index=index + 1
            )
            _charge_hour(v, index, hour, price, amount, result)
    return result


def _charge_hour(
    v: dict[str, Any], index: int, hour: datetime, price: int, amount: int, result: VolumeTickResult
) -> None:
    """One volume-hour: the usage row and its ledger transaction in one database transaction."""
    organization = Organization(pk=v["organization_id"])
    if not Wallet.objects.filter(organization_id=organization.pk).exists():
        wallet_create(organization=Organization.objects.get(pk=organization.pk))
    key = f"volume-usage:{v['id']}:{index}"
    spend: dict[str, Any] = {
        "organization": organization,
        "idempotency_key": key,
        "kind": TransactionKind.STORAGE,
        "memo": memo("volume_hour", name=v["name"], size_gb=v["size_gb"], hour=index + 1),
        "metadata": {"volume_id": v["id"], "hour_index": index, "hour": hour.isoformat(), "size_gb": v["size_gb"]},
        "now": hour,
    }
    try:
        with transaction.atomic():
            usage = VolumeUsage.objects.create(
                organization_id=organization.pk,
                volume_id=v["id"],
                volume_name=v["name"],
                hour_index=index,
                hour=hour,
                size_gb=v["size_gb"],
                price_per_gb_hour_micros=price,
                amount_micros=amount,
            )
            covered = amount
            if amount:
                try:
                    usage.transaction = wallet_spend(amount_micros=amount, **spend)
                except InsufficientFunds as exc:
                    covered = exc.available_micros
                    if covered > 0:
                        usage.transaction = wallet_spend(amount_micros=covered, **spend)
                    usage.shortfall_micros = amount - covered
                    audit_log(
                        action="billing.volume_shortfall",
                        organization=organization,
                        extra={"volume_id": v["id"], "hour_index": index, "shortfall_micros": amount - covered},
                    )
                usage.save(update_fields=["transaction", "shortfall_micros"])
    except IntegrityError:  # a concurrent tick charged this hour first
        log.info("volume %s hour %s already charged", v["id"], index)
        return
    result.hours += 1
    result.charged_micros += covered
    result.shortfall_micros += amount - covered
