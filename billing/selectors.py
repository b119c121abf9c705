"""Read queries of the billing app."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import QuerySet, Sum
from django.utils import timezone

from billing.models import CreditGrant, LedgerAccount, LedgerEntry, Wallet
from portal.models import Organization


@dataclass(frozen=True)
class WalletBalance:
    """A wallet's spendable money in micro-CNY at one instant.

    ``trial_micros`` is the sum of unexpired credit grants (expired ones no longer count even before
    the expiry task posts them); ``next_expiry`` is the earliest expiry among grants with money left.
    """

    total_micros: int
    trial_micros: int
    paid_micros: int
    next_expiry: datetime | None
    next_expiry_micros: int


def wallet_balance(*, organization: Organization, now: datetime | None = None) -> WalletBalance:
    """Balance of the organization's wallet (zero if it has none yet)."""
    now = now or timezone.now()
    wallet = Wallet.objects.select_related("paid_account").filter(organization=organization).first()
    if wallet is None:
        return WalletBalance(0, 0, 0, None, 0)
    grants = list(
        CreditGrant.objects.filter(
            wallet=wallet, expired_at__isnull=True, expires_at__gt=now, account__balance_micros__gt=0
        )
        .order_by("expires_at", "pk")
        .values_list("expires_at", "account__balance_micros")
    )
    trial = sum(b for _, b in grants)
    paid = wallet.paid_account.balance_micros
    return WalletBalance(
        total_micros=trial + paid,
        trial_micros=trial,
        paid_micros=paid,
        next_expiry=grants[0][0] if grants else None,
        next_expiry_micros=grants[0][1] if grants else 0,
    )


@dataclass(frozen=True)
class GrantLine:
    """One credit grant with money left, as the user sees it: ``kind`` (``GrantKind``), ``label`` ("Trial
    credit", "Credit from staff", …), ``balance_micros`` left and its own ``expires_at``."""

    kind: str
    label: str
    balance_micros: int
    expires_at: datetime


def wallet_grants(*, organization: Organization, now: datetime | None = None) -> list[GrantLine]:
    """The organization's unexpired grants with money left, earliest expiry first (the order they are spent).
    One query."""
    from billing.choices import GrantKind

    now = now or timezone.now()
    rows = (
        CreditGrant.objects.filter(
            wallet__organization=organization,
            expired_at__isnull=True,
            expires_at__gt=now,
            account__balance_micros__gt=0,
        )
        .order_by("expires_at", "pk")
        .values_list("kind", "account__balance_micros", "expires_at")
    )
    labels = dict(GrantKind.choices)
    return [GrantLine(kind, str(labels.get(kind, kind)), balance, expires) for kind, balance, expires in rows]


def ledger_lines(*, organization: Organization) -> QuerySet[LedgerEntry]:
    """The organization's wallet entries (paid and grant accounts), newest first."""
    return (
        LedgerEntry.objects.filter(account__organization=organization)
        .select_related("transaction", "account")
        .order_by("-id")
    )


def account_entry_sum(account: LedgerAccount) -> int:
    """Sum of an account's entries in micros, the truth that the cached balance must equal."""
    return int(LedgerEntry.objects.filter(account=account).aggregate(s=Sum("amount_micros"))["s"] or 0)


def grants_due_for_expiry(*, now: datetime | None = None) -> QuerySet[CreditGrant]:
    """Grants past their expiry by more than the metering lookback whose remainder has not been posted yet.

    A grant stops counting at ``expires_at`` (``wallet_balance``, every spend); its remainder is posted to
    expired credit only once no metering catch-up can still charge minutes used before its expiry against it
    (``METERING_LOOKBACK_HOURS``; issue 15: outages cost nobody)."""
    from django.conf import settings

    cutoff = (now or timezone.now()) - timedelta(hours=settings.METERING_LOOKBACK_HOURS)
    return CreditGrant.objects.filter(expired_at__isnull=True, expires_at__lte=cutoff)
