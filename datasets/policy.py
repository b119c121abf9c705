"""An organization's de-identification policy: read it as ``DeidOptions`` for the pipeline, change it
(managers only, audited). Kept apart from ``services.py`` so the pipeline and the console share it."""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from datasets.choices import PlaceholderStyle
from datasets.deid import DeidOptions
from datasets.errors import DatasetError, DatasetNotFound
from datasets.models import DeidPolicy
from portal.audit import audit_log
from portal.choices import MANAGER_ROLES
from portal.selectors import membership_of

if TYPE_CHECKING:
    from portal.models import Organization, User

MAX_ALLOW_ENTRIES = 200
MAX_ALLOW_ENTRY_CHARS = 120


class PolicyRefused(DatasetError):
    """A de-identification policy change that is not allowed (not a manager, bad allow-list)."""


def deid_hash_key(organization: Organization) -> bytes:
    """The per-organization key of the ``hash`` placeholder style: HMAC-SHA256(SECRET_KEY, org id), so
    hashes are stable within an organization and not comparable across organizations."""
    return hmac.new(settings.SECRET_KEY.encode(), f"deid:{organization.pk}".encode(), hashlib.sha256).digest()


def deid_options_for(organization: Organization) -> DeidOptions:
    """The organization's ``DeidOptions`` (defaults when it has no policy row)."""
    policy = DeidPolicy.objects.filter(organization=organization).first()
    if policy is None:
        return DeidOptions()
    return DeidOptions.build(
        style=policy.placeholder_style, allow=policy.allow_entries, hash_key=deid_hash_key(organization)
    )


def deid_policy_update(
    *, organization: Organization, user: User, placeholder_style: PlaceholderStyle | str, allow_list: str
) -> DeidPolicy:
    """Set the organization's placeholder style and allow-list (one value per line); applies to uploads
    processed from now on. Raises ``DatasetNotFound`` for a non-member, ``PolicyRefused`` for a member who
    is not an owner/admin, an unknown style, more than ``MAX_ALLOW_ENTRIES`` lines or a line longer than
    ``MAX_ALLOW_ENTRY_CHARS`` characters (nothing written)."""
    membership = membership_of(organization=organization, user=user)
    if membership is None:
        raise DatasetNotFound("not found")
    if membership.role not in MANAGER_ROLES:
        raise PolicyRefused(_("Only owners and admins can change the de-identification settings."))
    if placeholder_style not in PlaceholderStyle.values:
        raise PolicyRefused(_("Unknown placeholder style %(style)s.") % {"style": placeholder_style})
    entries = [line.strip() for line in allow_list.splitlines() if line.strip()]
    if len(entries) > MAX_ALLOW_ENTRIES:
        raise PolicyRefused(_("At most %(n)d allow-list entries.") % {"n": MAX_ALLOW_ENTRIES})
    if any(len(e) > MAX_ALLOW_ENTRY_CHARS for e in entries):
        raise PolicyRefused(_("An allow-list entry is longer than %(n)d characters.") % {"n": MAX_ALLOW_ENTRY_CHARS})
    with transaction.atomic():
        policy, _created = DeidPolicy.objects.update_or_create(
            organization=organization,
            defaults={
                "placeholder_style": placeholder_style,
                "allow_list": "\n".join(entries),
                "updated_at": timezone.now(),
                "updated_by": user,
            },
        )
        audit_log(
            action="datasets.deid_policy_update",
            actor=user,
            organization=organization,
            obj=policy,
            extra={"placeholder_style": str(placeholder_style), "allow_entries": len(entries)},
        )
    return policy
