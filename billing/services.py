"""Operations that move money. Every one goes through ``ledger_post``, the one posting function.

Money is integer micro-CNY (see ``billing.money``). Callers pass an idempotency key derived from
their own identifiers (``trial:<address hash>``, ``grant-expiry:<grant id>``, ``topup:<id>`` …), so a
retried task or a duplicated webhook posts nothing twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from billing.choices import AccountKind, GrantKind, SystemAccount, TransactionKind
from billing.models import CreditGrant, LedgerAccount, LedgerEntry, LedgerTransaction, Wallet
from billing.money import format_cny
from portal.audit import audit_log

if TYPE_CHECKING:
    from portal.models import Organization, User


class LedgerError(Exception):
    """Base class of ledger refusals; nothing is written when one is raised."""


class UnbalancedTransaction(LedgerError):
    """The entries of a transaction do not sum to zero, are empty, or contain a zero/non-integer amount."""


class IdempotencyKeyReused(LedgerError):
    """The idempotency key was already used for a transaction with different content."""


class InsufficientFunds(LedgerError):
    """The posting would take an account that may not go negative below zero."""

    def __init__(self, message: str, *, available_micros: int = 0, requested_micros: int = 0) -> None:
        super().__init__(message)
        self.available_micros = available_micros
        self.requested_micros = requested_micros


@dataclass(frozen=True)
class Posting:
    """One leg of a transaction: ``amount_micros`` (signed, non-zero) added to ``account``."""

    account: LedgerAccount
    amount_micros: int


def _fingerprint(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def system_account(code: SystemAccount) -> LedgerAccount:
    """The platform account with ``code``, created on first use (no cached balance, may go negative)."""
    account, _ = LedgerAccount.objects.get_or_create(
        code=code.value,
        defaults={
            "kind": AccountKind.SYSTEM,
            "name": str(code.label),
            "track_balance": False,
            "allow_negative": True,
        },
    )
    return account


def ledger_post(
    *,
    idempotency_key: str,
    kind: TransactionKind,
    postings: Sequence[Posting],
    organization: Organization | None = None,
    memo: str = "",
    created_by: User | None = None,
    metadata: dict[str, Any] | None = None,
    fingerprint: str | None = None,
    key_checked: bool = False,
) -> LedgerTransaction:
    """Post one balanced transaction atomically and return it — the only way money moves.

    ``postings`` must be non-empty, integer, non-zero and sum to exactly 0 micro-CNY, else
    ``UnbalancedTransaction``. The idempotency key is enforced by a unique constraint: a key already
    used with the same content (``fingerprint``, by default a hash of kind, organization and postings)
    returns the original transaction and writes nothing; with different content it raises
    ``IdempotencyKeyReused``. Accounts with a cached balance are locked in primary-key order
    (``SELECT … FOR UPDATE``) and updated in the same database transaction; an account that may not go
    negative raises ``InsufficientFunds`` instead. On any error nothing is written.
    """
    if not postings:
        raise UnbalancedTransaction("a transaction needs at least one entry")
    for p in postings:
        if not isinstance(p.amount_micros, int) or isinstance(p.amount_micros, bool) or p.amount_micros == 0:
            raise UnbalancedTransaction(f"entry amount must be a non-zero integer of micros, got {p.amount_micros!r}")
        if p.account.pk is None:
            raise UnbalancedTransaction("entry account is not saved")
    total = sum(p.amount_micros for p in postings)
    if total != 0:
        raise UnbalancedTransaction(f"entries sum to {total} micros, not 0")
    if not idempotency_key or len(idempotency_key) > 200:
        raise LedgerError("an idempotency key of 1 to 200 characters is required")
    fingerprint = fingerprint or _fingerprint(
        {
            "kind": str(kind),
            "org": organization.pk if organization else None,
            "postings": sorted((p.account.pk, p.amount_micros) for p in postings),
        }
    )

    with transaction.atomic():
        if not key_checked:  # wallet_spend checked it already, under the wallet lock
            existing = LedgerTransaction.objects.filter(idempotency_key=idempotency_key).first()
            if existing is not None:
                return _same_or_raise(existing, fingerprint)
        try:
            with transaction.atomic():
                txn = LedgerTransaction.objects.create(
                    idempotency_key=idempotency_key,
                    kind=kind,
                    organization=organization,
                    memo=memo[:300],
                    fingerprint=fingerprint,
                    metadata=metadata or {},
                    created_by=created_by,
                )
        except IntegrityError:
            # A concurrent posting with the same key committed first.
            return _same_or_raise(LedgerTransaction.objects.get(idempotency_key=idempotency_key), fingerprint)

        deltas: dict[int, int] = {}
        for p in postings:
            deltas[p.account.pk] = deltas.get(p.account.pk, 0) + p.amount_micros
        tracked = list(
            LedgerAccount.objects.select_for_update()
            .filter(pk__in=deltas.keys(), track_balance=True)
            .order_by("pk")
        )
        for account in tracked:
            new_balance = account.balance_micros + deltas[account.pk]
            if new_balance < 0 and not account.allow_negative:
                raise InsufficientFunds(
                    f"account {account.code} holds {format_cny(account.balance_micros, 6)} CNY, "
                    f"cannot take {format_cny(-deltas[account.pk], 6)} CNY",
                    available_micros=account.balance_micros,
                    requested_micros=-deltas[account.pk],
                )
            LedgerAccount.objects.filter(pk=account.pk).update(balance_micros=F("balance_micros") + deltas[account.pk])
        LedgerEntry.objects.bulk_create(
            [LedgerEntry(transaction=txn, account=p.account, amount_micros=p.amount_micros) for p in postings]
        )
    return txn


def _same_or_raise(existing: LedgerTransaction, fingerprint: str) -> LedgerTransaction:
    if existing.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"idempotency key {existing.idempotency_key!r} was already used for a different transaction"
        )
    return existing


# --- wallets -------------------------------------------------------------------------------------------


def wallet_create(*, organization: Organization) -> Wallet:
    """Create (or return) the organization's wallet with its paid-balance account."""
    existing = Wallet.objects.filter(organization=organization).first()
    if existing:
        return existing
    with transaction.atomic():
        account = LedgerAccount.objects.create(
            code=f"org:{organization.pk}:paid",
            kind=AccountKind.WALLET_PAID,
            organization=organization,
            name=f"Paid balance of {organization.name}"[:120],
        )
        return Wallet.objects.create(organization=organization, paid_account=account)


def _locked_wallet(organization: Organization) -> Wallet:
    """The organization's wallet, row-locked until the end of the transaction (created if missing)."""
    locked = Wallet.objects.select_for_update().select_related("paid_account")
    wallet = locked.filter(organization=organization).first()
    if wallet is None:
        wallet = locked.get(pk=wallet_create(organization=organization).pk)
    return wallet


def credit_grant_create(
    *,
    organization: Organization,
    amount_micros: int,
    expires_at: datetime,
    kind: GrantKind,
    idempotency_key: str,
    reason: str = "",
    created_by: User | None = None,
) -> CreditGrant:
    """Give ``amount_micros`` of credit that expires at ``expires_at`` (posted against promotions).

    Idempotent on ``idempotency_key``: a second call with the same key returns the first grant.
    Raises ``LedgerError`` for a non-positive amount or an expiry in the past.
    """
    if amount_micros <= 0:
        raise LedgerError("a credit grant must be positive")
    if expires_at <= timezone.now():
        raise LedgerError("a credit grant must expire in the future")
    with transaction.atomic():
        existing = LedgerTransaction.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return CreditGrant.objects.get(account__entries__transaction=existing)
        wallet = _locked_wallet(organization)
        account = LedgerAccount.objects.create(
            code=f"org:{organization.pk}:grant:{idempotency_key}"[:80],
            kind=AccountKind.CREDIT_GRANT,
            organization=organization,
            name=f"{GrantKind(kind).label} for {organization.name}"[:120],
        )
        grant = CreditGrant.objects.create(
            wallet=wallet,
            account=account,
            kind=kind,
            amount_micros=amount_micros,
            expires_at=expires_at,
            reason=reason[:300],
        )
        ledger_post(
            idempotency_key=idempotency_key,
            kind=TransactionKind.CREDIT_GRANT,
            organization=organization,
            memo=reason or str(GrantKind(kind).label),
            created_by=created_by,
            postings=[
                Posting(account, amount_micros),
                Posting(system_account(SystemAccount.PROMOTIONS), -amount_micros),
            ],
            metadata={"grant_id": grant.pk, "expires_at": expires_at.isoformat()},
        )
        audit_log(
            action="billing.credit_grant",
            actor=created_by,
            organization=organization,
            obj=grant,
            extra={"amount_micros": amount_micros, "expires_at": expires_at.isoformat(), "kind": str(kind)},
        )
    return grant


def credit_grant_expire(*, grant: CreditGrant, now: datetime | None = None) -> CreditGrant:
    """Post the unspent remainder of an expired grant to ``system:expired-credit`` and mark it expired.

    Safe to run twice (idempotency key ``grant-expiry:<id>``). Raises ``LedgerError`` when the grant
    has not reached its expiry yet.
    """
    now = now or timezone.now()
    with transaction.atomic():
        _locked_wallet(grant.wallet.organization)
        grant = CreditGrant.objects.select_related("account", "wallet__organization").get(pk=grant.pk)
        if grant.expired_at is not None:
            return grant
        if grant.expires_at > now:
            raise LedgerError(f"grant {grant.pk} expires at {grant.expires_at.isoformat()}, not yet")
        remaining = grant.account.balance_micros
        if remaining > 0:
            ledger_post(
                idempotency_key=f"grant-expiry:{grant.pk}",
                kind=TransactionKind.GRANT_EXPIRY,
                organization=grant.wallet.organization,
                memo=f"Expiry of {GrantKind(grant.kind).label}",
                postings=[
                    Posting(grant.account, -remaining),
                    Posting(system_account(SystemAccount.EXPIRED_CREDIT), remaining),
                ],
                metadata={"grant_id": grant.pk},
            )
        CreditGrant.objects.filter(pk=grant.pk, expired_at__isnull=True).update(expired_at=now)
        grant.refresh_from_db()
    return grant


def wallet_top_up(
    *,
    organization: Organization,
    amount_micros: int,
    idempotency_key: str,
    source: SystemAccount = SystemAccount.STRIPE,
    memo: str = "",
    created_by: User | None = None,
    metadata: dict[str, Any] | None = None,
) -> LedgerTransaction:
    """Add paid money to the wallet (e.g. after a verified Stripe payment). Idempotent on the key."""
    if amount_micros <= 0:
        raise LedgerError("a top-up must be positive")
    wallet = wallet_create(organization=organization)
    return ledger_post(
        idempotency_key=idempotency_key,
        kind=TransactionKind.TOP_UP,
        organization=organization,
        memo=memo or "Top-up",
        created_by=created_by,
        metadata=metadata,
        postings=[Posting(wallet.paid_account, amount_micros), Posting(system_account(source), -amount_micros)],
    )


def wallet_spend(
    *,
    organization: Organization,
    amount_micros: int,
    idempotency_key: str,
    kind: TransactionKind = TransactionKind.SPEND,
    memo: str = "",
    destination: SystemAccount = SystemAccount.REVENUE,
    created_by: User | None = None,
    metadata: dict[str, Any] | None = None,
    now: datetime | None = None,
    split: Sequence[tuple[LedgerAccount, int]] = (),
) -> LedgerTransaction:
    """Take ``amount_micros`` from the wallet: unexpired grants first (earliest expiry first), then paid.

    The money goes to ``destination``, less the parts listed in ``split`` (account, micros), which are
    credited in the same balanced transaction — e.g. a publisher's revenue share of an app call.

    Runs under the wallet's row lock, so concurrent spends of one organization serialize; raises
    ``InsufficientFunds`` (nothing written) when grants plus paid balance cannot cover the amount —
    the balance never goes below zero. Idempotent: the same key and amount returns the first
    transaction even if the split between grants changed since.
    """
    if amount_micros <= 0:
        raise LedgerError("a spend must be positive")
    now = now or timezone.now()
    split_total = sum(micros for _, micros in split)
    if any(micros <= 0 for _, micros in split) or split_total > amount_micros:
        raise LedgerError("split parts must be positive and at most the amount")
    fingerprint = _fingerprint(
        {"kind": str(kind), "org": organization.pk, "amount": amount_micros, "to": destination.value,
         "split": sorted((a.pk, m) for a, m in split)}
    )
    with transaction.atomic():
        existing = LedgerTransaction.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            return _same_or_raise(existing, fingerprint)
        wallet = _locked_wallet(organization)
        grants = list(
            CreditGrant.objects.select_related("account")
            .filter(wallet=wallet, expired_at__isnull=True, expires_at__gt=now, account__balance_micros__gt=0)
            .order_by("expires_at", "pk")
        )
        postings: list[Posting] = []
        left = amount_micros
        for grant in grants:
            take = min(left, grant.account.balance_micros)
            postings.append(Posting(grant.account, -take))
            left -= take
            if left == 0:
                break
        if left > 0:
            paid = wallet.paid_account.balance_micros
            if paid < left:
                available = amount_micros - left + paid
                raise InsufficientFunds(
                    f"balance {format_cny(available)} CNY cannot cover {format_cny(amount_micros)} CNY",
                    available_micros=available,
                    requested_micros=amount_micros,
                )
            postings.append(Posting(wallet.paid_account, -left))
        if amount_micros - split_total:
            postings.append(Posting(system_account(destination), amount_micros - split_total))
        postings.extend(Posting(account, micros) for account, micros in split)
        return ledger_post(
            idempotency_key=idempotency_key,
            kind=kind,
            organization=organization,
            memo=memo,
            created_by=created_by,
            metadata=metadata,
            postings=postings,
            fingerprint=fingerprint,
            key_checked=True,
        )


def ledger_adjust(
    *, organization: Organization, amount_micros: int, reason: str, staff_user: User, idempotency_key: str
) -> LedgerTransaction:
    """Staff correction of the paid balance by ``amount_micros`` (signed) against ``system:adjustments``.

    Requires a reason; a debit larger than the paid balance raises ``InsufficientFunds``. Audited.
    """
    if not reason.strip():
        raise LedgerError("an adjustment needs a reason")
    if amount_micros == 0:
        raise LedgerError("an adjustment cannot be zero")
    wallet = wallet_create(organization=organization)
    with transaction.atomic():
        txn = ledger_post(
            idempotency_key=idempotency_key,
            kind=TransactionKind.ADJUSTMENT,
            organization=organization,
            memo=reason,
            created_by=staff_user,
            postings=[
                Posting(wallet.paid_account, amount_micros),
                Posting(system_account(SystemAccount.ADJUSTMENTS), -amount_micros),
            ],
        )
        audit_log(
            action="billing.adjustment",
            actor=staff_user,
            organization=organization,
            obj=txn,
            extra={"amount_micros": amount_micros, "reason": reason},
            staff=True,
        )
    return txn
