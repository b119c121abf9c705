"""Serializers of the webhooks API. An endpoint's secret appears only in the answers of create and rotate."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from portal.webhooks.choices import EventType
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint
from portal.webhooks.services import MAX_DESCRIPTION_LENGTH, MAX_URL_LENGTH


class WebhookEndpointSerializer(serializers.ModelSerializer[WebhookEndpoint]):
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventType.choices))

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "url", "description", "event_types", "created_at", "rotated_at", "previous_secret_expires_at"]


class WebhookEndpointWithSecretSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(help_text="The signing secret (whsec_…); shown only in this answer.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]


class WebhookEndpointCreateSerializer(serializers.Serializer[dict[str, Any]]):
    url = serializers.CharField(max_length=MAX_URL_LENGTH, help_text="https:// URL whose host is public")
    event_types = serializers.ListField(
        child=serializers.ChoiceField(choices=EventType.choices), min_length=1, max_length=len(EventType.values)
    )
    description = serializers.CharField(max_length=MAX_DESCRIPTION_LENGTH, required=False, allow_blank=True, default="")


class WebhookAttemptSerializer(serializers.ModelSerializer[WebhookAttempt]):
    class Meta:
        model = WebhookAttempt
        fields = ["number", "started_at", "status_code", "response_ms", "error"]


class WebhookDeliverySerializer(serializers.ModelSerializer[WebhookDelivery]):
    event_id = serializers.CharField(source="event.public_id", help_text="evt_…, the Webhook-Id header")
    event_type = serializers.ChoiceField(source="event.type", choices=EventType.choices)
    event_created_at = serializers.DateTimeField(source="event.created_at")
    data = serializers.JSONField(source="event.data")  # type: ignore[assignment]  # the field, not .data
    endpoint = serializers.IntegerField(source="endpoint_id")
    attempts = WebhookAttemptSerializer(many=True)

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_id",
            "event_type",
            "event_created_at",
            "data",
            "endpoint",
            "status",
            "attempt_count",
            "next_attempt_at",
            "retry_until",
            "last_status_code",
            "last_error",
            "delivered_at",
            "attempts",
        ]
