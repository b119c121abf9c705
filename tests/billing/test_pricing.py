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
def test_a_price_change_applies_from_its_effective_time_only(time_machine):
    time_machine.move_to(datetime(2026, 11, 1, tzinfo=UTC))
    gpu_price_set(
        gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=datetime(2026, 11, 1, tzinfo=UTC)
    )
    gpu_price_set(
        gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=datetime(2026, 11, 2, 12, tzinfo=UTC)
    )
    assert gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 11, 2, 11, 59, tzinfo=UTC)) == 5_000_000
    assert gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 11, 2, 12, tzinfo=UTC)) == 6_000_000
    with pytest.raises(PriceNotFound, match="no price for A100-80G-SXM"):
        gpu_price_at(gpu_type="A100-80G-SXM", at=datetime(2026, 10, 1, tzinfo=UTC))


@pytest.mark.django_db
def test_seeding_is_idempotent():
    assert seed_price_book() == 8
    assert seed_price_book() == 0
    assert gpu_price_at(gpu_type="H100-80G-SXM", mode="bare_metal") == 14_400_000


@pytest.mark.django_db
def test_a_backdated_price_is_refused_and_nothing_is_written(time_machine):
    from billing.models import GpuPrice
    from billing.pricing import BackdatedPrice

    now = datetime(2026, 11, 2, 12, 30, tzinfo=UTC)
    time_machine.move_to(now, tick=False)
    with pytest.raises(BackdatedPrice, match="A price cannot take effect in the past"):
        gpu_price_set(
            gpu_type="A100-80G-SXM",
            mode="container",
            price="6.00",
            effective_from=datetime(2026, 11, 2, 12, tzinfo=UTC),
        )
    assert GpuPrice.objects.count() == 0
    row = gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="6.00", effective_from=now)
    assert row.effective_from == now


@pytest.mark.django_db
def test_staff_adding_a_backdated_price_in_the_admin_get_a_clear_message(client, time_machine):
    from django.urls import reverse

    from billing.models import GpuPrice
    from portal.models import User

    time_machine.move_to(datetime(2026, 11, 2, 12, 30, tzinfo=UTC), tick=False)
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    url = reverse("admin:billing_gpuprice_add")
    form = {
        "gpu_type": "A100-80G-SXM",
        "mode": "container",
        "price_per_gpu_hour_micros": "6000000",
        "effective_from_0": "2026-11-02",
        "effective_from_1": "20:00:00",
    }  # 12:00 UTC in Asia/Shanghai
    page = client.post(url, form).content.decode()
    assert "A price cannot take effect in the past" in page and "adjustment on the wallet" in page
    assert GpuPrice.objects.count() == 0
    response = client.post(url, {**form, "effective_from_1": "21:00:00"})
    assert response.status_code == 302
    assert list(GpuPrice.objects.values_list("price_per_gpu_hour_micros", "effective_from")) == [
        (6_000_000, datetime(2026, 11, 2, 13, tzinfo=UTC))
    ]
