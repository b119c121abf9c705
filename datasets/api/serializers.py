"""Serializers of the datasets API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework import serializers

from datasets.choices import Domain, UploadFormat
from datasets.models import Agreement, Dataset, DatasetMount, DatasetVersion, LicenseVersion, Upload

if TYPE_CHECKING:
    from portal.models import Organization


class LicenseVersionSerializer(serializers.ModelSerializer[LicenseVersion]):
    license = serializers.CharField(source="license.slug", read_only=True)
    license_name = serializers.CharField(source="license.name", read_only=True)

    class Meta:
        model = LicenseVersion
        fields = [
            "id",
            "license",
            "license_name",
            "number",
            "text_sha256",
            "commercial_use",
            "redistribution",
            "derivative_models",
            "attribution_text",
            "field_of_use",
            "term_days",
            "price_micros",
            "created_at",
        ]


class LicenseVersionTextSerializer(LicenseVersionSerializer):
    class Meta(LicenseVersionSerializer.Meta):
        fields = [*LicenseVersionSerializer.Meta.fields, "text"]


class DatasetVersionSerializer(serializers.ModelSerializer[DatasetVersion]):
    license_version = LicenseVersionSerializer(read_only=True)
    dataset = serializers.IntegerField(source="dataset_id", read_only=True)

    class Meta:
        model = DatasetVersion
        fields = [
            "id",
            "dataset",
            "number",
            "documents",
            "bytes",
            "characters",
            "tokens",
            "language",
            "deid_status",
            "deid_report",
            "manifest",
            "license_version",
            "created_at",
        ]


class DatasetSerializer(serializers.ModelSerializer[Dataset]):
    publisher = serializers.CharField(source="publisher_name", read_only=True)
    latest_version = serializers.SerializerMethodField()

    class Meta:
        model = Dataset
        fields = [
            "id",
            "slug",
            "name",
            "domain",
            "description",
            "publisher",
            "visibility",
            "attribution",
            "source_url",
            "preparing",
            "latest_version",
            "created_at",
        ]

    def get_latest_version(self, obj: Dataset) -> dict[str, Any] | None:
        versions = list(obj.versions.all())  # prefetched
        if not versions:
            return None
        newest = max(versions, key=lambda v: v.number)
        return DatasetVersionSerializer(newest).data


class AgreementSerializer(serializers.ModelSerializer[Agreement]):
    user = serializers.EmailField(source="user.email", read_only=True)
    organization: serializers.SlugRelatedField[Organization] = serializers.SlugRelatedField(
        slug_field="slug", read_only=True
    )
    license_version = serializers.IntegerField(source="license_version_id", read_only=True)

    class Meta:
        model = Agreement
        fields = [
            "id",
            "organization",
            "user",
            "license_version",
            "dataset",
            "text_sha256",
            "accepted_at",
            "ip",
            "user_agent",
            "charge_transaction_id",
        ]


class AgreementCreateSerializer(serializers.Serializer[Any]):
    license_version = serializers.IntegerField(required=False, help_text="defaults to the license's newest version")
    text_sha256 = serializers.RegexField(r"^[0-9a-fA-F]{64}$", help_text="SHA-256 of the exact text you were shown")


class MountSerializer(serializers.ModelSerializer[DatasetMount]):
    shard_dir = serializers.SerializerMethodField()

    class Meta:
        model = DatasetMount
        fields = ["id", "version", "consumer", "agreement", "created_at", "shard_dir"]

    def get_shard_dir(self, obj: DatasetMount) -> str:
        return str(obj.shard_dir)


class MountCreateSerializer(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    consumer = serializers.CharField(max_length=200)


class UploadSerializer(serializers.ModelSerializer[Upload]):
    class Meta:
        model = Upload
        fields = [
            "id",
            "name",
            "format",
            "text_column",
            "domain",
            "original_filename",
            "size_bytes",
            "keep_original",
            "status",
            "stage",
            "percent",
            "error",
            "report",
            "dataset_version",
            "created_at",
            "updated_at",
        ]


class UploadCreateSerializer(serializers.Serializer[Any]):
    file = serializers.FileField()
    name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    format = serializers.ChoiceField(choices=UploadFormat.choices)
    text_column = serializers.CharField(max_length=100, required=False, allow_blank=True)
    keep_original = serializers.BooleanField(required=False, default=False)
    domain = serializers.ChoiceField(choices=Domain.choices, required=False, default=Domain.OTHER)
