"""Accounts, organizations, memberships, API tokens, trial claims and the audit trail."""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from portal.choices import Role, TokenScope


class UserManager(BaseUserManager["User"]):
    """Creates users with the e-mail address as the login name."""

    use_in_migrations = True

    def _create(self, email: str, password: str | None, **extra: Any) -> User:
        if not email:
            raise ValueError("an e-mail address is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create(email, password, **extra)

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.update(is_staff=True, is_superuser=True, email_verified_at=timezone.now())
        return self._create(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A person who logs in with an e-mail address (stored lower-case, unique)."""

    email = models.EmailField(_("e-mail address"), unique=True)
    name = models.CharField(_("name"), max_length=150, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)
    email_verified_at = models.DateTimeField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="Asia/Shanghai")

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    class Meta:
        verbose_name = _("user")
        verbose_name_plural = _("users")

    def __str__(self) -> str:
        return self.email

    @property
    def is_verified(self) -> bool:
        return self.email_verified_at is not None


class Organization(models.Model):
    """A team that shares one wallet. Every user gets a personal organization at signup."""

    name = models.CharField(_("name"), max_length=150)
    slug = models.SlugField(max_length=60, unique=True)
    personal = models.BooleanField(default=False)
    app_monthly_cap_micros = models.BigIntegerField(
        _("monthly cap on app calls"),
        null=True,
        blank=True,
        help_text="micro-CNY per calendar month; empty = the platform default (APP_MONTHLY_CAP_CNY)",
    )
    idle_autostop_minutes = models.PositiveIntegerField(
        _("idle autostop (minutes)"),
        null=True,
        blank=True,
        help_text="default for new interactive instances: stop after this many idle minutes; empty or 0 = off",
    )
    members_enter_any_instance = models.BooleanField(
        _("members may enter each other's instances"),
        default=False,
        help_text="off: only the launcher, owners, admins and those it is shared with enter an instance "
        "(JupyterLab, SSH) or attach a volume; on: every member who may launch (instances.interactive.access)",
    )
    created_at = models.DateTimeField(default=timezone.now)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="organizations")

    class Meta:
        verbose_name = _("organization")
        verbose_name_plural = _("organizations")

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's role in an organization; one row per (organization, user)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "user"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


class TrialClaim(models.Model):
    """One row per e-mail address that ever received trial credit.

    Survives the deletion of the user (no foreign key), so a deleted and re-created account with the
    same address gets no second grant. The unique constraint makes concurrent claims safe.
    """

    email = models.EmailField(unique=True)
    organization = models.ForeignKey(Organization, null=True, on_delete=models.SET_NULL)
    claimed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.email


class ApiToken(models.Model):
    """A personal API token acting for one organization.

    The secret is shown once at creation; only its SHA-256 is stored (tokens carry 256 bits of
    randomness, so a fast hash is sufficient, as GitHub and Stripe do). ``prefix`` is the public,
    indexed part used for lookup and display: the full token reads ``gpp_<prefix>_<secret>``.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(_("name"), max_length=100)
    prefix = models.CharField(max_length=12, unique=True)
    secret_sha256 = models.CharField(max_length=64)
    scope = models.CharField(max_length=10, choices=TokenScope.choices, default=TokenScope.READ)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    #: The user's current role in ``organization``, set by ``api_token_authenticate`` (not stored).
    role: str | None = None

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} (gpp_{self.prefix}_…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """Append-only record of who did what: every service that changes state and every staff action."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    organization = models.ForeignKey(Organization, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=80)  # indexed in Meta: equality only (no LIKE pattern index)
    object_type = models.CharField(max_length=80, blank=True)
    object_id = models.CharField(max_length=64, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    staff = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        # Audit rows are written by every service (one per instance a scheduling pass moves): each index
        # costs every write. ``action`` is looked up by equality only (the admin's search is icontains,
        # which no b-tree serves), so it has no ``varchar_pattern_ops`` twin as ``db_index=True`` makes.
        indexes = [models.Index(fields=["action"], name="portal_audi_action_idx")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.action}"


from portal.sshkeys import SshKey  # noqa: E402,F401 - users' SSH public keys
