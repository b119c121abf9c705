"""The price book and the one charging rule.

Charging rule (DESIGN.md §4, issue 6): the amount charged for the first ``m`` minutes of ``g`` GPUs at
one price ``p`` (micro-CNY per GPU-hour) is ``round_half_up(p * g * m / 60)`` — the exact price of ``m``
minutes rounded once. Minute ``m``'s charge is ``cumulative(m) - cumulative(m - 1)``, so no remainder
is ever lost or doubled: 120 minutes of 1 GPU at 5.00 CNY/GPU-hour is exactly 10.000000 CNY.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from billing.choices import PriceTier, RentalMode
from billing.models import GpuPrice, StoragePrice, TierDiscount
from billing.money import to_micros
from billing.selectors import wallet_balance
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User

# Seeded defaults (CNY per GPU-hour), editable in the back office as new price-book rows. Chosen in the
# range of public on-demand list prices of Chinese GPU clouds in 2025-2026; bare metal is whole nodes.
DEFAULT_PRICES: dict[str, dict[str, str]] = {
    "A100-80G-SXM": {RentalMode.CONTAINER: "8.00", RentalMode.BARE_METAL: "7.20"},
    "H100-80G-SXM": {RentalMode.CONTAINER: "16.00", RentalMode.BARE_METAL: "14.40"},
    "L40S-48G": {RentalMode.CONTAINER: "5.50", RentalMode.BARE_METAL: "4.95"},
    "RTX-4090-24G": {RentalMode.CONTAINER: "2.20", RentalMode.BARE_METAL: "1.98"},
}
# Seeded tier discount (basis points off every GPU price): interruptible capacity at 60 % of the on-demand
# price, in the range of public spot / interruptible discounts (RunPod, Vast, AutoDL: 40-70 % off).
DEFAULT_TIER_DISCOUNT_BPS: dict[str, int] = {PriceTier.INTERRUPTIBLE: 4000}


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


def discounted_price_micros(*, price_per_gpu_hour_micros: int, discount_bps: int) -> int:
    """``price_per_gpu_hour_micros`` less ``discount_bps`` basis points, rounded once, half up, to a
    micro-CNY: 8.00 CNY/GPU-hour at 4000 bps (40 % off) is exactly 4.80 CNY/GPU-hour (4_800_000)."""
    if not 0 <= discount_bps <= 10_000 or price_per_gpu_hour_micros < 0:
        raise ValueError("discount_bps must be 0…10000 and the price non-negative")
    return (price_per_gpu_hour_micros * (10_000 - discount_bps) + 5_000) // 10_000


class PriceBook:
    """Price-book rows of some GPU types, looked up by bisect on ``effective_from``: the one price lookup
    (the price quote, the pricing page and metering all read prices through it). One query on creation;
    the tier discounts (``TierDiscount``) are read by a second query the first time a tier other than
    on-demand is asked for."""

    def __init__(self, gpu_types: set[str] | None = None) -> None:
        """Load the rows of ``gpu_types`` (all rows, a small table, with ``None``)."""
        self.rows: dict[tuple[str, str], tuple[list[datetime], list[int]]] = {}
        query = GpuPrice.objects.all() if gpu_types is None else GpuPrice.objects.filter(gpu_type__in=gpu_types)
        rows = query.order_by("effective_from").values_list(
            "gpu_type", "mode", "effective_from", "price_per_gpu_hour_micros"
        )
        for gpu_type, mode, start, price in rows:
            times, prices = self.rows.setdefault((gpu_type, mode), ([], []))
            times.append(start)
            prices.append(price)

        self._discounts: dict[str, tuple[list[datetime], list[int]]] | None = None

    def discount_bps_at(self, tier: str, at: datetime) -> int:
        """Basis points off for ``tier`` in force at ``at`` (0 for on-demand or without a row)."""
        if tier == PriceTier.ON_DEMAND:
            return 0
        if self._discounts is None:
            self._discounts = {}
            for row_tier, start, bps in TierDiscount.objects.order_by("effective_from").values_list(
                "tier", "effective_from", "discount_bps"
            ):
                times, values = self._discounts.setdefault(row_tier, ([], []))
                times.append(start)
                values.append(bps)
        times, values = self._discounts.get(tier, ([], []))
        i = bisect.bisect_right(times, at) - 1
        return values[i] if i >= 0 else 0

    def at(self, gpu_type: str, mode: str, at: datetime, tier: str = PriceTier.ON_DEMAND) -> int | None:
        """Micro-CNY per GPU-hour in force at ``at`` (the newest row with ``effective_from <= at``) for
        ``tier`` (the tier discount in force at ``at`` applied, :func:`discounted_price_micros`), or None."""
        times, prices = self.rows.get((gpu_type, mode), ([], []))
        i = bisect.bisect_right(times, at) - 1
        if i < 0:
            return None
        bps = self.discount_bps_at(tier, at)
        return prices[i] if not bps else discounted_price_micros(price_per_gpu_hour_micros=prices[i], discount_bps=bps)

    def storage_at(self, at: datetime) -> int:
        """Micro-CNY per GB-hour of persistent volumes in force at ``at``: the newest ``StoragePrice`` row with
        ``effective_from <= at``, else the setting ``VOLUME_PRICE_PER_GB_HOUR`` (CNY). Rows load on first use."""
        if not hasattr(self, "_storage"):
            rows = StoragePrice.objects.order_by("effective_from").values_list(
                "effective_from", "price_per_gb_hour_micros"
            )
            self._storage = ([t for t, _ in rows], [p for _, p in rows])
        times, prices = self._storage
        i = bisect.bisect_right(times, at) - 1
        return prices[i] if i >= 0 else to_micros(settings.VOLUME_PRICE_PER_GB_HOUR)


def volume_hour_charge_micros(*, price_per_gb_hour_micros: int, size_gb: int, hour_index: int) -> int:
    """Charge of the ``hour_index``-th hour (1-based) of a ``size_gb`` GB volume at one price, by the one
    charging rule (:func:`cumulative_charge_micros`, GB in place of GPUs, 60 minutes an hour): the exact
    price of ``hour_index`` hours rounded once, minus that of ``hour_index - 1`` hours."""
    if hour_index < 1:
        raise ValueError("hour_index is 1-based")
    kw = {"price_per_gpu_hour_micros": price_per_gb_hour_micros, "gpus": size_gb}
    return cumulative_charge_micros(minutes=60 * hour_index, **kw) - cumulative_charge_micros(
        minutes=60 * (hour_index - 1), **kw
    )


def gpu_price_at(
    *, gpu_type: str, mode: str = RentalMode.CONTAINER, at: datetime | None = None, tier: str = PriceTier.ON_DEMAND
) -> int:
    """Price per GPU-hour in micro-CNY in force at ``at`` (default now) for ``tier``. Raises ``PriceNotFound``."""
    price = PriceBook({gpu_type}).at(gpu_type, mode, at or timezone.now(), tier)
    if price is None:
        raise PriceNotFound(f"no price for {gpu_type} ({mode})")
    return price


@dataclass(frozen=True)
class PriceQuote:
    """Price of a request: micro-CNY per hour for all its GPUs, and how long the balance lasts."""

    price_per_gpu_hour_micros: int
    price_per_hour_micros: int
    balance_micros: int
    runway_minutes: int | None  # None when the price is zero

    @property
    def runway_text(self) -> str:
        """ "11 h 40 min" in English, "11 小时 40 分" in Chinese (the active language); "∞" for a free price."""
        from portal.lib.durations import minutes_text

        return minutes_text(self.runway_minutes)


def runway_minutes(*, balance_micros: int, price_per_gpu_hour_micros: int, gpus: int) -> int | None:
    """Whole minutes ``balance_micros`` pays for ``gpus`` GPUs at one price, by the one charging rule
    (:func:`cumulative_charge_micros`); None when the price is zero (the balance lasts for ever)."""
    per_hour = cumulative_charge_micros(price_per_gpu_hour_micros=price_per_gpu_hour_micros, gpus=gpus, minutes=60)
    if per_hour <= 0:
        return None
    runway = balance_micros * 60 // per_hour
    while (
        runway > 0
        and cumulative_charge_micros(price_per_gpu_hour_micros=price_per_gpu_hour_micros, gpus=gpus, minutes=runway)
        > balance_micros
    ):
        runway -= 1
    return runway


def burn_runway_minutes(*, balance_micros: int, per_minute_micros: int) -> int | None:
    """Whole minutes ``balance_micros`` lasts at a burn rate of ``per_minute_micros`` (the dashboard's figure
    for everything running at once, ``billing.metering.burn_rates``); None when nothing burns."""
    return balance_micros // per_minute_micros if per_minute_micros else None


def price_quote(
    *, organization: Organization, gpu_type: str, gpu_count: int, mode: str, tier: str = PriceTier.ON_DEMAND
) -> PriceQuote:
    """Hourly price of ``gpu_count`` GPUs of ``gpu_type`` in ``mode`` and ``tier`` now, and the wallet's
    runway at it (whole minutes the balance covers, by the one charging rule). Raises ``PriceNotFound``."""
    price = gpu_price_at(gpu_type=gpu_type, mode=mode, tier=tier)
    balance = wallet_balance(organization=organization).total_micros
    per_hour = cumulative_charge_micros(price_per_gpu_hour_micros=price, gpus=gpu_count, minutes=60)
    runway = runway_minutes(balance_micros=balance, price_per_gpu_hour_micros=price, gpus=gpu_count)
    return PriceQuote(price, per_hour, balance, runway)


def gpu_price_set(
    *,
    gpu_type: str,
    mode: str,
    price: Decimal | str,
    effective_from: datetime | None = None,
    created_by: User | None = None,
) -> GpuPrice:
    """Add a price-book row in force from ``effective_from`` (default now). A price change never rewrites past
    rows nor past minutes: an effective time before now raises ``BackdatedPrice`` and nothing is written."""
    now = timezone.now()
    effective_from = effective_from or now
    price_effective_validate(effective_from=effective_from, now=now)
    with transaction.atomic():
        row = GpuPrice.objects.create(
            gpu_type=gpu_type,
            mode=mode,
            price_per_gpu_hour_micros=to_micros(price),
            effective_from=effective_from,
            created_by=created_by,
        )
        audit_log(
            action="billing.price_set",
            actor=created_by,
            obj=row,
            extra={"gpu_type": gpu_type, "mode": mode, "price": str(price)},
        )
    return row


def tier_discount_set(
    *, tier: str, discount_bps: int, effective_from: datetime | None = None, created_by: User | None = None
) -> TierDiscount:
    """Add a tier-discount row (basis points, 0…10000) in force from ``effective_from`` (default now). Raises
    ``ValueError`` for an unknown tier or a discount outside 0…10000 and ``BackdatedPrice`` for a time in the
    past; nothing is written then."""
    if tier not in PriceTier.values or tier == PriceTier.ON_DEMAND:
        raise ValueError(f"a discount applies to the interruptible tier, not {tier!r}")
    if not isinstance(discount_bps, int) or not 0 <= discount_bps <= 10_000:
        raise ValueError(f"a discount is 0 to 10000 basis points (0-100 %), not {discount_bps!r}")
    now = timezone.now()
    effective_from = effective_from or now
    price_effective_validate(effective_from=effective_from, now=now)
    with transaction.atomic():
        row = TierDiscount.objects.create(
            tier=tier, discount_bps=discount_bps, effective_from=effective_from, created_by=created_by
        )
        audit_log(
            action="billing.tier_discount_set",
            actor=created_by,
            obj=row,
            extra={"tier": tier, "discount_bps": discount_bps},
        )
    return row


def seed_tier_discounts() -> int:
    """Insert the default tier discounts for tiers that have no row yet; returns rows created."""
    created = 0
    for tier, bps in DEFAULT_TIER_DISCOUNT_BPS.items():
        if not TierDiscount.objects.filter(tier=tier).exists():
            TierDiscount.objects.create(tier=tier, discount_bps=bps, effective_from=datetime(2026, 1, 1, tzinfo=UTC))
            created += 1
    return created


def seed_price_book() -> int:
    """Insert the default prices for (type, mode) pairs that have no row yet; returns rows created."""
    created = 0
    for gpu_type, modes in DEFAULT_PRICES.items():
        for mode, price in modes.items():
            if not GpuPrice.objects.filter(gpu_type=gpu_type, mode=mode).exists():
                GpuPrice.objects.create(
                    gpu_type=gpu_type,
                    mode=mode,
                    price_per_gpu_hour_micros=to_micros(price),
                    effective_from=datetime(2026, 1, 1, tzinfo=UTC),
                )
                created += 1
    return created
