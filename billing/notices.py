"""Low-balance notices: an e-mail to owners and admins and a console banner, once per threshold crossing."""

from __future__ import annotations

from functools import partial

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import LowBalanceNotice, Wallet
from billing.money import format_cny, to_micros
from billing.selectors import wallet_balance
from portal.choices import MANAGER_ROLES
from portal.models import Organization
from portal.webhooks.services import webhook_emit


def thresholds_micros() -> list[int]:
    return sorted((to_micros(t) for t in settings.LOW_BALANCE_THRESHOLDS), reverse=True)


def low_balance_notices(*, organizations: list[Organization] | None = None) -> int:
    """Open a notice (and mail managers) for each threshold a wallet fell below; clear recovered ones.

    Only organizations that have spent (a wallet with usage) are checked when none are given. Returns
    the number of notices opened.
    """
    opened = 0
    orgs = (
        organizations
        if organizations is not None
        else list(
            Organization.objects.filter(
                pk__in=Wallet.objects.filter(organization__usage_records__isnull=False).values("organization_id")
            ).distinct()
        )
    )
    for org in orgs:
        balance = wallet_balance(organization=org).total_micros
        LowBalanceNotice.objects.filter(
            organization=org, cleared_at__isnull=True, threshold_micros__lte=balance
        ).update(cleared_at=timezone.now())
        for threshold in thresholds_micros():
            if balance >= threshold:
                continue
            try:
                with transaction.atomic():
                    LowBalanceNotice.objects.create(
                        organization=org, threshold_micros=threshold, balance_micros=balance
                    )
            except IntegrityError:
                continue  # already open
            opened += 1
            webhook_emit(
                organization=org,
                event_type="wallet.balance_low",
                data={"balance_micros": balance, "threshold_micros": threshold, "currency": "CNY"},
            )
            managers = list(org.memberships.filter(role__in=MANAGER_ROLES).values_list("user__email", flat=True))
            transaction.on_commit(partial(_mail_managers, managers, balance, threshold, org.name))
    return opened


def _mail_managers(recipients: list[str], balance: int, threshold: int, org_name: str) -> None:
    send_mail(
        subject=_("gpu-portal: balance below %(t)s CNY") % {"t": format_cny(threshold)},
        message=_(
            "The wallet of %(org)s holds %(b)s CNY. Running instances are stopped after a final "
            "checkpoint when the balance runs out. Top up in the console."
        )
        % {"org": org_name, "b": format_cny(balance)},
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=recipients,
        fail_silently=True,
    )


def open_notice(organization: Organization) -> LowBalanceNotice | None:
    """The lowest open notice, for the console banner."""
    return (
        LowBalanceNotice.objects.filter(organization=organization, cleared_at__isnull=True)
        .order_by("threshold_micros")
        .first()
    )
