"""Periodic billing tasks (Celery beat). Each is idempotent."""

from __future__ import annotations

from celery import shared_task

from billing.selectors import grants_due_for_expiry
from billing.services import credit_grant_expire


@shared_task
def expire_credit_grants() -> int:
    """Post the expiry of every grant past ``expires_at``; returns how many grants were expired."""
    count = 0
    for grant in grants_due_for_expiry().select_related("wallet__organization")[:1000]:
        credit_grant_expire(grant=grant)
        count += 1
    return count


@shared_task
def metering_tick(shard_index: int = 0, shard_count: int = 1) -> dict[str, int]:
    """Charge started instance-minutes, then run the budget guard and low-balance notices.

    With ``shard_count`` > 1 (one beat entry per shard, e.g. ``args=(k, n)``) each worker charges only the
    organizations with ``id % shard_count == shard_index``; shard 0 also runs the guard and the notices."""
    from billing.metering import budget_guard
    from billing.metering import metering_tick as tick
    from billing.notices import low_balance_notices

    result = tick(shard=(shard_index, shard_count))
    if shard_index != 0:
        return {"records": result.records, "charged_micros": result.charged_micros, "stopped": 0, "notices": 0}
    from billing.volume_metering import volume_metering_tick

    volumes = volume_metering_tick()
    stopped = budget_guard()
    notices = low_balance_notices()
    return {
        "records": result.records,
        "charged_micros": result.charged_micros,
        "volume_hours": volumes.hours,
        "stopped": len(stopped),
        "notices": notices,
    }


@shared_task
def payment_reversals_sweep() -> int:
    """Apply refunds and disputes still unapplied whose payment is credited; returns how many."""
    from billing.payments import payment_reversals_sweep as sweep

    return sweep()
