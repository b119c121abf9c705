"""Back office for the ledger (read-only), wallets (adjustment action) and credit grants."""

from __future__ import annotations

import uuid

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from billing.forms import AdjustmentForm
from billing.models import CreditGrant, GpuPrice, LedgerAccount, LedgerEntry, LedgerTransaction, Wallet
from billing.money import format_cny, to_micros
from billing.services import LedgerError, ledger_adjust
from portal.admin import ReadOnlyAdmin


class EntryInline(admin.TabularInline):  # type: ignore[type-arg]
    model = LedgerEntry
    extra = 0
    can_delete = False
    readonly_fields = ["account", "amount_micros"]

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(LedgerTransaction)
class LedgerTransactionAdmin(ReadOnlyAdmin):
    list_display = ["id", "created_at", "kind", "organization", "memo", "idempotency_key", "created_by"]
    list_filter = ["kind"]
    search_fields = ["idempotency_key", "memo", "organization__name", "organization__slug"]
    inlines = [EntryInline]


@admin.register(LedgerAccount)
class LedgerAccountAdmin(ReadOnlyAdmin):
    list_display = ["code", "kind", "organization", "balance_display"]
    list_filter = ["kind"]
    search_fields = ["code", "organization__name"]

    @admin.display(description="Balance (CNY)")
    def balance_display(self, obj: LedgerAccount) -> str:
        return format_cny(obj.balance_micros, 6) if obj.track_balance else "—"


@admin.register(CreditGrant)
class CreditGrantAdmin(ReadOnlyAdmin):
    list_display = ["id", "wallet", "kind", "amount_micros", "granted_at", "expires_at", "expired_at"]
    list_filter = ["kind"]


@admin.register(Wallet)
class WalletAdmin(ReadOnlyAdmin):
    list_display = ["organization", "paid_balance"]
    search_fields = ["organization__name", "organization__slug"]
    actions = ["post_adjustment"]

    @admin.display(description="Paid balance (CNY)")
    def paid_balance(self, obj: Wallet) -> str:
        return format_cny(obj.paid_account.balance_micros, 6)

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Post an adjustment (asks for amount and reason)")
    def post_adjustment(self, request: HttpRequest, queryset: QuerySet[Wallet]) -> HttpResponse | None:
        """Correct balances only through a new, balanced, audited transaction with a reason."""
        form = AdjustmentForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            for wallet in queryset.select_related("organization"):
                try:
                    ledger_adjust(
                        organization=wallet.organization,
                        amount_micros=to_micros(form.cleaned_data["amount"]),
                        reason=form.cleaned_data["reason"],
                        staff_user=request.user,  # type: ignore[arg-type]
                        idempotency_key=f"adjustment:{uuid.uuid4()}",
                    )
                except LedgerError as exc:
                    self.message_user(request, f"{wallet.organization}: {exc}", messages.ERROR)
                else:
                    self.message_user(request, f"{wallet.organization}: adjustment posted", messages.SUCCESS)
            return None
        return render(request, "admin/billing/adjustment.html",
                      {"form": form, "wallets": queryset, "action": "post_adjustment",
                       "opts": self.model._meta, **self.admin_site.each_context(request)})


@admin.register(GpuPrice)
class GpuPriceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Price changes are new rows (effective from a time); rows in force are never edited."""

    list_display = ["gpu_type", "mode", "price_display", "effective_from", "created_by"]
    list_filter = ["gpu_type", "mode"]
    fields = ["gpu_type", "mode", "price_per_gpu_hour_micros", "effective_from"]

    @admin.display(description="CNY per GPU-hour")
    def price_display(self, obj: GpuPrice) -> str:
        return format_cny(obj.price_per_gpu_hour_micros, 2)

    def has_change_permission(self, request: HttpRequest, obj: GpuPrice | None = None) -> bool:
        return obj is None

    def has_delete_permission(self, request: HttpRequest, obj: GpuPrice | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: GpuPrice, form: object, change: bool) -> None:
        obj.created_by = request.user  # type: ignore[assignment]
        super().save_model(request, obj, form, change)  # type: ignore[arg-type]
        from portal.audit import audit_log

        audit_log(action="admin.price_add", actor=request.user, obj=obj, staff=True,  # type: ignore[arg-type]
                  extra={"price_micros": obj.price_per_gpu_hour_micros})
