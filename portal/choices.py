"""Enumerations of the portal app."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """Membership role in an organization; what each may do is the table in ``portal.permissions``.

    Owners and admins manage members, write tokens, apps and caps; members launch and use; billing viewers
    read and top up the wallet.
    """

    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    MEMBER = "member", _("Member")
    BILLING = "billing", _("Billing viewer")


MANAGER_ROLES = frozenset({Role.OWNER, Role.ADMIN})


class TokenScope(models.TextChoices):
    """API token scope: ``read`` allows safe methods only; ``write`` allows everything the user may do."""

    READ = "read", _("Read")
    WRITE = "write", _("Read and write")
