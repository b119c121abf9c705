"""Catalog (datasets, immutable versions, licenses), agreements, access revocations, uploads and mounts."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from datasets.choices import DeidStatus, Domain, PlaceholderStyle, UploadFormat, UploadStatus, Visibility


class ImmutableRecord(Exception):
    """Raised when code tries to change or delete a row that is evidence (agreements, versions, mounts)."""


class AppendOnlyQuerySet(models.QuerySet):  # type: ignore[type-arg]
    """A queryset whose bulk ``update`` and ``delete`` raise ``ImmutableRecord``."""

    def update(self, **kwargs: Any) -> int:
        raise ImmutableRecord(f"{self.model.__name__} rows are never edited")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise ImmutableRecord(f"{self.model.__name__} rows are never deleted")


class AppendOnlyModel(models.Model):
    """Base of rows that are written once: a second ``save`` or any ``delete`` raises ``ImmutableRecord``."""

    objects = AppendOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not self._state.adding:
            raise ImmutableRecord(f"{type(self).__name__} {self.pk} is never edited")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise ImmutableRecord(f"{type(self).__name__} {self.pk} is never deleted")


class License(models.Model):
    """A named license (e.g. "CC BY 4.0"); its text and terms live in numbered ``LicenseVersion`` rows."""

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(_("name"), max_length=150)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("license")
        verbose_name_plural = _("licenses")

    def __str__(self) -> str:
        return self.name

    @property
    def current_version(self) -> LicenseVersion | None:
        """The highest-numbered version: the one new agreements (and so new mounts) need."""
        return self.versions.order_by("-number").first()


class LicenseVersion(AppendOnlyModel):
    """One immutable version of a license: exact text, its SHA-256, machine-readable terms and the fee.

    ``price_micros`` is a one-time fee in micro-CNY per organization (0 = free), charged through the ledger
    when an organization first accepts this version. ``term_days`` (None = perpetual) bounds how long an
    agreement stays current.
    """

    license = models.ForeignKey(License, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    text = models.TextField()
    text_sha256 = models.CharField(max_length=64)
    commercial_use = models.BooleanField(_("commercial use"), default=False)
    redistribution = models.BooleanField(_("redistribution"), default=False)
    derivative_models = models.BooleanField(_("derivative models"), default=True)
    attribution_text = models.TextField(_("attribution"), blank=True)
    field_of_use = models.CharField(_("field of use"), max_length=200, blank=True)
    term_days = models.PositiveIntegerField(_("term (days)"), null=True, blank=True)
    price_micros = models.BigIntegerField(_("price (micro-CNY)"), default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["license", "number"], name="uniq_license_version"),
            models.CheckConstraint(condition=models.Q(price_micros__gte=0), name="license_price_not_negative"),
        ]
        ordering = ["license_id", "number"]

    def __str__(self) -> str:
        return f"{self.license.name} v{self.number}"

    @property
    def is_free(self) -> bool:
        return self.price_micros == 0


class Dataset(models.Model):
    """A catalog entry. ``publisher`` None means the platform itself; a ``private`` dataset is visible only
    to its publisher organization (uploads make private datasets)."""

    domain = models.CharField(_("domain"), max_length=20, choices=Domain.choices, default=Domain.OTHER)
    name = models.CharField(_("name"), max_length=200)
    slug = models.SlugField(max_length=120, unique=True)
    description = models.TextField(_("description"), blank=True)
    publisher = models.ForeignKey(
        "portal.Organization", null=True, blank=True, on_delete=models.PROTECT, related_name="published_datasets"
    )
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC)
    attribution = models.TextField(_("attribution"), blank=True)
    source_url = models.URLField(blank=True)
    preparing = models.JSONField(default=dict, blank=True)
    """Progress of the first version while it is built: ``{"stage", "percent", "error"}``; {} when idle."""
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("dataset")
        verbose_name_plural = _("datasets")
        ordering = ["domain", "name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def publisher_name(self) -> str:
        return self.publisher.name if self.publisher is not None else "gpu-portal"

    @property
    def latest_version(self) -> DatasetVersion | None:
        return self.versions.order_by("-number").first()


class DatasetVersion(AppendOnlyModel):
    """An immutable, finished version of a dataset: statistics, manifest and the shard folder.

    Counts are exact (from the pipeline's ``statistics`` stage): ``documents``; ``bytes`` and ``characters``
    of all texts (UTF-8 bytes, code points); ``tokens`` in the shards including one eos per document.
    ``manifest`` = ``{"source_files": [{"file", "bytes", "sha256"}], "files": [shard folder files …]}``.
    ``shard_dir`` and ``tokenizer_path`` are relative to ``settings.DATA_DIR``.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="versions")
    number = models.PositiveIntegerField()
    license_version = models.ForeignKey(LicenseVersion, on_delete=models.PROTECT, related_name="dataset_versions")
    manifest = models.JSONField(default=dict)
    documents = models.BigIntegerField(default=0)
    bytes = models.BigIntegerField(default=0)
    characters = models.BigIntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    language = models.CharField(max_length=10, blank=True)
    deid_status = models.CharField(max_length=20, choices=DeidStatus.choices, default=DeidStatus.DEIDENTIFIED)
    deid_report = models.JSONField(default=dict)
    sample = models.TextField(blank=True)
    shard_dir = models.CharField(max_length=500)
    tokenizer_path = models.CharField(max_length=500)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "number"], name="uniq_dataset_version")]
        ordering = ["dataset_id", "-number"]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.number}"

    @property
    def shard_path(self) -> Path:
        """Absolute path of the shard folder (``instances.runtime.shards`` format)."""
        return Path(settings.DATA_DIR) / self.shard_dir

    @property
    def tokenizer_file(self) -> Path:
        return Path(settings.DATA_DIR) / self.tokenizer_path

    @property
    def shards_ready(self) -> bool:
        return (self.shard_path / "index.json").is_file()


class Agreement(AppendOnlyModel):
    """An organization's acceptance of one license version: evidence for an audit, never edited or deleted.

    ``text_sha256`` is the SHA-256 of the exact text shown to the user; ``charge_transaction_id`` is the
    ledger transaction of the license fee (None when free).
    """

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="agreements")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="agreements")
    license_version = models.ForeignKey(LicenseVersion, on_delete=models.PROTECT, related_name="agreements")
    dataset = models.ForeignKey(Dataset, null=True, blank=True, on_delete=models.PROTECT, related_name="agreements")
    text_sha256 = models.CharField(max_length=64)
    accepted_at = models.DateTimeField(default=timezone.now)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=500, blank=True)
    charge_transaction_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-accepted_at", "-id"]
        indexes = [models.Index(fields=["organization", "license_version"])]

    def __str__(self) -> str:
        return f"{self.organization} accepted {self.license_version} at {self.accepted_at:%Y-%m-%d %H:%M}"

    @property
    def expires_at(self) -> Any:
        days = self.license_version.term_days
        return None if days is None else self.accepted_at + timedelta(days=days)


class AccessRevocation(AppendOnlyModel):
    """Staff withdrew an organization's access to a dataset: agreements made before ``created_at`` no longer
    count, and no new agreement can be made while the revocation stands. Its own row, never edited."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="+")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="revocations")
    revoked_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.organization}: access to {self.dataset} revoked"


class DatasetMount(AppendOnlyModel):
    """A dataset version attached read-only to a consumer (``"instances.trainingjob:42"``): data lineage."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="dataset_mounts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    version = models.ForeignKey(DatasetVersion, on_delete=models.PROTECT, related_name="mounts")
    agreement = models.ForeignKey(Agreement, null=True, on_delete=models.PROTECT, related_name="mounts")
    consumer = models.CharField(max_length=200, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.version} → {self.consumer}"

    @property
    def shard_dir(self) -> Path:
        """The version's shard folder (read-only use)."""
        return self.version.shard_path


class Upload(models.Model):
    """A member's own corpus going through the pipeline; progress (``stage``, ``percent``) is polled.

    The file is stored at ``DATA_DIR/uploads/<id>/original.<format>`` (``stored_path``, relative) until the
    pipeline finishes; it is kept afterwards only when ``keep_original``. ``error`` holds
    ``PipelineError.as_dict()`` of the failure, ``report`` the per-stage reports.
    """

    organization = models.ForeignKey("portal.Organization", on_delete=models.CASCADE, related_name="uploads")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(_("name"), max_length=200)
    format = models.CharField(_("format"), max_length=10, choices=UploadFormat.choices)
    text_column = models.CharField(_("text column"), max_length=100, blank=True)
    original_filename = models.CharField(max_length=255, blank=True)
    size_bytes = models.BigIntegerField(default=0)
    stored_path = models.CharField(max_length=500, blank=True)
    keep_original = models.BooleanField(_("keep the original file"), default=False)
    status = models.CharField(max_length=20, choices=UploadStatus.choices, default=UploadStatus.RECEIVED)
    stage = models.CharField(max_length=20, blank=True)
    percent = models.PositiveSmallIntegerField(default=0)
    error = models.JSONField(default=dict, blank=True)
    report = models.JSONField(default=dict, blank=True)
    domain = models.CharField(_("domain"), max_length=20, choices=Domain.choices, default=Domain.OTHER)
    dataset_version = models.ForeignKey(
        DatasetVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads"
    )
    tokenizer_from = models.ForeignKey(
        DatasetVersion,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("Re-use this version's tokenizer instead of training a new one."),
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def workdir(self) -> Path:
        """Where the pipeline writes (stage outputs, then the shard folder of the resulting version)."""
        return Path(settings.DATA_DIR) / "datasets" / f"org-{self.organization_id}" / f"upload-{self.pk}"

    @property
    def original_path(self) -> Path | None:
        return Path(settings.DATA_DIR) / self.stored_path if self.stored_path else None


class DeidPolicy(models.Model):
    """An organization's de-identification settings, applied to its uploads: the placeholder style and an
    allow-list of values never replaced (one per line, e.g. the company's own hotline; compared after
    removing spaces, dashes and parentheses, case-insensitively). No row means the defaults (typed, none)."""

    organization = models.OneToOneField("portal.Organization", on_delete=models.CASCADE, related_name="deid_policy")
    placeholder_style = models.CharField(
        _("placeholder style"), max_length=12, choices=PlaceholderStyle.choices, default=PlaceholderStyle.TYPED
    )
    allow_list = models.TextField(_("allow-list"), blank=True)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"de-identification policy of {self.organization_id}"

    @property
    def allow_entries(self) -> list[str]:
        """The allow-list as stripped, non-empty lines."""
        return [line.strip() for line in self.allow_list.splitlines() if line.strip()]
