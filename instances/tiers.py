"""What the console shows of the price tiers and idle autostop: each tier's price before launch, and on an
instance its tier, preemptions (with what they cost) and its idle-autostop state."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from billing.choices import PriceTier
from billing.pricing import PriceBook, cumulative_charge_micros
from instances.choices import InstanceStatus
from instances.interactive.idle import autostop_at, autostop_enabled, last_activity, minutes_saved
from instances.models import Instance
from instances.selectors import preemption_summary


def tier_prices(*, gpu_type: str, gpu_count: int, mode: str, selected: str) -> list[dict[str, Any]]:
    """Per tier, in the order of ``PriceTier``: ``tier``, ``label``, ``price_per_hour_micros`` (all GPUs,
    by the one charging rule), ``discount_bps`` and ``selected``. A tier without a price is left out."""
    book = PriceBook({gpu_type})
    now = timezone.now()
    out = []
    for tier in PriceTier:
        price = book.at(gpu_type, mode, now, tier)
        if price is None:
            continue
        out.append(
            {
                "tier": tier.value,
                "label": tier.label,
                "price_per_hour_micros": cumulative_charge_micros(
                    price_per_gpu_hour_micros=price, gpus=gpu_count, minutes=60
                ),
                "discount_bps": book.discount_bps_at(tier, now),
                "selected": tier == selected,
            }
        )
    return out


def tier_and_idle_context(instance: Instance) -> dict[str, Any]:
    """Template context of an instance page: ``costs`` (:func:`instances.selectors.preemption_summary`),
    ``idle`` (``enabled``, ``minutes``, ``warned``, ``stop_at``, ``autostopped_at``, ``minutes_saved``)."""
    enabled = autostop_enabled(instance)
    running = instance.status == InstanceStatus.RUNNING
    last = last_activity(instance) if enabled and running else None
    stop_at = autostop_at(instance, last=last) if last is not None else None
    warned_at = instance.idle_warned_at
    warned = stop_at is not None and last is not None and warned_at is not None and warned_at >= last
    return {
        "costs": preemption_summary(instance),
        "idle": {
            "enabled": enabled,
            "minutes": instance.idle_autostop_minutes,
            "warned": warned,
            "stop_at": stop_at,
            "autostopped_at": instance.autostopped_at,
            "minutes_saved": minutes_saved(instance),
        },
    }
