"""Mounts: a consumer (a training job) reads a dataset version read-only, with an agreement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils.translation import gettext as _

from datasets.errors import (
    AccessRevoked,
    AgreementRequired,
    DatasetError,
    DatasetUnavailable,
)
from datasets.models import (
    Agreement,
    DatasetMount,
)
from datasets.selectors import (
    agreement_current,
    dataset_version_for_org,
    required_license_version,
    revocation_for,
    version_needs_agreement,
)
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User
from datasets.services.common import _require_member

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
