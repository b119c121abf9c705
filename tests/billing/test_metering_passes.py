"""Small passes of a catch-up tick charge every minute of an instance's earlier run segment before its later
one (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from billing.metering import metering_tick
from billing.models import MeteringCursor, UsageRecord
from billing.pricing import cumulative_charge_micros, gpu_price_set
from billing.services import wallet_top_up
from instances.models import GpuType, Instance, InstanceRunSegment

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
M = timedelta(minutes=1)


@pytest.mark.django_db
def test_small_passes_finish_an_earlier_segment_before_charging_a_later_one(alice_org, time_machine, ledger_invariants):
    time_machine.move_to(T0 - timedelta(days=1))
    gpu_type, _ = GpuType.objects.get_or_create(code="A100-80G-SXM", defaults={"name": "A100", "memory_gib": 80})
    gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="5.00", effective_from=T0 - timedelta(hours=1))
    wallet_top_up(organization=alice_org, amount_micros=100_000_000, idempotency_key="topup")
    inst = Instance.objects.create(organization=alice_org, name="i", gpu_type=gpu_type, gpu_count=2, status="running")
    first = InstanceRunSegment.objects.create(instance=inst, started_at=T0, ended_at=T0 + 9 * M + timedelta(seconds=5))
    second = InstanceRunSegment.objects.create(instance=inst, started_at=T0 + 15 * M, ended_at=None)
    now = T0 + 30 * M + timedelta(seconds=10)
    time_machine.move_to(now)

    result = metering_tick(now=now, chunk_rows=3)  # 3 minutes per segment per pass

    assert result.records == 10 + 16  # 9 min 5 s → 10 minutes; 15 min 10 s → 16 minutes
    assert result.passes > 2
    for segment, minutes in ((first, 10), (second, 16)):
        rows = UsageRecord.objects.filter(segment_id=segment.pk)
        assert sorted(rows.values_list("minute_index", flat=True)) == list(range(minutes))
    assert sorted(UsageRecord.objects.values_list("price_minute_index", flat=True)) == list(range(1, 27))
    assert sum(UsageRecord.objects.values_list("amount_micros", flat=True)) == cumulative_charge_micros(
        price_per_gpu_hour_micros=5_000_000, gpus=2, minutes=26
    )
    cursor = MeteringCursor.objects.get(instance_id=inst.pk)
    assert (cursor.segment_id, cursor.segment_minutes, cursor.price_minute_index) == (second.pk, 16, 26)
    assert metering_tick(now=now).records == 0
    ledger_invariants()
