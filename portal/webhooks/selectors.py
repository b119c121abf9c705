"""Read queries of outgoing webhooks, all scoped to one organization."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from portal.models import Organization
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint


def webhook_endpoints_of(organization: Organization) -> QuerySet[WebhookEndpoint]:
    """The organization's endpoints, newest first."""
    return WebhookEndpoint.objects.filter(organization=organization).order_by("-id")


def webhook_deliveries_of(
    organization: Organization, *, endpoint_id: int | None = None, status: str | None = None
) -> QuerySet[WebhookDelivery]:
    """The organization's deliveries, newest first, with their event, endpoint and attempts (three queries for
    a page, whatever its length)."""
    qs = WebhookDelivery.objects.filter(endpoint__organization=organization)
    if endpoint_id is not None:
        qs = qs.filter(endpoint_id=endpoint_id)
    if status:
        qs = qs.filter(status=status)
    return (
        qs.select_related("event", "endpoint")
        .prefetch_related(Prefetch("attempts", queryset=WebhookAttempt.objects.order_by("number")))
        .order_by("-id")
    )
