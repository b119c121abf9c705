"""Serializers of the portal API (me, tokens); the wallet's are in ``billing.api.serializers``."""

from __future__ import annotations

from rest_framework import serializers

from portal.models import ApiToken, Membership, Organization, User


class MembershipSerializer(serializers.ModelSerializer[Membership]):
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
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


class ApiTokenSerializer(serializers.ModelSerializer[ApiToken]):
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    display = serializers.CharField(source="__str__", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "display", "organization", "scope", "created_at", "last_used_at", "revoked_at"]
