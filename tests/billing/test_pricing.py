"""The price book and the cumulative rounding rule."""

from datetime import UTC, datetime

import pytest

from billing.pricing import (
    PriceNotFound,
    cumulative_charge_micros,
    gpu_price_at,
    gpu_price_set,
    minute_charge_micros,
    seed_price_book,
)


def test_120_minutes_of_one_a100_at_5_cny_is_exactly_10_cny():
    assert cumulative_charge_micros(price_per_gpu_hour_micros=5_000_000, gpus=1, minutes=120) == 10_000_000


def test_minute_charges_add_up_to_the_cumulative_rounding_with_no_remainder_lost():
    # 7.00 CNY/GPU-hour x 3 GPUs = 0.35 CNY/min exactly; 1.00/GPU-hour x 1 = 16666.666… micros/min.
    charges = [minute_charge_micros(price_per_gpu_hour_micros=1_000_000, gpus=1, minute_index=i) for i in range(1, 61)]
    assert charges[:3] == [16667, 16666, 16667]
    assert sum(charges) == 1_000_000
    assert cumulative_charge_micros(price_per_gpu_hour_micros=1_000_000, gpus=1, minutes=1) == 16667
    assert cumulative_charge_micros(price_per_gpu_hour_micros=7_000_000, gpus=3, minutes=7) == 2_450_000


@pytest.mark.django_db
def test_a_price_change_applies_from_its_effective_time_only():
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00",
                  effective_from=datetime(2026, 11, 1, tzinfo=UTC))
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00",
                  effective_from=datetime(2026, 11, 2, 12, tzinfo=UTC))
    assert gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 11, 2, 11, 59, tzinfo=UTC)) == 5_000_000
    assert gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 11, 2, 12, tzinfo=UTC)) == 6_000_000
    with pytest.raises(PriceNotFound, match="no price for A100-80G-SXM"):
        gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 10, 1, tzinfo=UTC))


@pytest.mark.django_db
def test_seeding_is_idempotent():
    assert seed_price_book() == 8
    assert seed_price_book() == 0
    assert gpu_price_at(gpu_type="H100-80G-SXM", mode="bare_metal") == 14_400_000
