"""Billing's receivers of the ground floor's hooks (``portal.hooks``), connected in ``BillingConfig.ready``.

They run inside the sending operation's transaction: a failure here rolls the organization or the e-mail
verification back with it.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from billing.choices import GrantKind
from billing.memos import grant_memo
from billing.money import to_micros
from billing.services import credit_grant_create, wallet_create
from portal.models import Organization, User


def wallet_for_new_organization(sender: Any, *, organization: Organization, **kwargs: Any) -> None:
    """``organization_created``: the new organization's empty wallet (``wallet_create``)."""
    wallet_create(organization=organization)


def trial_credit_for_claim(sender: Any, *, organization: Organization, user: User, **kwargs: Any) -> None:
    """``trial_claimed``: ``TRIAL_CREDIT`` CNY of trial credit for the organization, valid ``TRIAL_CREDIT_DAYS``
    days from now, posted once per address (idempotency key ``trial:<sha256 of the address>``)."""
    credit_grant_create(
        organization=organization,
        amount_micros=to_micros(settings.TRIAL_CREDIT),
        expires_at=timezone.now() + timedelta(days=settings.TRIAL_CREDIT_DAYS),
        kind=GrantKind.TRIAL,
        idempotency_key="trial:" + hashlib.sha256(user.email.encode()).hexdigest(),
        reason=grant_memo(GrantKind.TRIAL),
        created_by=user,
    )
