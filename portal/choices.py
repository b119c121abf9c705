"""Enumerations of the portal app."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """Membership role in an organization. Owners and admins manage members and tokens; members use."""

    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    MEMBER = "member", _("Member")


MANAGER_ROLES = frozenset({Role.OWNER, Role.ADMIN})


class TokenScope(models.TextChoices):
    """API token scope: ``read`` allows safe methods only; ``write`` allows everything the user may do."""

    READ = "read", _("Read")
    WRITE = "write", _("Read and write")
