"""Enumerations and the state-transition table of the app marketplace."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class AppCategory(models.TextChoices):
    LEGAL = "legal", _("Legal")
    FINANCE = "finance", _("Finance")
    MEDICAL = "medical", _("Medical")
    GENERAL = "general", _("General")


class AppVisibility(models.TextChoices):
    PRIVATE = "private", _("Private to the organization")
    PUBLIC = "public", _("Public in the marketplace")


class AppState(models.TextChoices):
    DRAFT = "draft", _("Draft")
    IN_REVIEW = "in_review", _("In review")
    PUBLISHED = "published", _("Published")
    SUSPENDED = "suspended", _("Suspended")


# One table of allowed transitions, enforced by ``portal.marketplace.services.app_transition``.
APP_TRANSITIONS: dict[str, frozenset[str]] = {
    AppState.DRAFT: frozenset({AppState.IN_REVIEW, AppState.PUBLISHED}),  # private apps publish without review
    AppState.IN_REVIEW: frozenset({AppState.PUBLISHED, AppState.DRAFT}),
    AppState.PUBLISHED: frozenset({AppState.SUSPENDED, AppState.DRAFT}),
    AppState.SUSPENDED: frozenset({AppState.PUBLISHED, AppState.DRAFT}),
}


class ServingKind(models.TextChoices):
    """How an app version answers: a model served from a training checkpoint, the publisher's own HTTPS
    endpoint (requests signed with HMAC-SHA256), or the built-in echo used for demos and benchmarks."""

    CHECKPOINT = "checkpoint", _("Model from a training checkpoint")
    EXTERNAL = "external", _("External HTTPS endpoint")
    ECHO = "echo", _("Echo (returns the input)")


class VersionStatus(models.TextChoices):
    BUILDING = "building", _("Building")
    READY = "ready", _("Ready")
    FAILED = "failed", _("Failed")


class CallStatus(models.TextChoices):
    RESERVED = "reserved", _("Reserved")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")


class DeploymentStage(models.TextChoices):
    """``AppVersion.deployment["stage"]`` of a checkpoint version's model server (see
    ``portal.marketplace.deployments``); not a model field: the deployment record is a JSON dict."""

    QUEUED = "queued", _("Queued")
    EXPORT = "export", _("Exporting the checkpoint")
    DEPLOY = "deploy", _("Starting the model server")
    SERVING = "serving", _("Serving")
    RESTARTING = "restarting", _("Restarting")
    DOWN = "down", _("Down, restart failed")
    UNHEALTHY = "unhealthy", _("Unhealthy, no longer restarted")
    STOPPED = "stopped", _("Stopped")
