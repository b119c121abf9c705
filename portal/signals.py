"""Signal receivers of the portal app (connected in ``PortalConfig.ready``).

Only one: deactivating a user by any path (the admin's "active" checkbox, a shell, a script) revokes the
user's API tokens, as ``portal.services.user_deactivate`` does.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from portal.models import ApiToken, User
from portal.services import api_tokens_revoke_for


def revoke_tokens_of_inactive_user(sender: type[User], instance: User, **kwargs: Any) -> None:
    """``post_save`` of ``User``: an inactive user keeps no active API token (audited per token)."""
    if instance.is_active or kwargs.get("raw"):
        return
    if not ApiToken.objects.filter(user=instance, revoked_at__isnull=True).exists():
        return
    with transaction.atomic():
        api_tokens_revoke_for(user=instance, organization=None, acting_user=None, reason="user_deactivated")
