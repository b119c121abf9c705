"""Back office of outgoing webhooks: endpoints (secrets never shown), events and deliveries read-only."""

from __future__ import annotations

from django.contrib import admin

from portal.admin import ReadOnlyAdmin
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    list_display = ["url", "organization", "created_at", "rotated_at"]
    list_filter = ["created_at"]
    search_fields = ["url", "organization__slug"]
    exclude = ["secret", "previous_secret"]


@admin.register(WebhookEvent)
class WebhookEventAdmin(ReadOnlyAdmin):
    list_display = ["public_id", "type", "organization", "created_at"]
    list_filter = ["type"]
    search_fields = ["public_id", "organization__slug"]


class WebhookAttemptInline(admin.TabularInline):  # type: ignore[type-arg]
    model = WebhookAttempt
    extra = 0
    can_delete = False
    readonly_fields = ["number", "started_at", "status_code", "response_ms", "error", "response_excerpt"]

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["event", "endpoint", "status", "attempt_count", "next_attempt_at", "last_status_code"]
    list_filter = ["status"]
    search_fields = ["event__public_id", "endpoint__url"]
    inlines = [WebhookAttemptInline]
