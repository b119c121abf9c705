"""The price book and the one charging rule.

Charging rule (DESIGN.md §4, issue 6): the amount charged for the first ``m`` minutes of ``g`` GPUs at
one price ``p`` (micro-CNY per GPU-hour) is ``round_half_up(p * g * m / 60)`` — the exact price of ``m``
minutes rounded once. Minute ``m``'s charge is ``cumulative(m) - cumulative(m - 1)``, so no remainder
is ever lost or doubled: 120 minutes of 1 GPU at 5.00 CNY/GPU-hour is exactly 10.000000 CNY.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from billing.choices import RentalMode
from billing.models import GpuPrice
from billing.money import to_micros
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import User

# Seeded defaults (CNY per GPU-hour), editable in the back office as new price-book rows. Chosen in the
# range of public on-demand list prices of Chinese GPU clouds in 2025-2026; bare metal is whole nodes.
DEFAULT_PRICES: dict[str, dict[str, str]] = {
    "A100-80G-SXM": {RentalMode.CONTAINER: "8.00", RentalMode.BARE_METAL: "7.20"},
    "H100-80G-SXM": {RentalMode.CONTAINER: "16.00", RentalMode.BARE_METAL: "14.40"},
    "L40S-48G": {RentalMode.CONTAINER: "5.50", RentalMode.BARE_METAL: "4.95"},
    "RTX-4090-24G": {RentalMode.CONTAINER: "2.20", RentalMode.BARE_METAL: "1.98"},
}


class PriceNotFound(LookupError):
    """No price-book row for this GPU type and mode at that time."""


class BackdatedPrice(ValueError):
    """A price-book row whose effective time is in the past: minutes already charged would disagree with the
    book. Nothing is written; a correction of past usage is an audited adjustment of the wallet instead."""


def price_effective_validate(*, effective_from: datetime, now: datetime | None = None) -> None:
    """Raise ``BackdatedPrice`` (with the message staff see) unless ``effective_from`` ≥ ``now``."""
    now = now or timezone.now()
    if effective_from < now:
        raise BackdatedPrice(
            f"A price cannot take effect in the past ({effective_from:%Y-%m-%d %H:%M:%S %Z} is before now,"
            f" {now:%Y-%m-%d %H:%M:%S %Z}): minutes already charged would disagree with the price book. Choose a"
            " time from now on; correct past usage with an adjustment on the wallet (Wallets → Post adjustment)."
        )


def cumulative_charge_micros(*, price_per_gpu_hour_micros: int, gpus: int, minutes: int) -> int:
    """Exact price of ``minutes`` minutes of ``gpus`` GPUs, rounded once, half-up, to a micro-CNY."""
    if minutes < 0 or gpus < 0 or price_per_gpu_hour_micros < 0:
        raise ValueError("minutes, gpus and price must be non-negative")
    # round_half_up(x / 60) for an integer x >= 0 is (x + 30) // 60: exact integer arithmetic, the same
    # value as ``round_micros(Decimal(x) / 60)`` (tested), fast enough for 100,000 minutes a tick.
    return (price_per_gpu_hour_micros * gpus * minutes + 30) // 60


def minute_charge_micros(*, price_per_gpu_hour_micros: int, gpus: int, minute_index: int) -> int:
    """Charge of the ``minute_index``-th minute (1-based) at one price: the difference of two roundings."""
    if minute_index < 1:
        raise ValueError("minute_index is 1-based")
    kw = {"price_per_gpu_hour_micros": price_per_gpu_hour_micros, "gpus": gpus}
    return cumulative_charge_micros(minutes=minute_index, **kw) - cumulative_charge_micros(
        minutes=minute_index - 1, **kw
    )


def gpu_price_at(*, gpu_type: str, mode: str = RentalMode.CONTAINER, at: datetime | None = None) -> int:
    """Price per GPU-hour in micro-CNY in force at ``at`` (default now). Raises ``PriceNotFound``."""
    row = (
        GpuPrice.objects.filter(gpu_type=gpu_type, mode=mode, effective_from__lte=at or timezone.now())
        .order_by("-effective_from")
        .first()
    )
    if row is None:
        raise PriceNotFound(f"no price for {gpu_type} ({mode})")
    return row.price_per_gpu_hour_micros


def gpu_price_set(*, gpu_type: str, mode: str, price: Decimal | str, effective_from: datetime | None = None,
                  created_by: User | None = None) -> GpuPrice:
    """Add a price-book row in force from ``effective_from`` (default now). A price change never rewrites past
    rows nor past minutes: an effective time before now raises ``BackdatedPrice`` and nothing is written."""
    now = timezone.now()
    effective_from = effective_from or now
    price_effective_validate(effective_from=effective_from, now=now)
    with transaction.atomic():
        row = GpuPrice.objects.create(
            gpu_type=gpu_type, mode=mode, price_per_gpu_hour_micros=to_micros(price),
            effective_from=effective_from, created_by=created_by,
        )
        audit_log(action="billing.price_set", actor=created_by, obj=row,
                  extra={"gpu_type": gpu_type, "mode": mode, "price": str(price)})
    return row


def seed_price_book() -> int:
    """Insert the default prices for (type, mode) pairs that have no row yet; returns rows created."""
    created = 0
    for gpu_type, modes in DEFAULT_PRICES.items():
        for mode, price in modes.items():
            if not GpuPrice.objects.filter(gpu_type=gpu_type, mode=mode).exists():
                GpuPrice.objects.create(gpu_type=gpu_type, mode=mode, price_per_gpu_hour_micros=to_micros(price),
                                        effective_from=datetime(2026, 1, 1, tzinfo=UTC))
                created += 1
    return created
