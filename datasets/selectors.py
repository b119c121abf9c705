"""Read queries of the datasets app. Every lookup a console or API view makes is scoped to an organization."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from datasets.choices import Visibility
from datasets.errors import AccessRevoked, AgreementRequired, DatasetError, DatasetNotFound, DatasetUnavailable
from datasets.models import AccessRevocation, Agreement, Dataset, DatasetMount, DatasetVersion, LicenseVersion, Upload

if TYPE_CHECKING:
    from portal.models import Organization

__all__ = [
    "DatasetNotFound",
    "agreement_current",
    "dataset_for_org",
    "dataset_version_for_org",
    "datasets_visible_to",
    "mount_refusal",
    "mounts_for_consumer",
    "upload_for_org",
    "uploads_for_org",
    "versions_mountable_by",
    "versions_visible_to",
]


def datasets_visible_to(organization: Organization) -> QuerySet[Dataset]:
    """Public datasets plus the organization's own private ones."""
    return Dataset.objects.filter(Q(visibility=Visibility.PUBLIC) | Q(publisher=organization)).select_related(
        "publisher"
    )


def dataset_for_org(organization: Organization, dataset_id: int | str) -> Dataset:
    """One visible dataset by id; raises ``DatasetNotFound`` for a missing or foreign private one."""
    try:
        return datasets_visible_to(organization).get(pk=int(dataset_id))
    except (Dataset.DoesNotExist, ValueError, TypeError):
        raise DatasetNotFound(f"dataset {dataset_id} not found") from None


def versions_visible_to(organization: Organization) -> QuerySet[DatasetVersion]:
    """Versions of the datasets ``datasets_visible_to`` the organization."""
    return DatasetVersion.objects.filter(
        Q(dataset__visibility=Visibility.PUBLIC) | Q(dataset__publisher=organization)
    ).select_related("dataset", "license_version__license")


def datasets_covered_by(organization: Organization, license_version: LicenseVersion) -> list[Dataset]:
    """Datasets visible to the organization that an agreement to ``license_version`` makes mountable (every one
    with a version under that license: agreements are per license version), by name."""
    ids = versions_visible_to(organization).filter(license_version__license_id=license_version.license_id)
    return list(Dataset.objects.filter(pk__in=ids.values("dataset_id")).order_by("name", "pk"))


def dataset_version_for_org(organization: Organization, version_id: int | str) -> DatasetVersion:
    """One version visible to the organization; raises ``DatasetNotFound`` otherwise (the API and the
    console answer 404, so a foreign private version looks exactly like a missing one)."""
    try:
        return versions_visible_to(organization).get(pk=int(version_id))
    except (DatasetVersion.DoesNotExist, ValueError, TypeError):
        raise DatasetNotFound(f"dataset version {version_id} not found") from None


def revocation_for(organization: Organization, dataset: Dataset) -> AccessRevocation | None:
    """The newest staff revocation of the organization's access to the dataset, if any."""
    return AccessRevocation.objects.filter(organization=organization, dataset=dataset).order_by("-created_at").first()


def agreement_current(
    organization: Organization, license_version: LicenseVersion, *, dataset: Dataset | None = None
) -> Agreement | None:
    """The organization's newest agreement to ``license_version`` that still holds, else None.

    It holds when it is within the license's ``term_days`` and (when ``dataset`` is given) was made after
    the latest ``AccessRevocation`` of the organization's access to that dataset.
    """
    qs = Agreement.objects.filter(organization=organization, license_version=license_version)
    if dataset is not None:
        revoked = revocation_for(organization, dataset)
        if revoked is not None:
            qs = qs.filter(accepted_at__gt=revoked.created_at)
    if license_version.term_days is not None:
        qs = qs.filter(accepted_at__gte=timezone.now() - timedelta(days=license_version.term_days))
    return qs.order_by("-accepted_at", "-id").first()


def required_license_version(version: DatasetVersion) -> LicenseVersion:
    """The license version an agreement must name before ``version`` is mounted: the newest version of the
    version's license (a new license version needs a new agreement before new mounts)."""
    current = version.license_version.license.current_version
    return current if current is not None else version.license_version


def version_needs_agreement(organization: Organization, version: DatasetVersion) -> bool:
    """False for the organization's own datasets (uploads); True for everyone else's."""
    return version.dataset.publisher_id != organization.pk


def mount_refusal(organization: Organization, version: DatasetVersion) -> tuple[Agreement | None, DatasetError | None]:
    """The one place of the rule "a mount needs an agreement" (DESIGN §4), read by ``mount_attach`` (the check)
    and :func:`versions_mountable_by` (the query): ``(agreement, refusal)``.

    A version of another publisher's dataset is mountable only while the organization holds a current
    agreement to the newest version of its license and its access was not revoked; the organization's own
    datasets need none (``agreement`` None). ``refusal`` is None when the version may be mounted, else the
    error to raise: ``AccessRevoked``, ``AgreementRequired`` (naming the dataset and license version) or
    ``DatasetUnavailable`` (shard folder incomplete).
    """
    agreement: Agreement | None = None
    if version_needs_agreement(organization, version):
        if revocation_for(organization, version.dataset) is not None:
            return None, AccessRevoked(
                _("Access of %(org)s to %(dataset)s was revoked by the platform; contact support.")
                % {"org": organization.name, "dataset": version.dataset.name}
            )
        lv = required_license_version(version)
        agreement = agreement_current(organization, lv)  # no revocation: nothing to filter by
        if agreement is None:
            return None, AgreementRequired(
                _("%(dataset)s needs an agreement to %(license)s version %(number)s before it can be mounted.")
                % {"dataset": version.dataset.name, "license": lv.license.name, "number": lv.number}
            )
    if not version.shards_ready:
        return agreement, DatasetUnavailable(f"the shard folder of {version} is not complete")
    return agreement, None


def versions_mountable_by(organization: Organization) -> QuerySet[DatasetVersion]:
    """Versions the organization may mount now: visible, shard folder complete (``index.json`` present),
    and either its own dataset or covered by a current agreement to the license's newest version
    (:func:`mount_refusal`).

    Evaluated in Python over the visible versions (a catalog is small), returned as a queryset ordered by
    dataset name then newest version first.
    """
    ok = [
        version.pk
        for version in versions_visible_to(organization)
        if version.shards_ready and mount_refusal(organization, version)[1] is None  # cheap test first
    ]
    return (
        DatasetVersion.objects.filter(pk__in=ok)
        .select_related("dataset", "license_version__license")
        .order_by("dataset__name", "-number")
    )


def mounts_for_consumer(consumer: str) -> QuerySet[DatasetMount]:
    """Every mount recorded for a consumer such as ``"instances.trainingjob:42"`` (lineage), oldest first."""
    return (
        DatasetMount.objects.filter(consumer=consumer)
        .select_related("version__dataset", "version__license_version__license", "agreement")
        .order_by("created_at", "id")
    )


def uploads_for_org(organization: Organization) -> QuerySet[Upload]:
    return Upload.objects.filter(organization=organization).select_related("dataset_version").order_by("-id")


def upload_for_org(organization: Organization, upload_id: int | str) -> Upload:
    """One upload of the organization; raises ``DatasetNotFound`` for a missing or foreign one."""
    try:
        return uploads_for_org(organization).get(pk=int(upload_id))
    except (Upload.DoesNotExist, ValueError, TypeError):
        raise DatasetNotFound(f"upload {upload_id} not found") from None
