"""Named refusals of the datasets services; ``DatasetError`` is the base of all of them."""

from __future__ import annotations


class DatasetError(Exception):
    """Base of every refusal raised by ``datasets.services`` (nothing was written when one is raised)."""

    code = "dataset_error"


class DatasetNotFound(DatasetError):
    """The dataset, version or upload does not exist or is not visible to the organization (answer 404)."""

    code = "not_found"


class AgreementRequired(DatasetError):
    """No current agreement covers the license version a mount needs; the message names both."""

    code = "agreement_required"


class AccessRevoked(AgreementRequired):
    """Staff revoked the organization's access to the dataset; no agreement or mount until restored."""

    code = "access_revoked"


class LicenseVersionOutdated(DatasetError):
    """An agreement was offered for a license version that is no longer the newest one."""

    code = "license_version_outdated"


class AgreementTextMismatch(DatasetError):
    """The SHA-256 of the text the user was shown is not the SHA-256 of the license version's text."""

    code = "text_mismatch"


class LicenseFeeUnpaid(DatasetError):
    """The wallet cannot cover the one-time license fee; nothing was charged and no agreement was made."""

    code = "insufficient_funds"


class DatasetUnavailable(DatasetError):
    """The version's shard folder is missing or incomplete on disk."""

    code = "unavailable"


class UploadRefused(DatasetError):
    """An upload was refused before the pipeline (too large, unknown format, missing text column)."""

    code = "upload_refused"


class InvalidTransition(DatasetError):
    """An ``Upload.status`` change that ``UPLOAD_TRANSITIONS`` does not allow."""

    code = "invalid_transition"
