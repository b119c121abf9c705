"""Operations of the datasets app: catalog entries, agreements, access revocation, mounts and uploads — one
module per operation, re-exported here so callers read ``from datasets.services import agreement_accept``.

Each service is a typed keyword-only function that runs in one transaction, writes an audit row and
returns the object. Refusals are the named errors of ``datasets.errors`` (re-exported here), raised before
anything is written.

Where each operation lives: ``catalog`` (license versions, datasets, versions), ``agreements`` (accept,
revoke access), ``mounts`` (``mount_attach``), ``corpus`` (``corpus_import`` of a public corpus file),
``uploads`` (the upload pipeline, one Celery task per stage).
"""

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
from datasets.services.agreements import access_revoke, agreement_accept, agreement_accept_once
from datasets.services.catalog import dataset_create, dataset_version_create, license_version_create
from datasets.services.common import text_sha256
from datasets.services.corpus import STAGE_WEIGHTS, corpus_import, pipeline_percent
from datasets.services.mounts import mount_attach
from datasets.services.uploads import (
    OWN_DATA_LICENSE_TEXT,
    UPLOAD_STAGES,
    upload_create,
    upload_retry,
    upload_run_stage,
    upload_transition,
)

__all__ = [
    "OWN_DATA_LICENSE_TEXT",
    "STAGE_WEIGHTS",
    "UPLOAD_STAGES",
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
    "agreement_accept_once",
    "corpus_import",
    "dataset_create",
    "dataset_version_create",
    "license_version_create",
    "mount_attach",
    "pipeline_percent",
    "text_sha256",
    "upload_create",
    "upload_retry",
    "upload_run_stage",
    "upload_transition",
]
