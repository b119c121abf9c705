"""The audit trail writer used by every service and staff action."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from portal.models import AuditEvent, Organization, User


def audit_log(
    *,
    action: str,
    actor: User | None = None,
    organization: Organization | None = None,
    obj: models.Model | None = None,
    extra: dict[str, Any] | None = None,
    staff: bool = False,
) -> AuditEvent:
    """Append one ``AuditEvent`` (who, what, when, on which object, extra JSON) and return it."""
    from portal.models import AuditEvent

    return AuditEvent.objects.create(
        action=action,
        actor=actor if actor is not None and actor.pk else None,
        organization=organization,
        object_type=obj._meta.label_lower if obj is not None else "",
        object_id=str(obj.pk) if obj is not None else "",
        extra=extra or {},
        staff=staff,
    )
