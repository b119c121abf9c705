"""Serializers of the billing API: usage records, statements, top-ups, prices."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from billing.models import CreditGrant, LedgerEntry, TopUp, UsageRecord
from billing.money import from_micros


class UsageRecordSerializer(serializers.ModelSerializer[UsageRecord]):
    amount = serializers.SerializerMethodField()
    price_per_gpu_hour = serializers.SerializerMethodField()

    class Meta:
        model = UsageRecord
        fields = [
            "id",
            "instance_id",
            "minute",
            "gpu_type",
            "mode",
            "gpu_count",
            "price_per_gpu_hour",
            "amount",
            "amount_micros",
        ]

    def get_amount(self, obj: UsageRecord) -> str:
        return str(from_micros(obj.amount_micros))

    def get_price_per_gpu_hour(self, obj: UsageRecord) -> str:
        return str(from_micros(obj.price_per_gpu_hour_micros))


class TopUpCreateSerializer(serializers.Serializer[dict[str, Any]]):
    amount = serializers.DecimalField(max_digits=12, decimal_places=2, help_text="CNY, e.g. 200.00")
    success_url = serializers.URLField()
    cancel_url = serializers.URLField()


class TopUpSerializer(serializers.ModelSerializer[TopUp]):
    amount = serializers.SerializerMethodField()

    class Meta:
        model = TopUp
        fields = ["id", "status", "amount", "amount_micros", "checkout_url", "created_at", "paid_at"]

    def get_amount(self, obj: TopUp) -> str:
        return str(from_micros(obj.amount_micros))


class StatementKindSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.CharField()
    count = serializers.IntegerField()
    amount_micros = serializers.IntegerField()


class StatementUsageSerializer(serializers.Serializer[dict[str, Any]]):
    instance_id = serializers.IntegerField()
    gpu_type = serializers.CharField()
    mode = serializers.CharField()
    gpu_count = serializers.IntegerField()
    minutes = serializers.IntegerField()
    amount_micros = serializers.IntegerField()


class StatementWriteOffSerializer(serializers.Serializer[dict[str, Any]]):
    instance_id = serializers.IntegerField()
    minutes = serializers.IntegerField()
    amount_micros = serializers.IntegerField()
    first_minute = serializers.DateTimeField()


class StatementVolumeSerializer(serializers.Serializer[dict[str, Any]]):
    volume_id = serializers.IntegerField()
    name = serializers.CharField()
    size_gb = serializers.IntegerField()
    hours = serializers.IntegerField(help_text="started volume-hours charged this month")
    amount_micros = serializers.IntegerField()
    shortfall_micros = serializers.IntegerField()


class StatementSerializer(serializers.Serializer[dict[str, Any]]):
    year = serializers.IntegerField()
    month = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    opening_micros = serializers.IntegerField()
    closing_micros = serializers.IntegerField()
    by_kind = StatementKindSerializer(many=True)
    usage = StatementUsageSerializer(many=True)
    usage_total_micros = serializers.IntegerField()
    usage_uncovered_micros = serializers.IntegerField(help_text="shortfall: usage the balance could not cover")
    write_offs = StatementWriteOffSerializer(
        many=True, help_text="minutes older than the metering lookback, not charged"
    )
    volumes = StatementVolumeSerializer(many=True, help_text="persistent volume storage, per started GB-hour")


class GrantSerializer(serializers.ModelSerializer[CreditGrant]):
    amount = serializers.SerializerMethodField()
    remaining = serializers.SerializerMethodField()

    class Meta:
        model = CreditGrant
        fields = ["id", "kind", "amount", "remaining", "granted_at", "expires_at", "expired_at"]

    def get_amount(self, obj: CreditGrant) -> str:
        return str(from_micros(obj.amount_micros))

    def get_remaining(self, obj: CreditGrant) -> str:
        return str(from_micros(obj.account.balance_micros))


class WalletSerializer(serializers.Serializer[dict[str, object]]):
    """Amounts are decimal strings in CNY with 6 places (exact micro-CNY); ``*_micros`` as integers."""

    organization = serializers.CharField()
    currency = serializers.CharField()
    balance = serializers.CharField()
    trial_balance = serializers.CharField()
    paid_balance = serializers.CharField()
    balance_micros = serializers.IntegerField()
    trial_expires_at = serializers.DateTimeField(allow_null=True)
    grants = GrantSerializer(many=True)


class LedgerLineSerializer(serializers.ModelSerializer[LedgerEntry]):
    amount = serializers.SerializerMethodField()
    amount_micros = serializers.IntegerField()
    kind = serializers.CharField(source="transaction.kind")
    memo = serializers.CharField(source="transaction.memo")
    account = serializers.CharField(source="account.kind")
    transaction_id = serializers.IntegerField(source="transaction.id")
    created_at = serializers.DateTimeField(source="transaction.created_at")

    class Meta:
        model = LedgerEntry
        fields = ["id", "transaction_id", "created_at", "kind", "account", "amount", "amount_micros", "memo"]

    def get_amount(self, obj: LedgerEntry) -> str:
        return str(from_micros(obj.amount_micros))
