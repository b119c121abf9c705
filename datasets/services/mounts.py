"""Mounts: a consumer (a training job) reads a dataset version read-only, with an agreement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from datasets.errors import DatasetError
from datasets.models import DatasetMount
from datasets.selectors import dataset_version_for_org, mount_refusal
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User
from datasets.services.common import _require_member


def mount_attach(*, organization: Organization, user: User | None, version_id: int, consumer: str) -> DatasetMount:
    """Record that ``consumer`` (an opaque string such as ``"instances.trainingjob:42"``) reads dataset
    version ``version_id`` read-only on behalf of ``organization``; returns the ``DatasetMount``
    (``mount.shard_dir`` is the shard folder, ``mount.version`` the version).

    Rule (DESIGN §4, in one place: ``datasets.selectors.mount_refusal``): a version of another publisher's
    dataset is mountable only while the organization holds a current agreement to the newest version of its
    license; the organization's own datasets need none. Raises ``DatasetNotFound`` (version not visible, or
    ``user`` not a member), ``AgreementRequired`` (message names the dataset and license version) or its
    subclass ``AccessRevoked``, and ``DatasetUnavailable`` (shard folder incomplete) — all subclasses of
    ``DatasetError``.
    """
    if not consumer or len(consumer) > 200:
        raise DatasetError("consumer must be 1 to 200 characters")
    _require_member(organization, user)
    version = dataset_version_for_org(organization, version_id)
    agreement, refusal = mount_refusal(organization, version)
    if refusal is not None:
        raise refusal
    with transaction.atomic():
        mount = DatasetMount.objects.create(
            organization=organization, user=user, version=version, agreement=agreement, consumer=consumer
        )
        audit_log(
            action="datasets.mount_attach",
            actor=user,
            organization=organization,
            obj=mount,
            extra={
                "version": version.pk,
                "dataset": version.dataset.slug,
                "consumer": consumer,
                "agreement": agreement.pk if agreement else None,
            },
        )
    return mount
