"""Back office for datasets: catalog review, license versions, read-only agreements, mounts and uploads, and
access revocation (each one its own audited row, made through ``services.access_revoke``)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from datasets.models import (
    AccessRevocation,
    Agreement,
    Dataset,
    DatasetMount,
    DatasetVersion,
    License,
    LicenseVersion,
    Upload,
)
from datasets.services import access_revoke


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Evidence: visible to staff, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "slug", "domain", "visibility", "publisher", "created_at"]
    list_filter = ["domain", "visibility"]
    search_fields = ["name", "slug", "description"]
    readonly_fields = ["preparing", "created_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(License)
class LicenseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "slug", "created_at"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(LicenseVersion)
class LicenseVersionAdmin(ReadOnlyAdmin):
    list_display = [
        "license",
        "number",
        "price_micros",
        "commercial_use",
        "derivative_models",
        "term_days",
        "text_sha256",
    ]
    list_filter = ["license"]


@admin.register(DatasetVersion)
class DatasetVersionAdmin(ReadOnlyAdmin):
    list_display = ["dataset", "number", "documents", "tokens", "language", "deid_status", "license_version"]
    list_filter = ["language", "deid_status"]


@admin.register(Agreement)
class AgreementAdmin(ReadOnlyAdmin):
    list_display = ["organization", "user", "license_version", "dataset", "accepted_at", "ip", "text_sha256"]
    list_filter = ["license_version__license"]
    search_fields = ["organization__name", "user__email"]


@admin.register(DatasetMount)
class DatasetMountAdmin(ReadOnlyAdmin):
    list_display = ["version", "consumer", "organization", "user", "created_at"]
    search_fields = ["consumer"]


@admin.register(Upload)
class UploadAdmin(ReadOnlyAdmin):
    list_display = ["name", "organization", "format", "size_bytes", "status", "stage", "percent", "created_at"]
    list_filter = ["status", "format"]


@admin.register(AccessRevocation)
class AccessRevocationAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Staff revoke an organization's access to a dataset by adding a row; rows are never changed."""

    list_display = ["organization", "dataset", "revoked_by", "reason", "created_at"]
    fields = ["organization", "dataset", "reason"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: AccessRevocation, form: Any, change: bool) -> None:
        saved = access_revoke(
            organization=obj.organization,
            dataset=obj.dataset,
            reason=obj.reason,
            acting_user=request.user,  # type: ignore[arg-type]
        )
        obj.pk = saved.pk
        obj._state.adding = False
