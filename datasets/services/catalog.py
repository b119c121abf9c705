"""Catalog entries: license versions, datasets and dataset versions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import transaction

from datasets.choices import DeidStatus, Domain, Visibility
from datasets.errors import DatasetError
from datasets.models import Dataset, DatasetVersion, License, LicenseVersion
from datasets.services.common import text_sha256
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User


def license_version_create(
    *,
    slug: str,
    name: str,
    text: str,
    commercial_use: bool,
    redistribution: bool,
    derivative_models: bool,
    attribution_text: str = "",
    field_of_use: str = "",
    term_days: int | None = None,
    price_micros: int = 0,
    acting_user: User | None = None,
) -> LicenseVersion:
    """Publish a new version of the license ``slug`` (created on first use), numbered 1, 2, …

    A version whose text and terms equal the newest one's is not duplicated: the newest is returned, so
    importing twice creates nothing. ``price_micros``: one-time fee per organization in micro-CNY (0 = free).
    """
    if price_micros < 0:
        raise DatasetError("a license price cannot be negative")
    terms: dict[str, Any] = {
        "commercial_use": commercial_use,
        "redistribution": redistribution,
        "derivative_models": derivative_models,
        "attribution_text": attribution_text,
        "field_of_use": field_of_use,
        "term_days": term_days,
        "price_micros": price_micros,
    }
    with transaction.atomic():
        lic, _created = License.objects.get_or_create(slug=slug, defaults={"name": name})
        current = lic.versions.select_for_update().order_by("-number").first()
        digest = text_sha256(text)
        if (
            current is not None
            and current.text_sha256 == digest
            and all(getattr(current, k) == v for k, v in terms.items())
        ):
            return current
        lv = LicenseVersion.objects.create(
            license=lic,
            number=(current.number + 1) if current else 1,
            text=text,
            text_sha256=digest,
            **terms,
        )
        audit_log(
            action="datasets.license_version_create",
            actor=acting_user,
            obj=lv,
            extra={"license": slug, "number": lv.number, "text_sha256": digest},
            staff=acting_user is not None,
        )
    return lv


def dataset_create(
    *,
    slug: str,
    name: str,
    domain: Domain | str,
    description: str = "",
    publisher: Organization | None = None,
    visibility: Visibility | str = Visibility.PUBLIC,
    attribution: str = "",
    source_url: str = "",
    acting_user: User | None = None,
) -> Dataset:
    """Create a catalog entry; ``publisher`` None means the platform. Returns the existing dataset when
    ``slug`` is taken (idempotent import)."""
    with transaction.atomic():
        dataset, created = Dataset.objects.get_or_create(
            slug=slug,
            defaults={
                "name": name,
                "domain": domain,
                "description": description,
                "publisher": publisher,
                "visibility": visibility,
                "attribution": attribution,
                "source_url": source_url,
            },
        )
        if created:
            audit_log(
                action="datasets.dataset_create",
                actor=acting_user,
                organization=publisher,
                obj=dataset,
                extra={"slug": slug, "visibility": str(visibility)},
            )
    return dataset


def dataset_version_create(
    *,
    dataset: Dataset,
    license_version: LicenseVersion,
    statistics: dict[str, Any],
    deid_report: dict[str, Any],
    deid_status: DeidStatus | str,
    shard_dir: str,
    tokenizer_path: str,
    source_files: list[dict[str, Any]],
    sample: str = "",
    pipeline: dict[str, Any] | None = None,
    acting_user: User | None = None,
) -> DatasetVersion:
    """Record a finished pipeline run as the dataset's next (immutable) version.

    ``statistics`` is the pipeline's ``statistics`` report (exact counts and the shard-folder manifest);
    ``shard_dir``/``tokenizer_path`` are relative to ``settings.DATA_DIR``; ``source_files`` lists
    ``{"file", "bytes", "sha256"}`` of the inputs; ``pipeline`` (optional) is stored in the manifest as
    ``{"source_documents", "duplicates_removed", "empty_documents"}`` from the validate/deduplicate reports.
    A version with the same source SHA-256s and license version as the newest one is not duplicated: the
    newest is returned.
    """
    with transaction.atomic():
        Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
        newest = dataset.versions.order_by("-number").first()
        if (
            newest is not None
            and newest.license_version_id == license_version.pk
            and newest.manifest.get("source_files") == source_files
        ):
            return newest
        version = DatasetVersion.objects.create(
            dataset=dataset,
            number=(newest.number + 1) if newest else 1,
            license_version=license_version,
            manifest={"source_files": source_files, "files": statistics.get("files", []), **(pipeline or {})},
            documents=statistics["documents"],
            bytes=statistics["bytes"],
            characters=statistics["characters"],
            tokens=statistics["tokens"],
            language=statistics.get("language", ""),
            deid_status=deid_status,
            deid_report=deid_report,
            sample=sample,
            shard_dir=shard_dir,
            tokenizer_path=tokenizer_path,
        )
        audit_log(
            action="datasets.version_create",
            actor=acting_user,
            organization=dataset.publisher,
            obj=version,
            extra={
                "dataset": dataset.slug,
                "number": version.number,
                "documents": version.documents,
                "tokens": version.tokens,
            },
        )
    return version
