"""Celery tasks of outgoing webhooks. Thin and idempotent: a delivery is claimed with a compare-and-set, so a
task that runs twice (or beside the sweep) sends nothing twice."""

from __future__ import annotations

from celery import shared_task

from portal.webhooks import services


@shared_task
def webhook_deliver(delivery_id: int) -> str:
    """Make the due attempt of one delivery (enqueued after commit and by the sweep). Returns its status, or
    ``"not_due"`` when there was nothing to do."""
    delivery = services.webhook_delivery_attempt(delivery_id=delivery_id)
    return str(delivery.status) if delivery is not None else "not_due"


@shared_task
def webhook_deliveries_sweep() -> int:
    """Every 30 s (beat): enqueue every pending delivery whose next attempt is due — retries after backoff,
    deliveries whose first enqueue was lost, claims of workers that died. Returns how many."""
    due = services.webhook_deliveries_due()
    for pk in due:
        webhook_deliver.delay(pk)
    return len(due)
