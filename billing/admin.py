"""Back office for the ledger (read-only), wallets (adjustment action) and credit grants."""

from __future__ import annotations

import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, Now
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from billing.choices import GrantKind
from billing.forms import AdjustmentForm
from billing.models import (
    CreditGrant,
    GpuPrice,
    LedgerAccount,
    LedgerEntry,
    LedgerTransaction,
    StoragePrice,
    StripeEvent,
    TierDiscount,
    TopUp,
    UsageWriteOff,
    VolumeUsage,
    Wallet,
)
from billing.money import format_cny, to_micros
from billing.services import LedgerError, credit_grant_create, ledger_adjust
from portal.admin import ReadOnlyAdmin
from portal.audit import audit_log
from portal.lib.http import AuthedHttpRequest


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
    """Wallets with paid balance, unexpired credit (grants: trial, promotional, from staff) and the total,
    so staff see a grant land; the list costs one query (the credit is an annotated subquery)."""

    list_display = ["organization", "paid_balance", "credit_balance", "total_balance"]
    search_fields = ["organization__name", "organization__slug"]
    actions = ["post_adjustment"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Wallet]:
        live = CreditGrant.objects.filter(
            wallet=OuterRef("pk"), expired_at__isnull=True, expires_at__gt=Now(), account__balance_micros__gt=0
        )
        credit = live.values("wallet").annotate(s=Sum("account__balance_micros")).values("s")
        return (
            super()
            .get_queryset(request)
            .select_related("organization", "paid_account")
            .annotate(credit_micros=Coalesce(Subquery(credit), 0))
        )

    @admin.display(description="Paid balance (CNY)")
    def paid_balance(self, obj: Wallet) -> str:
        return format_cny(obj.paid_account.balance_micros, 6)

    @admin.display(description="Credit grants (CNY)")
    def credit_balance(self, obj: Wallet) -> str:
        return format_cny(int(getattr(obj, "credit_micros", 0) or 0), 6)

    @admin.display(description="Total (CNY)")
    def total_balance(self, obj: Wallet) -> str:
        return format_cny(obj.paid_account.balance_micros + int(getattr(obj, "credit_micros", 0) or 0), 6)

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    @admin.action(description="Post an adjustment (asks for amount and reason)")
    def post_adjustment(self, request: AuthedHttpRequest, queryset: QuerySet[Wallet]) -> HttpResponse | None:
        """Correct balances only through a new, balanced, audited transaction with a reason."""
        form = AdjustmentForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            for wallet in queryset.select_related("organization"):
                try:
                    ledger_adjust(
                        organization=wallet.organization,
                        amount_micros=to_micros(form.cleaned_data["amount"]),
                        reason=form.cleaned_data["reason"],
                        staff_user=request.user,
                        idempotency_key=f"adjustment:{uuid.uuid4()}",
                    )
                except LedgerError as exc:
                    self.message_user(request, f"{wallet.organization}: {exc}", messages.ERROR)
                else:
                    self.message_user(request, f"{wallet.organization}: adjustment posted", messages.SUCCESS)
            return None
        return render(
            request,
            "admin/billing/adjustment.html",
            {
                "form": form,
                "wallets": queryset,
                "action": "post_adjustment",
                "opts": self.model._meta,
                **self.admin_site.each_context(request),
            },
        )


class GpuPriceForm(forms.ModelForm):  # type: ignore[type-arg]
    """A new price-book row; its effective time may not be in the past (``price_effective_validate``)."""

    class Meta:
        model = GpuPrice
        fields = ["gpu_type", "mode", "price_per_gpu_hour_micros", "effective_from"]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        soon = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=5)
        self.fields["effective_from"].initial = soon

    def clean_effective_from(self) -> object:
        from billing.pricing import BackdatedPrice, price_effective_validate

        value = self.cleaned_data["effective_from"]
        try:
            price_effective_validate(effective_from=value)
        except BackdatedPrice as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value


class AppendOnlyPriceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Admin of a price-book table (GPU prices, the storage rate, tier discounts): rows are only ever added
    (in force from ``effective_from``, never backdated — the form checks), never edited or deleted; each new
    row records its author and an audit row ``audit_action`` with :meth:`audit_extra`."""

    audit_action = ""

    def audit_extra(self, obj: Any) -> dict[str, Any]:
        """What the audit row records of a new row ``obj``."""
        raise NotImplementedError

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return obj is None

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Any, form: object, change: bool) -> None:
        obj.created_by = request.user
        super().save_model(request, obj, form, change)  # type: ignore[arg-type]
        audit_log(
            action=self.audit_action,
            actor=request.user,  # type: ignore[arg-type]
            obj=obj,
            staff=True,
            extra=self.audit_extra(obj),
        )


@admin.register(GpuPrice)
class GpuPriceAdmin(AppendOnlyPriceAdmin):
    """Price changes are new rows (effective from now on); rows in force are never edited, and a backdated row
    is refused — past usage is corrected with an audited wallet adjustment."""

    form = GpuPriceForm
    list_display = ["gpu_type", "mode", "price_display", "effective_from", "created_by"]
    list_filter = ["gpu_type", "mode"]
    fields = ["gpu_type", "mode", "price_per_gpu_hour_micros", "effective_from"]

    audit_action = "admin.price_add"

    @admin.display(description="CNY per GPU-hour")
    def price_display(self, obj: GpuPrice) -> str:
        return format_cny(obj.price_per_gpu_hour_micros, 2)

    def audit_extra(self, obj: GpuPrice) -> dict[str, Any]:
        return {"price_micros": obj.price_per_gpu_hour_micros}


class TierDiscountForm(GpuPriceForm):
    """A new tier-discount row (basis points, 0…10000), not in the past (as a price-book row)."""

    class Meta:
        model = TierDiscount
        fields = ["tier", "discount_bps", "effective_from"]

    def clean_discount_bps(self) -> int:
        value = int(self.cleaned_data["discount_bps"])
        if value > 10_000:
            raise forms.ValidationError("A discount is 0 to 10000 basis points (0-100 %).")
        return value


@admin.register(TierDiscount)
class TierDiscountAdmin(AppendOnlyPriceAdmin):
    """The interruptible tier's discount: append-only rows like the price book's."""

    form = TierDiscountForm
    list_display = ["tier", "discount_bps", "effective_from", "created_by"]
    fields = ["tier", "discount_bps", "effective_from"]
    audit_action = "admin.tier_discount_add"

    def audit_extra(self, obj: TierDiscount) -> dict[str, Any]:
        return {"tier": obj.tier, "discount_bps": obj.discount_bps}


class GrantForm(forms.Form):
    """Staff credit grant: amount, validity and the reason recorded on the transaction and audit row."""

    amount = forms.DecimalField(label="Amount (CNY)", max_digits=14, decimal_places=6, min_value=Decimal("0.01"))
    days = forms.IntegerField(label="Valid for (days)", min_value=1, max_value=3650, initial=90)
    reason = forms.CharField(label="Reason", max_length=300)


def grant_credit(
    modeladmin: admin.ModelAdmin,
    request: HttpRequest,  # type: ignore[type-arg]
    queryset: QuerySet[Wallet],
) -> HttpResponse | None:
    """Give credit to the selected wallets (a staff grant, spent before paid balance, audited)."""
    form = GrantForm(request.POST if "apply" in request.POST else None)
    if "apply" in request.POST and form.is_valid():
        for wallet in queryset.select_related("organization"):
            credit_grant_create(
                organization=wallet.organization,
                amount_micros=to_micros(form.cleaned_data["amount"]),
                expires_at=timezone.now() + timedelta(days=form.cleaned_data["days"]),
                kind=GrantKind.STAFF,
                idempotency_key=f"staff-grant:{uuid.uuid4()}",
                reason=form.cleaned_data["reason"],
                created_by=request.user,  # type: ignore[arg-type]
            )
            extra = {"amount": str(form.cleaned_data["amount"]), "reason": form.cleaned_data["reason"]}
            audit_log(
                action="admin.grant_credit",
                actor=request.user,  # type: ignore[arg-type]
                organization=wallet.organization,
                staff=True,
                extra=extra,
            )
        modeladmin.message_user(request, f"credit granted to {queryset.count()} wallet(s)", messages.SUCCESS)
        return None
    return render(
        request,
        "admin/billing/adjustment.html",
        {
            "form": form,
            "wallets": queryset,
            "action": "grant_credit",
            "title": "Grant credit",
            "opts": modeladmin.model._meta,
            **modeladmin.admin_site.each_context(request),
        },
    )


grant_credit.short_description = "Grant credit (asks for amount, validity and reason)"  # type: ignore[attr-defined]
WalletAdmin.actions = ["post_adjustment", grant_credit]


@admin.register(StripeEvent)
class StripeEventAdmin(ReadOnlyAdmin):
    list_display = ["received_at", "type", "event_id", "status", "attempts", "error"]
    list_filter = ["status", "type"]
    search_fields = ["event_id"]


@admin.register(TopUp)
class TopUpAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "organization",
        "amount_micros",
        "status",
        "refunded_micros",
        "unrecovered_micros",
        "created_at",
        "paid_at",
    ]
    list_filter = ["status"]


@admin.register(UsageWriteOff)
class UsageWriteOffAdmin(ReadOnlyAdmin):
    """Minutes not charged because they began before the metering lookback when first seen (audited too)."""

    list_display = ["created_at", "organization", "instance_id", "first_minute", "minutes", "amount_micros"]


class StoragePriceForm(GpuPriceForm):
    """A new storage price row (micro-CNY per GB-hour of persistent volumes), never backdated."""

    class Meta:
        model = StoragePrice
        fields = ["price_per_gb_hour_micros", "effective_from"]


@admin.register(StoragePrice)
class StoragePriceAdmin(AppendOnlyPriceAdmin):
    """The price book's storage rate: new rows only, as for GPU prices; without a row the setting
    ``VOLUME_PRICE_PER_GB_HOUR`` applies."""

    form = StoragePriceForm
    list_display = ["price_per_gb_hour_micros", "effective_from", "created_by"]
    fields = ["price_per_gb_hour_micros", "effective_from"]
    audit_action = "admin.storage_price_add"

    def audit_extra(self, obj: StoragePrice) -> dict[str, Any]:
        return {"price_per_gb_hour_micros": obj.price_per_gb_hour_micros}


@admin.register(VolumeUsage)
class VolumeUsageAdmin(ReadOnlyAdmin):
    list_display = ["volume_id", "volume_name", "organization", "hour", "size_gb", "amount_micros", "shortfall_micros"]
    search_fields = ["volume_name", "organization__slug"]
