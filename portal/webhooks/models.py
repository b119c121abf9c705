"""Webhook endpoints of organizations, the events they are sent, one delivery per (event, endpoint) and every
attempt of it."""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.webhooks.choices import DeliveryStatus, EventType


class WebhookEndpoint(models.Model):
    """An organization's HTTPS URL that receives signed events of the types in ``event_types``.

    ``secret`` signs every delivery; it is shown once (at creation and at each rotation) and kept in clear
    because signing needs it. After a rotation ``previous_secret`` signs too, until
    ``previous_secret_expires_at`` (``WEBHOOK_SECRET_OVERLAP_S``, 24 h), so receivers can switch without a gap.
    """

    organization = models.ForeignKey("portal.Organization", on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.CharField(_("URL"), max_length=500)  # checked by services.endpoint_url_validate
    description = models.CharField(_("description"), max_length=200, blank=True)
    event_types = models.JSONField(default=list)  # values of EventType, in EventType's order
    secret = models.CharField(max_length=100)
    previous_secret = models.CharField(max_length=100, blank=True)
    previous_secret_expires_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")

    def __str__(self) -> str:
        return self.url


class WebhookEvent(models.Model):
    """One thing that happened to an organization, as sent to its endpoints. ``public_id`` (``evt_…``) is the
    ``id`` of the body and the ``Webhook-Id`` header: the same on every attempt, for receivers to dedupe."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.CASCADE, related_name="webhook_events")
    public_id = models.CharField(max_length=40, unique=True)
    type = models.CharField(max_length=40, choices=EventType.choices)
    data = models.JSONField(default=dict, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.public_id} {self.type}"


class WebhookDelivery(models.Model):
    """The sending of one event to one endpoint; one row per (event, endpoint).

    ``next_attempt_at``: when the next attempt is due (null once succeeded or failed); a worker claims an
    attempt by moving it forward (compare-and-set). ``retry_until``: attempts stop after it (3 days after the
    event, or after a redelivery). ``round_attempts``: attempts since the event or the last redelivery (the
    exponent of the backoff); ``attempt_count``: all attempts.
    """

    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    round_attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    retry_until = models.DateTimeField()
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["event", "endpoint"], name="uniq_webhook_delivery")]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]
        verbose_name_plural = _("webhook deliveries")

    def __str__(self) -> str:
        return f"{self.event_id} → {self.endpoint_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery (append-only): when, the HTTP status (null when none came back), the
    response time in milliseconds, the error ("" on success) and the start of the response body."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    response_ms = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="uniq_webhook_attempt")]

    def __str__(self) -> str:
        return f"{self.delivery_id}#{self.number} {self.status_code or self.error}"
