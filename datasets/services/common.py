"""Helpers every datasets operation shares: the agreement text hash and the membership check."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from datasets.errors import DatasetNotFound
from portal.selectors import membership_of

if TYPE_CHECKING:
    from portal.models import Organization, User


def text_sha256(text: str) -> str:
    """Hex SHA-256 of the UTF-8 bytes of ``text``: the hash an agreement records of the text shown."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _require_member(organization: Organization, user: User | None) -> None:
    if user is not None and membership_of(user=user, organization=organization) is None:
        raise DatasetNotFound("not a member of this organization")
