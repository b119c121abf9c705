"""Back office for users, organizations, memberships, API tokens and the audit trail.

Every staff change made through the admin also writes an ``AuditEvent`` (``StaffAuditMixin``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin as DjangoUserAdmin
from django.db.models import Model
from django.http import HttpRequest

from portal.audit import audit_log
from portal.models import ApiToken, AuditEvent, Membership, Organization, TrialClaim, User


class StaffAuditMixin:
    """Writes an audit row for every add, change and delete a staff user makes in the admin."""

    def save_model(self, request: HttpRequest, obj: Model, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)  # type: ignore[misc]
        audit_log(
            action=f"admin.{'change' if change else 'add'}",
            actor=request.user,  # type: ignore[arg-type]
            obj=obj,
            extra={"fields": list(getattr(form, "changed_data", []))},
            staff=True,
        )

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        audit_log(action="admin.delete", actor=request.user, obj=obj, extra={"repr": str(obj)}, staff=True)  # type: ignore[arg-type]
        super().delete_model(request, obj)  # type: ignore[misc]


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists and shows rows; never adds, changes or deletes them (append-only records)."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(User)
class UserAdmin(StaffAuditMixin, DjangoUserAdmin):  # type: ignore[type-arg]
    ordering = ["email"]
    list_display = ["email", "name", "email_verified_at", "is_staff", "is_active", "date_joined"]
    list_filter = ["is_staff", "is_active"]
    search_fields = ["email", "name"]
    fieldsets = (
        (None, {"fields": ("email", "password", "name", "timezone")}),
        ("Status", {"fields": ("is_active", "email_verified_at", "is_staff", "is_superuser", "groups")}),
    )
    add_fieldsets = ((None, {"classes": ("wide",), "fields": ("email", "password1", "password2")}),)
    readonly_fields = ["email_verified_at"]


@admin.register(Organization)
class OrganizationAdmin(StaffAuditMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "slug", "personal", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(StaffAuditMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "prefix", "user", "organization", "scope", "created_at", "revoked_at"]
    readonly_fields = ["prefix", "secret_sha256", "user", "organization", "created_at", "last_used_at"]
    search_fields = ["name", "prefix", "user__email"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "action", "actor", "organization", "object_type", "object_id", "staff"]
    list_filter = ["staff", "action"]
    search_fields = ["action", "actor__email", "object_id"]


@admin.register(TrialClaim)
class TrialClaimAdmin(ReadOnlyAdmin):
    list_display = ["email", "organization", "claimed_at"]
    search_fields = ["email"]
