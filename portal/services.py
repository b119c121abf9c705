"""Account, organization and API-token operations. Views, the API and admin call these."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import OuterRef, Subquery
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from portal import hooks
from portal.audit import audit_log
from portal.choices import Role, TokenScope
from portal.lib.slugs import ascii_slug
from portal.models import ApiToken, Membership, Organization, TrialClaim, User
from portal.permissions import Action, PermissionRefused, authorize, role_allows
from portal.selectors import personal_organization_of

VERIFY_SALT = "portal.email-verification"
TOKEN_PREFIX = "gpp"  # noqa: S105 - the public prefix of API tokens, not a secret


class VerificationError(Exception):
    """A verification link that is malformed, tampered with, expired, or for another address."""


def _unique_slug(base: str) -> str:
    slug = ascii_slug(base, max_length=40, fallback="org")
    candidate, n = slug, 1
    while Organization.objects.filter(slug=candidate).exists():
        n += 1
        candidate = f"{slug}-{n}"
    return candidate


def organization_create(*, name: str, owner: User, personal: bool = False) -> Organization:
    """Create an organization with ``owner`` as its owner and an empty wallet (billing's receiver of
    ``portal.hooks.organization_created``, in this transaction)."""
    with transaction.atomic():
        org = Organization.objects.create(name=name[:150], slug=_unique_slug(name), personal=personal)
        Membership.objects.create(organization=org, user=owner, role=Role.OWNER)
        hooks.organization_created.send(sender=Organization, organization=org, owner=owner)
        audit_log(action="portal.organization_create", actor=owner, organization=org, obj=org)
    return org


def membership_add(*, organization: Organization, user: User, role: Role, acting_user: User | None) -> Membership:
    """Add ``user`` to ``organization`` with ``role``, or change the role of an existing member.

    The caller checks who may do this (``membership_invite``); ``acting_user=None`` is the platform. A role
    that may no longer hold write tokens (``portal.permissions``) narrows the user's write tokens of this
    organization to ``read`` in the same transaction (audited), so a demotion takes effect on the API at once.
    """
    with transaction.atomic():
        membership, _created = Membership.objects.update_or_create(
            organization=organization, user=user, defaults={"role": role}
        )
        audit_log(
            action="portal.membership_set",
            actor=acting_user,
            organization=organization,
            obj=membership,
            extra={"user": user.email, "role": str(role)},
        )
        if not role_allows(role, Action.TOKENS_CREATE_WRITE):
            _tokens_narrow(user=user, organization=organization, acting_user=acting_user, reason="role_changed")
    return membership


def _tokens_narrow(*, user: User, organization: Organization, acting_user: User | None, reason: str) -> int:
    """Lower the user's active write tokens of ``organization`` to the read scope; one audit row per token."""
    tokens = list(
        ApiToken.objects.select_for_update().filter(
            user=user, organization=organization, revoked_at__isnull=True, scope=TokenScope.WRITE
        )
    )
    for token in tokens:
        ApiToken.objects.filter(pk=token.pk).update(scope=TokenScope.READ)
        audit_log(
            action="portal.api_token_narrow",
            actor=acting_user,
            organization=organization,
            obj=token,
            extra={"user": user.email, "from": "write", "to": "read", "reason": reason},
        )
    return len(tokens)


def api_tokens_revoke_for(
    *, user: User, organization: Organization | None, acting_user: User | None, reason: str
) -> int:
    """Revoke every active token of ``user`` (of one organization, or of all with ``None``).

    Called in the transaction that removes the membership or deactivates the user, so no request can use
    the token after that commit. One audit row per token (``portal.api_token_revoke`` with ``reason``).
    Returns the number of tokens revoked.
    """
    qs = ApiToken.objects.select_for_update().filter(user=user, revoked_at__isnull=True)
    if organization is not None:
        qs = qs.filter(organization=organization)
    tokens = list(qs.select_related("organization"))
    now = timezone.now()
    for token in tokens:
        ApiToken.objects.filter(pk=token.pk).update(revoked_at=now)
        audit_log(
            action="portal.api_token_revoke",
            actor=acting_user,
            organization=token.organization,
            obj=token,
            extra={"user": user.email, "reason": reason},
        )
    return len(tokens)


def user_deactivate(*, user: User, acting_user: User | None) -> User:
    """Deactivate an account: it can no longer log in and every API token it holds is revoked (audited).

    The admin's "active" checkbox reaches the same revocation through ``portal.signals``. Its other doors
    (SSH keys and open shells, JupyterLab sessions) close after commit through ``portal.hooks.access_changed``.
    """
    with transaction.atomic():
        User.objects.filter(pk=user.pk).update(is_active=False)
        api_tokens_revoke_for(user=user, organization=None, acting_user=acting_user, reason="user_deactivated")
        audit_log(action="portal.user_deactivate", actor=acting_user, obj=user)
        hooks.access_changed.send(sender=User, user=user, organization=None)
    user.refresh_from_db()
    return user


def user_signup(*, email: str, password: str, name: str = "") -> User:
    """Create an unverified user and a personal organization, then e-mail a verification link.

    The caller validates the input (``SignupForm``); a duplicate address raises ``IntegrityError``.
    The e-mail is sent after commit.
    """
    with transaction.atomic():
        user = User.objects.create_user(email=email, password=password, name=name)
        organization_create(name=name or email.split("@")[0], owner=user, personal=True)
        audit_log(action="portal.signup", actor=user, obj=user)
        transaction.on_commit(lambda: send_verification_email(user=user))
    return user


def verification_token(user: User) -> str:
    """A signed, timestamped token naming the user and the address being verified."""
    return signing.dumps({"u": user.pk, "e": user.email}, salt=VERIFY_SALT)


def send_verification_email(*, user: User) -> None:
    """Send the verification link to the user's address (console backend by default)."""
    link = settings.SITE_URL.rstrip("/") + reverse("verify_email", args=[verification_token(user)])
    send_mail(
        subject=_("Verify your gpu-portal e-mail address"),
        message=_(
            "Welcome to gpu-portal.\n\nOpen this link to verify your address and receive your trial "
            "credit:\n\n%(link)s\n\nThe link is valid for 3 days."
        )
        % {"link": link},
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[user.email],
    )


@dataclass(frozen=True)
class VerificationResult:
    user: User
    newly_verified: bool
    trial_granted: bool


def email_verify(*, token: str) -> VerificationResult:
    """Verify the address named by ``token`` and grant trial credit once per address.

    Raises ``VerificationError`` for a malformed, tampered or expired token, or one whose address no
    longer matches the user's. The grant is made at most once per address ever: a ``TrialClaim`` row
    with a unique address (kept when the user is deleted) is inserted first, then ``portal.hooks.trial_claimed``
    is sent and billing posts the grant with the idempotency key ``trial:<sha256 of the address>`` — so
    clicking twice, concurrently, or after re-creating the account grants nothing more.
    """
    try:
        data = signing.loads(token, salt=VERIFY_SALT, max_age=settings.EMAIL_VERIFICATION_MAX_AGE_S)
    except signing.SignatureExpired as exc:
        raise VerificationError(_("This verification link has expired. Request a new one.")) from exc
    except signing.BadSignature as exc:
        raise VerificationError(_("This verification link is not valid.")) from exc
    user = User.objects.filter(pk=data.get("u"), email=data.get("e")).first()
    if user is None:
        raise VerificationError(_("This verification link is not valid."))

    with transaction.atomic():
        newly = User.objects.filter(pk=user.pk, email_verified_at__isnull=True).update(email_verified_at=timezone.now())
        user.refresh_from_db()
        org = personal_organization_of(user)  # their own, not a personal one they were invited into
        granted = False
        if org is not None and settings.TRIAL_CREDIT > 0:
            try:
                with transaction.atomic():
                    TrialClaim.objects.create(email=user.email, organization=org)
                granted = True
            except IntegrityError:
                granted = False
            if granted:  # the grant itself: billing's receiver of the hook, in this transaction
                hooks.trial_claimed.send(sender=Organization, organization=org, user=user)
        if newly:
            audit_log(
                action="portal.email_verified", actor=user, organization=org, obj=user, extra={"trial_granted": granted}
            )
    return VerificationResult(user=user, newly_verified=bool(newly), trial_granted=granted)


@dataclass(frozen=True)
class CreatedToken:
    token: ApiToken
    plaintext: str  # shown once, never stored


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def api_token_create(*, user: User, organization: Organization, name: str, scope: TokenScope) -> CreatedToken:
    """Create a token ``gpp_<prefix>_<secret>``; only the SHA-256 of the secret is stored.

    The token is a credential of the user's membership in ``organization``: any member may create a
    ``read`` token, only roles that hold ``tokens.create_write`` (owners, admins) a ``write`` token
    (``portal.permissions``). Raises ``PermissionRefused`` (a ``PermissionDenied``) otherwise.
    """
    authorize(
        user=user,
        organization=organization,
        action=Action.TOKENS_CREATE_WRITE if scope == TokenScope.WRITE else Action.TOKENS_CREATE,
    )
    prefix = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user,
            organization=organization,
            name=name[:100],
            prefix=prefix,
            secret_sha256=hash_secret(secret),
            scope=scope,
        )
        audit_log(
            action="portal.api_token_create",
            actor=user,
            organization=organization,
            obj=token,
            extra={"scope": str(scope), "name": name},
        )
    return CreatedToken(token=token, plaintext=f"{TOKEN_PREFIX}_{prefix}_{secret}")


def api_token_revoke(*, token: ApiToken, acting_user: User) -> ApiToken:
    """Revoke a token (idempotent); a revoked token authenticates nothing."""
    with transaction.atomic():
        if ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
            audit_log(action="portal.api_token_revoke", actor=acting_user, organization=token.organization, obj=token)
        token.refresh_from_db()
    return token


TOKEN_LAST_USED_RESOLUTION = timedelta(minutes=1)
_TOKEN_RE = re.compile(rf"{TOKEN_PREFIX}_[0-9a-f]{{12}}_[A-Za-z0-9_-]{{20,100}}")


def api_token_authenticate(raw: str) -> ApiToken | None:
    """The usable token matching ``raw`` (``gpp_<prefix>_<secret>``), or None. Constant-time compare.

    A token is a credential of one membership, so it is usable only while it is not revoked, its user is
    active **and** still a member of the token's organization; ``token.role`` is set to that member's
    current role (read in the same query), so callers never trust a role cached at creation. A write token
    whose user's role may no longer hold one acts as ``read`` (``token.scope`` is lowered in memory; the
    demotion already lowered it in the database).

    ``last_used_at`` is written at most once per ``TOKEN_LAST_USED_RESOLUTION`` (1 minute), so a busy token
    does not cost a database write per request (GitHub likewise shows token use to the hour or so).
    """
    if len(raw) > 200 or not _TOKEN_RE.fullmatch(raw):  # also keeps NUL and other odd bytes out of the query
        return None
    parts = raw.split("_", 2)
    role_sq = Membership.objects.filter(organization=OuterRef("organization_id"), user=OuterRef("user_id"))
    token = (
        ApiToken.objects.select_related("user", "organization")
        .annotate(member_role=Subquery(role_sq.values("role")[:1]))
        .filter(prefix=parts[1])
        .first()
    )
    if token is None or token.revoked_at is not None or not token.user.is_active:
        return None
    if not secrets.compare_digest(token.secret_sha256, hash_secret(parts[2])):
        return None
    role = getattr(token, "member_role", None)
    if role is None:
        return None
    token.role = role
    if token.scope == TokenScope.WRITE and not role_allows(role, Action.TOKENS_CREATE_WRITE):
        token.scope = TokenScope.READ
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= TOKEN_LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


class MembershipError(Exception):
    """A membership change that is not allowed (not a manager, unknown address, last owner)."""


def _require_manager(organization: Organization, user: User) -> None:
    try:
        authorize(user=user, organization=organization, action=Action.MEMBERS_MANAGE)
    except PermissionRefused as exc:
        raise MembershipError(str(exc)) from exc


def _is_owner(organization: Organization, user: User) -> bool:
    return Membership.objects.filter(organization=organization, user=user, role=Role.OWNER).exists()


def membership_invite(*, organization: Organization, email: str, role: Role, acting_user: User) -> Membership:
    """Add the existing account ``email`` to the organization, or change a member's role (managers only).

    Raises ``MembershipError`` when the actor is not an owner/admin, the organization is personal, no
    account uses that address (the person signs up first; invitations by e-mail are not built yet), a
    non-owner grants or changes the owner role, or the last owner would be demoted. A demotion narrows the
    member's write tokens in the same transaction (``membership_add``).
    """
    _require_manager(organization, acting_user)
    if organization.personal:
        raise MembershipError(_("A personal organization has only its owner. Create a team organization."))
    user = User.objects.filter(email=email.strip().lower()).first()
    if user is None:
        raise MembershipError(_("No account uses %(email)s; ask them to sign up first.") % {"email": email})
    with transaction.atomic():
        current = (
            Membership.objects.select_for_update()
            .filter(organization=organization, user=user)
            .values_list("role", flat=True)
            .first()
        )
        touches_owner = role == Role.OWNER or current == Role.OWNER
        if touches_owner and not _is_owner(organization, acting_user):
            raise MembershipError(_("Only an owner can add an owner or change an owner's role."))
        if current == Role.OWNER and role != Role.OWNER:
            owners = Membership.objects.select_for_update().filter(organization=organization, role=Role.OWNER)
            if owners.count() == 1:
                raise MembershipError(_("The last owner cannot be demoted; make someone else an owner first."))
        return membership_add(organization=organization, user=user, role=role, acting_user=acting_user)


def membership_remove(*, membership: Membership, acting_user: User) -> None:
    """Remove a member (managers only, or a member leaving); the last owner cannot be removed.

    Every API token the member holds for this organization is revoked in the same transaction (audited),
    so the removed member's tokens answer 401 from the commit on. Only an owner removes another owner.
    """
    organization = membership.organization
    if membership.user_id != acting_user.pk:
        _require_manager(organization, acting_user)
        if membership.role == Role.OWNER and not _is_owner(organization, acting_user):
            raise MembershipError(_("Only an owner can remove another owner."))
    with transaction.atomic():
        owners = Membership.objects.select_for_update().filter(organization=organization, role=Role.OWNER)
        if membership.role == Role.OWNER and owners.count() == 1:
            raise MembershipError(_("The last owner cannot leave; make someone else an owner first."))
        audit_log(
            action="portal.membership_remove",
            actor=acting_user,
            organization=organization,
            obj=membership,
            extra={"user": membership.user.email},
        )
        api_tokens_revoke_for(
            user=membership.user, organization=organization, acting_user=acting_user, reason="membership_removed"
        )
        membership.delete()
