"""Serializers of the portal API (me, wallet, ledger, tokens)."""

from __future__ import annotations

from rest_framework import serializers

from billing.models import CreditGrant, LedgerEntry
from billing.money import from_micros
from portal.models import ApiToken, Membership, Organization, User


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True)
    organization_name = serializers.CharField(source="organization.name", read_only=True)

    class Meta:
        model = Membership
        fields = ["organization", "organization_name", "role"]


class MeSerializer(serializers.ModelSerializer[User]):
    memberships = MembershipSerializer(many=True, read_only=True)
    verified = serializers.BooleanField(source="is_verified", read_only=True)
    token_organization = serializers.SerializerMethodField()
    token_scope = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ["id", "email", "name", "verified", "memberships", "token_organization", "token_scope"]

    def get_token_organization(self, obj: User) -> str | None:
        token = self.context["request"].auth
        return token.organization.slug if isinstance(token, ApiToken) else None

    def get_token_scope(self, obj: User) -> str | None:
        token = self.context["request"].auth
        return token.scope if isinstance(token, ApiToken) else None


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


class ApiTokenSerializer(serializers.ModelSerializer[ApiToken]):
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True)
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "display", "organization", "scope", "created_at", "last_used_at", "revoked_at"]
