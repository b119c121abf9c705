"""Agreements (a signed license version, paid once per organization) and access revocation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils.translation import gettext as _

from billing.choices import TransactionKind
from billing.memos import memo
from billing.money import format_cny
from billing.services import InsufficientFunds, wallet_spend
from datasets.errors import (
    AccessRevoked,
    AgreementTextMismatch,
    DatasetError,
    DatasetNotFound,
    LicenseFeeUnpaid,
    LicenseVersionOutdated,
)
from datasets.models import AccessRevocation, Agreement, Dataset, LicenseVersion
from datasets.selectors import agreement_current, revocation_for, versions_visible_to
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User
from datasets.services.common import _require_member
from portal.permissions import Action, authorize


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
    """:func:`agreement_accept_once` without the ``created`` flag (same arguments, same errors)."""
    return agreement_accept_once(
        organization=organization,
        user=user,
        license_version=license_version,
        shown_text_sha256=shown_text_sha256,
        ip=ip,
        user_agent=user_agent,
        dataset=dataset,
    )[0]


def agreement_accept_once(
    *,
    organization: Organization,
    user: User,
    license_version: LicenseVersion,
    shown_text_sha256: str,
    ip: str | None,
    user_agent: str,
    dataset: Dataset | None = None,
) -> tuple[Agreement, bool]:
    """``user`` accepts ``license_version`` on behalf of ``organization``; returns ``(agreement, created)``.

    While an agreement to the version still holds (``selectors.agreement_current``, for ``dataset`` when
    given) a second acceptance — a double click, a teammate, a retried request — records nothing and
    returns that agreement with ``created`` False: one agreement, no second fee. The organization's row is
    locked for the check, so two concurrent acceptances make one agreement.

    Records organization, user, license version, the SHA-256 of the exact text shown, the time, IP and user
    agent (truncated to 500 characters). A paid license posts its fee once per (organization, license
    version) through ``billing.services.wallet_spend`` (kind ``LICENSE_FEE``, idempotency key
    ``license:<org id>:<license version id>``): accepting again after a lapse charges nothing.

    Raises (nothing written): ``DatasetNotFound`` (not a member, or no dataset visible to the organization
    uses this license), ``LicenseVersionOutdated`` (a newer version exists), ``AgreementTextMismatch`` (the
    hash is not that of the version's text), ``AccessRevoked`` (staff revoked access to ``dataset``),
    ``LicenseFeeUnpaid`` (the wallet cannot cover the fee).
    """
    _require_member(organization, user)
    authorize(user=user, organization=organization, action=Action.DATASETS_LICENSE)
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
        from portal.models import Organization as OrganizationModel

        OrganizationModel.objects.select_for_update().filter(pk=organization.pk).first()  # serializes acceptances
        existing = agreement_current(organization, license_version, dataset=dataset)
        if existing is not None:
            return existing, False
        charge_id: int | None = None
        if license_version.price_micros > 0:
            try:
                tx = wallet_spend(
                    organization=organization,
                    amount_micros=license_version.price_micros,
                    idempotency_key=f"license:{organization.pk}:{license_version.pk}",
                    kind=TransactionKind.LICENSE_FEE,
                    memo=memo("license_fee", name=str(license_version)),
                    created_by=user,
                    metadata={"license_version": license_version.pk},
                )
            except InsufficientFunds as exc:
                raise LicenseFeeUnpaid(
                    _(
                        "The license fee of %(fee)s CNY for %(license)s cannot be paid: the wallet holds "
                        "%(available)s CNY. Top up the wallet, then accept again. Nothing was charged."
                    )
                    % {
                        "fee": format_cny(license_version.price_micros),
                        "license": str(license_version),
                        "available": format_cny(exc.available_micros),
                    }
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
        audit_log(
            action="datasets.agreement_accept",
            actor=user,
            organization=organization,
            obj=agreement,
            extra={
                "license_version": license_version.pk,
                "text_sha256": agreement.text_sha256,
                "ip": ip,
                "charge_transaction": charge_id,
            },
        )
    return agreement, True


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
        audit_log(
            action="datasets.access_revoke",
            actor=acting_user,
            organization=organization,
            obj=revocation,
            extra={"dataset": dataset.slug, "reason": reason.strip()},
            staff=True,
        )
    return revocation
