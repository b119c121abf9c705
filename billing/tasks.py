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
