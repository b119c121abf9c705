"""Enumerations of outgoing webhooks: event types and the status of a delivery."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class EventType(models.TextChoices):
    """What an endpoint can subscribe to (payloads are documented in ``portal.webhooks``)."""

    INSTANCE_STATE_CHANGED = "instance.state_changed", _("Instance state changed")
    JOB_CHECKPOINT_COMMITTED = "job.checkpoint_committed", _("Job checkpoint committed")
    JOB_FINISHED = "job.finished", _("Job finished")
    JOB_FAILED = "job.failed", _("Job failed")
    JOB_PREEMPTED = "job.preempted", _("Job preempted")
    JOB_RESUMED = "job.resumed", _("Job resumed")
    WALLET_BALANCE_LOW = "wallet.balance_low", _("Balance low")
    WALLET_TOP_UP_CREDITED = "wallet.top_up_credited", _("Top-up credited")
    APP_CALL_FAILED = "app_call.failed", _("App call failed")


class DeliveryStatus(models.TextChoices):
    """``pending`` while attempts remain; ``succeeded`` after a 2xx; ``failed`` when the retry window is over.
    A redelivery moves a delivery of any status back to ``pending``."""

    PENDING = "pending", _("Pending")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")


DELIVERY_TERMINAL = frozenset({DeliveryStatus.SUCCEEDED, DeliveryStatus.FAILED})
