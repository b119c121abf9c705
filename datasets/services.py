"""Operations of the datasets app: catalog entries, agreements, access revocation, mounts and uploads.

Each service is a typed keyword-only function that runs in one transaction, writes an audit row and
returns the object. Refusals are the named errors of ``datasets.errors`` (re-exported here), raised before
anything is written.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils.translation import gettext as _

from billing.choices import TransactionKind
from billing.money import format_cny
from billing.services import InsufficientFunds, wallet_spend
from datasets.choices import DeidStatus, Domain, Visibility
from datasets.errors import (
    AccessRevoked,
    AgreementRequired,
    AgreementTextMismatch,
    DatasetError,
    DatasetNotFound,
    DatasetUnavailable,
    InvalidTransition,
    LicenseFeeUnpaid,
    LicenseVersionOutdated,
    UploadRefused,
)
from datasets.models import AccessRevocation, Agreement, Dataset, DatasetMount, DatasetVersion, License, LicenseVersion
from datasets.selectors import (
    agreement_current,
    dataset_version_for_org,
    required_license_version,
    revocation_for,
    version_needs_agreement,
    versions_visible_to,
)
from portal.audit import audit_log
from portal.selectors import membership_of

if TYPE_CHECKING:
    from portal.models import Organization, User

__all__ = [
    "AccessRevoked",
    "AgreementRequired",
    "AgreementTextMismatch",
    "DatasetError",
    "DatasetNotFound",
    "DatasetUnavailable",
    "InvalidTransition",
    "LicenseFeeUnpaid",
    "LicenseVersionOutdated",
    "UploadRefused",
    "access_revoke",
    "agreement_accept",
    "dataset_create",
    "dataset_version_create",
    "license_version_create",
    "mount_attach",
    "text_sha256",
]


def text_sha256(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``text``: the hash an agreement records of the text shown."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require_member(organization: Organization, user: User | None) -> None:
    if user is not None and membership_of(user=user, organization=organization) is None:
        raise DatasetNotFound("not a member of this organization")


# --- catalog ---------------------------------------------------------------------------------------------


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
        if current is not None and current.text_sha256 == digest and all(
            getattr(current, k) == v for k, v in terms.items()
        ):
            return current
        lv = LicenseVersion.objects.create(
            license=lic,
            number=(current.number + 1) if current else 1,
            text=text,
            text_sha256=digest,
            **terms,
        )
        audit_log(action="datasets.license_version_create", actor=acting_user, obj=lv,
                  extra={"license": slug, "number": lv.number, "text_sha256": digest}, staff=acting_user is not None)
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
            audit_log(action="datasets.dataset_create", actor=acting_user, organization=publisher, obj=dataset,
                      extra={"slug": slug, "visibility": str(visibility)})
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
    acting_user: User | None = None,
) -> DatasetVersion:
    """Record a finished pipeline run as the dataset's next (immutable) version.

    ``statistics`` is the pipeline's ``statistics`` report (exact counts and the shard-folder manifest);
    ``shard_dir``/``tokenizer_path`` are relative to ``settings.DATA_DIR``; ``source_files`` lists
    ``{"file", "bytes", "sha256"}`` of the inputs. A version with the same source SHA-256s and license
    version as the newest one is not duplicated: the newest is returned.
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
            manifest={"source_files": source_files, "files": statistics.get("files", [])},
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
        audit_log(action="datasets.version_create", actor=acting_user, organization=dataset.publisher, obj=version,
                  extra={"dataset": dataset.slug, "number": version.number, "documents": version.documents,
                         "tokens": version.tokens})
    return version


# --- agreements ------------------------------------------------------------------------------------------


def agreement_accept(
    *,
    organization: Organization,
    user: User,
    license_version: LicenseVersion,
    shown_text_sha256: str,
    ip: str | None,
    user_agent: str,
    dataset: Dataset | None = None,
) -> Agreement:
    """``user`` accepts ``license_version`` on behalf of ``organization``; returns the new ``Agreement``.

    Records organization, user, license version, the SHA-256 of the exact text shown, the time, IP and user
    agent (truncated to 500 characters). A paid license posts its fee once per (organization, license
    version) through ``billing.services.wallet_spend`` (kind ``LICENSE_FEE``, idempotency key
    ``license:<org id>:<license version id>``): accepting again records a new agreement and charges nothing.

    Raises (nothing written): ``DatasetNotFound`` (not a member, or no dataset visible to the organization
    uses this license), ``LicenseVersionOutdated`` (a newer version exists), ``AgreementTextMismatch`` (the
    hash is not that of the version's text), ``AccessRevoked`` (staff revoked access to ``dataset``),
    ``LicenseFeeUnpaid`` (the wallet cannot cover the fee).
    """
    _require_member(organization, user)
    visible = versions_visible_to(organization).filter(license_version__license=license_version.license)
    if dataset is not None:
        visible = visible.filter(dataset=dataset)
    if not visible.exists():
        raise DatasetNotFound("no dataset visible to this organization uses this license")
    newest = license_version.license.current_version
    if newest is not None and newest.pk != license_version.pk:
        raise LicenseVersionOutdated(
            _("%(license)s version %(old)s has been replaced by version %(new)s; review and accept the new text.")
            % {"license": license_version.license.name, "old": license_version.number, "new": newest.number}
        )
    if shown_text_sha256.strip().lower() != license_version.text_sha256:
        raise AgreementTextMismatch(
            _("The text you accepted is not the current text of %(license)s; reload it and accept again.")
            % {"license": str(license_version)}
        )
    if dataset is not None and revocation_for(organization, dataset) is not None:
        raise AccessRevoked(
            _("Access of %(org)s to %(dataset)s was revoked by the platform; contact support.")
            % {"org": organization.name, "dataset": dataset.name}
        )
    with transaction.atomic():
        charge_id: int | None = None
        if license_version.price_micros > 0:
            try:
                tx = wallet_spend(
                    organization=organization,
                    amount_micros=license_version.price_micros,
                    idempotency_key=f"license:{organization.pk}:{license_version.pk}",
                    kind=TransactionKind.LICENSE_FEE,
                    memo=f"License fee: {license_version}",
                    created_by=user,
                    metadata={"license_version": license_version.pk},
                )
            except InsufficientFunds as exc:
                raise LicenseFeeUnpaid(
                    _("The license fee of %(fee)s CNY for %(license)s cannot be paid: the wallet holds "
                      "%(available)s CNY. Top up the wallet, then accept again. Nothing was charged.")
                    % {"fee": format_cny(license_version.price_micros), "license": str(license_version),
                       "available": format_cny(exc.available_micros)}
                ) from exc
            charge_id = tx.pk
        agreement = Agreement.objects.create(
            organization=organization,
            user=user,
            license_version=license_version,
            dataset=dataset,
            text_sha256=license_version.text_sha256,
            ip=ip or None,
            user_agent=(user_agent or "")[:500],
            charge_transaction_id=charge_id,
        )
        audit_log(action="datasets.agreement_accept", actor=user, organization=organization, obj=agreement,
                  extra={"license_version": license_version.pk, "text_sha256": agreement.text_sha256,
                         "ip": ip, "charge_transaction": charge_id})
    return agreement


def access_revoke(
    *, organization: Organization, dataset: Dataset, reason: str, acting_user: User | None
) -> AccessRevocation:
    """Staff withdraw ``organization``'s access to ``dataset``: recorded as its own row and audited.

    Existing agreements stay as they were (evidence) but no longer count; new mounts are refused with
    ``AccessRevoked``. Mounts already running are not touched here. Raises ``DatasetError`` without a reason.
    """
    if not reason.strip():
        raise DatasetError("a revocation needs a reason")
    with transaction.atomic():
        revocation = AccessRevocation.objects.create(
            organization=organization, dataset=dataset, reason=reason.strip(), revoked_by=acting_user
        )
        audit_log(action="datasets.access_revoke", actor=acting_user, organization=organization, obj=revocation,
                  extra={"dataset": dataset.slug, "reason": reason.strip()}, staff=True)
    return revocation


# --- mounts ----------------------------------------------------------------------------------------------


def mount_attach(*, organization: Organization, user: User | None, version_id: int, consumer: str) -> DatasetMount:
    """Record that ``consumer`` (an opaque string such as ``"instances.trainingjob:42"``) reads dataset
    version ``version_id`` read-only on behalf of ``organization``; returns the ``DatasetMount``
    (``mount.shard_dir`` is the shard folder, ``mount.version`` the version).

    Rule (DESIGN §4): a version of another publisher's dataset is mountable only while the organization
    holds a current agreement to the newest version of its license; the organization's own datasets need
    none. Raises ``DatasetNotFound`` (version not visible, or ``user`` not a member), ``AgreementRequired``
    (message names the dataset and license version) or its subclass ``AccessRevoked``, and
    ``DatasetUnavailable`` (shard folder incomplete) — all subclasses of ``DatasetError``.
    """
    if not consumer or len(consumer) > 200:
        raise DatasetError("consumer must be 1 to 200 characters")
    _require_member(organization, user)
    version = dataset_version_for_org(organization, version_id)
    agreement: Agreement | None = None
    if version_needs_agreement(organization, version):
        if revocation_for(organization, version.dataset) is not None:
            raise AccessRevoked(
                _("Access of %(org)s to %(dataset)s was revoked by the platform; contact support.")
                % {"org": organization.name, "dataset": version.dataset.name}
            )
        lv = required_license_version(version)
        agreement = agreement_current(organization, lv, dataset=version.dataset)
        if agreement is None:
            raise AgreementRequired(
                _("%(dataset)s needs an agreement to %(license)s version %(number)s before it can be mounted.")
                % {"dataset": version.dataset.name, "license": lv.license.name, "number": lv.number}
            )
    if not version.shards_ready:
        raise DatasetUnavailable(f"the shard folder of {version} is not complete")
    with transaction.atomic():
        mount = DatasetMount.objects.create(
            organization=organization, user=user, version=version, agreement=agreement, consumer=consumer
        )
        audit_log(action="datasets.mount_attach", actor=user, organization=organization, obj=mount,
                  extra={"version": version.pk, "dataset": version.dataset.slug, "consumer": consumer,
                         "agreement": agreement.pk if agreement else None})
    return mount
