"""Enumerations of the datasets app, with the upload state machine's transition table."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class Domain(models.TextChoices):
    """Industry a dataset serves; the catalog filters by it."""

    FINANCE = "finance", _("Finance")
    MEDICAL = "medical", _("Medical")
    LEGAL = "legal", _("Legal")
    OTHER = "other", _("Other")


class Visibility(models.TextChoices):
    """``public``: in every organization's catalog; ``private``: only the publishing organization sees it."""

    PUBLIC = "public", _("Public")
    PRIVATE = "private", _("Private to the organization")


class DeidStatus(models.TextChoices):
    """Whether personal identifiers were removed from a version's text (see ``datasets.deid``)."""

    DEIDENTIFIED = "deidentified", _("De-identified")
    NOT_REQUIRED = "not_required", _("Not required (public-domain source)")


class UploadFormat(models.TextChoices):
    JSONL = "jsonl", _("JSONL (one object with a text field per line)")
    TXT = "txt", _("Plain text (documents separated by blank lines)")
    CSV = "csv", _("CSV (choose the text column)")


class UploadStatus(models.TextChoices):
    """Life of an upload: ``received → processing → ready``, or ``failed`` (retry goes back to processing)."""

    RECEIVED = "received", _("Received")
    PROCESSING = "processing", _("Processing")
    READY = "ready", _("Ready")
    FAILED = "failed", _("Failed")


UPLOAD_TRANSITIONS: dict[str, frozenset[str]] = {
    UploadStatus.RECEIVED: frozenset({UploadStatus.PROCESSING, UploadStatus.FAILED}),
    UploadStatus.PROCESSING: frozenset({UploadStatus.PROCESSING, UploadStatus.READY, UploadStatus.FAILED}),
    UploadStatus.FAILED: frozenset({UploadStatus.PROCESSING}),
    UploadStatus.READY: frozenset(),
}
"""Allowed ``Upload.status`` changes; enforced by ``datasets.services.upload_transition`` only."""

UPLOAD_TERMINAL = frozenset({UploadStatus.READY})


class PlaceholderStyle(models.TextChoices):
    """How de-identification writes a replaced identifier (``datasets.deid.PLACEHOLDER_STYLES``)."""

    TYPED = "typed", _("Typed placeholder, e.g. [PHONE]")
    PSEUDONYM = "pseudonym", _("Consistent pseudonym per value within a document, e.g. [PHONE_1]")
    HASH = "hash", _("Keyed hash of the value, e.g. [PHONE:3f9a1c2b]")
