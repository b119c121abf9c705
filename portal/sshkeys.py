"""SSH public keys of a user: the model, validation, and the add / revoke services.

A key belongs to one user, never to an organization: an instance accepts the keys of every (active) member
of its organization, written into the instance's authorized keys by ``instances.interactive.ssh``, which
listens to :data:`ssh_keys_changed` (sent after commit, so nothing reads a key that was rolled back).

Validation is asyncssh's parser (``asyncssh.import_public_key``, the OpenSSH ``authorized_keys`` line
format); the policy on top of it follows OpenSSH 9's defaults: DSA (``ssh-dss``) is refused, RSA needs at
least 2048 bits. The fingerprint is the SHA-256 one OpenSSH prints (``ssh-keygen -lf``): ``SHA256:`` and the
unpadded base64 of the SHA-256 of the key blob. One active key per fingerprint in the whole product, so a
key someone else registered cannot be added to a second account (it would let two people act as one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncssh
from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q, QuerySet
from django.dispatch import Signal
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy as _lazy

from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import User

MIN_RSA_BITS = 2048
ALLOWED_ALGORITHMS = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
MAX_KEY_CHARS = 16_000  # an RSA-16384 line is ~2.8k characters

#: Sent after the commit of an add or a revoke, with ``user=`` the key's owner.
ssh_keys_changed = Signal()


class SshKey(models.Model):
    """One SSH public key of a user. ``public_key`` is the normalized OpenSSH line (``algorithm base64``,
    no comment); ``fingerprint`` is ``SHA256:…`` as ``ssh-keygen -lf`` prints it. Revoked keys stay (audit),
    and at most one active key per fingerprint exists (a partial unique constraint)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys")
    name = models.CharField(_lazy("name"), max_length=100)
    algorithm = models.CharField(max_length=60)
    bits = models.PositiveIntegerField(help_text="key size in bits (RSA modulus, curve size)")
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=60, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        app_label = "portal"
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["fingerprint"], condition=Q(revoked_at__isnull=True), name="uniq_active_ssh_key_fingerprint"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"


class SshKeyError(ValueError):
    """A key that cannot be added: malformed, too weak, or already registered. The message is for people."""


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """A validated public key: ``algorithm`` (e.g. ``ssh-ed25519``), ``bits``, the normalized line
    ``public_key`` (no comment), ``fingerprint`` (``SHA256:…``) and the line's ``comment`` ("" if none)."""

    algorithm: str
    bits: int
    public_key: str
    fingerprint: str
    comment: str


def ssh_key_parse(text: str) -> ParsedKey:
    """Validate one OpenSSH public key line (``ssh-ed25519 AAAA… comment``). Raises :class:`SshKeyError`
    for anything that is not exactly one public key, a DSA key, or an RSA key under 2048 bits."""
    text = (text or "").strip()
    if not text:
        raise SshKeyError(_("Paste a public key, e.g. the contents of ~/.ssh/id_ed25519.pub."))
    if "PRIVATE KEY" in text:  # before the one-line rule: a pasted private key spans many lines
        raise SshKeyError(
            _("This is a private key. Paste the public key (the .pub file) and keep the private one secret.")
        )
    if len(text) > MAX_KEY_CHARS or len(text.splitlines()) != 1:
        raise SshKeyError(_("Paste exactly one public key, on one line."))
    try:
        key = asyncssh.import_public_key(text)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise SshKeyError(
            _("This is not a valid SSH public key (%(err)s). Paste a line like “ssh-ed25519 AAAA… you@host”.")
            % {"err": exc}
        ) from exc
    algorithm = key.algorithm.decode()
    if algorithm == "ssh-dss":
        raise SshKeyError(_("DSA keys are not accepted (OpenSSH disabled them as too weak). Use an Ed25519 key."))
    if algorithm not in ALLOWED_ALGORITHMS:
        raise SshKeyError(_("Keys of type %(alg)s are not accepted. Use an Ed25519 key.") % {"alg": algorithm})
    pyca = getattr(key, "pyca_key", None)
    bits = int(getattr(pyca, "key_size", 0) or getattr(getattr(pyca, "curve", None), "key_size", 0) or 256)
    if algorithm == "ssh-rsa" and bits < MIN_RSA_BITS:
        raise SshKeyError(
            _("This RSA key has %(bits)d bits; at least %(min)d are required. Use an Ed25519 key.")
            % {"bits": bits, "min": MIN_RSA_BITS}
        )
    line = key.export_public_key("openssh").decode().strip()
    public_key = " ".join(line.split()[:2])
    comment = (key.get_comment() or "").strip()
    return ParsedKey(algorithm, bits, public_key, key.get_fingerprint("sha256"), comment)


def ssh_keys_for_user(user: User) -> QuerySet[SshKey]:
    """The user's active keys, newest first."""
    return SshKey.objects.filter(user=user, revoked_at__isnull=True)


def ssh_key_add(*, user: User, name: str, public_key: str) -> SshKey:
    """Add a public key to ``user``'s account (audited ``portal.ssh_key_add``); returns it.

    ``name`` defaults to the key's comment. Raises :class:`SshKeyError` for a key :func:`ssh_key_parse`
    refuses, or whose fingerprint is already active on this account or on another one; nothing is written
    then. Instances of the user's organizations accept the key from the commit on (:data:`ssh_keys_changed`).
    """
    parsed = ssh_key_parse(public_key)
    name = (name or "").strip()[:100] or parsed.comment[:100] or parsed.algorithm
    active = SshKey.objects.filter(fingerprint=parsed.fingerprint, revoked_at__isnull=True)
    owner_id = active.values_list("user_id", flat=True).first()
    if owner_id is not None:
        if owner_id == user.pk:
            raise SshKeyError(_("You have already added this key (%(fp)s).") % {"fp": parsed.fingerprint})
        raise SshKeyError(
            _("This key (%(fp)s) is registered to another account. Each person uses their own key.")
            % {"fp": parsed.fingerprint}
        )
    try:
        with transaction.atomic():
            key = SshKey.objects.create(
                user=user,
                name=name,
                algorithm=parsed.algorithm,
                bits=parsed.bits,
                public_key=parsed.public_key,
                fingerprint=parsed.fingerprint,
            )
            audit_log(
                action="portal.ssh_key_add",
                actor=user,
                obj=key,
                extra={"name": name, "fingerprint": parsed.fingerprint, "algorithm": parsed.algorithm},
            )
            transaction.on_commit(lambda: ssh_keys_changed.send(sender=SshKey, user=user))
    except IntegrityError as exc:  # a concurrent add of the same key won the race
        raise SshKeyError(_("This key (%(fp)s) is already registered.") % {"fp": parsed.fingerprint}) from exc
    return key


def ssh_key_revoke(*, key: SshKey, acting_user: User) -> SshKey:
    """Revoke a key (idempotent; audited ``portal.ssh_key_revoke`` once). Instances stop accepting it from
    the commit on: their authorized keys are rewritten (:data:`ssh_keys_changed`)."""
    with transaction.atomic():
        if SshKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
            audit_log(
                action="portal.ssh_key_revoke",
                actor=acting_user,
                obj=key,
                extra={"fingerprint": key.fingerprint},
            )
            owner = key.user
            transaction.on_commit(lambda: ssh_keys_changed.send(sender=SshKey, user=owner))
        key.refresh_from_db()
    return key
