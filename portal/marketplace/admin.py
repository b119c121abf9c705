"""Back office of the AI app marketplace: staff review of apps (approve, suspend) and the read-only call log.

Every staff change made here writes an ``AuditEvent`` (``portal.admin.StaffAuditMixin``).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from portal.admin import ReadOnlyAdmin, StaffAuditMixin
from portal.marketplace.models import App, AppCall
from portal.marketplace.reasons import app_reason
from portal.marketplace.services import MarketplaceError, app_transition


@admin.register(App)
class AppAdmin(StaffAuditMixin, admin.ModelAdmin):  # type: ignore[type-arg]
    """Staff review: approve a public app (in review → published) or suspend one; both audited."""

    list_display = ["name", "slug", "publisher", "category", "visibility", "state", "price_per_call_micros"]
    list_filter = ["state", "visibility", "category"]
    search_fields = ["name", "slug", "publisher__name"]
    readonly_fields = ["state", "publisher", "created_by", "attributions"]
    actions = ["approve", "suspend"]

    @admin.action(description="Approve and publish the selected apps")
    def approve(self, request: HttpRequest, queryset: Any) -> None:
        self._move(request, queryset, "published", app_reason("approved_by_staff"))

    @admin.action(description="Suspend the selected apps")
    def suspend(self, request: HttpRequest, queryset: Any) -> None:
        self._move(request, queryset, "suspended", app_reason("suspended_by_staff"))

    def _move(self, request: HttpRequest, queryset: Any, to: str, reason: str) -> None:
        for app in queryset:
            try:
                app_transition(app=app, to=to, acting_user=request.user, reason=reason, staff=True)  # type: ignore[arg-type]
                self.message_user(request, f"{app}: {to}")
            except MarketplaceError as exc:
                self.message_user(request, f"{app}: {exc}", level="error")


@admin.register(AppCall)
class AppCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "app", "caller", "status", "price_micros", "latency_ms", "error_code"]
    list_filter = ["status"]
