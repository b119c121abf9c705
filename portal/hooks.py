"""The documented hooks by which the ground floor (``portal``) reaches the floors above it (ARCHITECTURE.md).

``portal`` never imports ``billing``, ``datasets`` or ``instances`` at module level; where one of its operations
needs theirs, it sends one of these signals and the app above connects a receiver in its ``AppConfig.ready``.
Both are sent with ``send`` (not ``send_robust``) inside the operation's transaction, so a receiver that fails
rolls the whole operation back, exactly as a direct call would.

* ``organization_created(sender=Organization, organization=<Organization>, owner=<User>)`` — from
  ``portal.services.organization_create``, after the organization and its owner's membership rows exist.
  Receiver: ``billing.receivers.wallet_for_new_organization`` (the organization's empty wallet).
* ``trial_claimed(sender=Organization, organization=<Organization>, user=<User>)`` — from
  ``portal.services.email_verify``, once per address ever (after its ``TrialClaim`` row was inserted), for the
  user's personal organization. Receiver: ``billing.receivers.trial_credit_for_claim`` (``TRIAL_CREDIT`` CNY
  valid ``TRIAL_CREDIT_DAYS`` days, idempotency key ``trial:<sha256 of the address>``).
* ``access_changed(sender=User, user=<User>, organization=<Organization> | None)`` — from an operation that
  changes what a user may enter without saving the model through ``save()`` (so without ``post_save``):
  ``portal.services.user_deactivate`` (``organization=None``: all of the user's organizations). Receiver:
  ``instances.interactive.access._on_hook`` → ``access_changed`` (authorized SSH keys rewritten, open SSH
  sessions closed, JupyterLab servers told to re-check, after commit). Saves and deletes of ``User`` and
  ``Membership`` reach the same place through Django's model signals.
"""

from __future__ import annotations

from django.dispatch import Signal

organization_created = Signal()
trial_claimed = Signal()
access_changed = Signal()
