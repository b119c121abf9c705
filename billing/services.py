"""Operations on wallets: credit grants, top-ups, spending (grants first, then paid), adjustments. Every one
posts through the ledger core (``billing.ledger``: ``ledger_post`` and the steps ``wallet_spend`` shares),
whose public names are re-exported here so callers keep importing them from ``billing.services``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.utils import timezone

from billing.choices import AccountKind, GrantKind, SystemAccount, TransactionKind
from billing.ledger import (  # re-exported: the ledger's public names are part of this module's interface
    BulkPosting,
    IdempotencyKeyReused,
    InsufficientFunds,
    LedgerError,
    Posting,
    UnbalancedTransaction,
    _check_balanced,
    _entries_apply,
    _fingerprint,
    _Leg,
    _transaction_insert,
    ledger_post,
    ledger_post_many,
    system_account,
)
from billing.memos import grant_memo
from billing.memos import memo as coded_memo
from billing.models import CreditGrant, LedgerAccount, LedgerTransaction, Wallet
from billing.money import format_cny
from portal.audit import audit_log
from portal.db import db_value, quoted_table

if TYPE_CHECKING:
    from portal.models import Organization, User


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
        wallet = wallet_lock(organization=organization)
        account = LedgerAccount.objects.create(
            code=f"org:{organization.pk}:grant:{idempotency_key}"[:80],
            kind=AccountKind.CREDIT_GRANT,
            organization=organization,
            name=f"{GrantKind(kind).label} for {organization.name}"[:120],
        )
        grant = CreditGrant.objects.create(
            wallet_id=wallet.wallet_id,
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
            memo=reason or grant_memo(kind),
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
        wallet_lock(organization=grant.wallet.organization, now=now)
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
                memo=coded_memo("grant_expiry", name=grant_memo(grant.kind)),
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
        memo=memo or coded_memo("top_up"),
        created_by=created_by,
        metadata=metadata,
        postings=[Posting(wallet.paid_account, amount_micros), Posting(system_account(source), -amount_micros)],
    )


@dataclass(frozen=True)
class LockedWallet:
    """An organization's wallet, row-locked until the end of the current database transaction, and its money
    at one instant, in micro-CNY.

    ``grants`` are the (account id, balance) of its unexpired credit grants with money left, in spending
    order (earliest expiry first); ``spendable_micros`` is their sum plus the paid balance.
    """

    wallet_id: int
    paid_account_id: int
    paid_micros: int
    grants: tuple[tuple[int, int], ...]

    @property
    def spendable_micros(self) -> int:
        return self.paid_micros + sum(balance for _, balance in self.grants)


def wallet_lock(*, organization: Organization, now: datetime | None = None) -> LockedWallet:
    """Lock the organization's wallet and read what it can spend at ``now`` (see ``LockedWallet``).

    Must run inside ``transaction.atomic``: the lock is ``SELECT … FOR UPDATE`` of the wallet row on
    PostgreSQL, and SQLite's write transaction (``BEGIN IMMEDIATE``, see the settings) on SQLite, so every
    spend and reservation of one organization serializes on it. One statement (the wallet, its paid
    account and its grants, one row per grant); the wallet is created when the organization has none yet.
    """
    now = now or timezone.now()
    lock = " FOR UPDATE OF w" if connection.features.has_select_for_update_of else ""
    accounts = quoted_table(LedgerAccount)
    sql = (
        f"SELECT w.id, w.paid_account_id, a.balance_micros, ga.id, ga.balance_micros FROM {quoted_table(Wallet)} w"
        f" JOIN {accounts} a ON a.id = w.paid_account_id"
        f" LEFT JOIN {quoted_table(CreditGrant)} g ON g.wallet_id = w.id AND g.expired_at IS NULL"
        " AND g.expires_at > %s"
        f" LEFT JOIN {accounts} ga ON ga.id = g.account_id AND ga.balance_micros > 0"
        f" WHERE w.organization_id = %s ORDER BY g.expires_at, g.id{lock}"
    )
    params = [db_value(CreditGrant, "expires_at", now), organization.pk]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        if not rows:
            wallet_create(organization=organization)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    wallet_id, paid_account_id, paid_micros = rows[0][:3]
    grants = tuple((row[3], row[4]) for row in rows if row[3] is not None)
    return LockedWallet(wallet_id=wallet_id, paid_account_id=paid_account_id, paid_micros=paid_micros, grants=grants)


def _credit_account_ids(destination: SystemAccount, organization_ids: Sequence[int]) -> tuple[int, dict[int, int]]:
    """The id of system account ``destination`` and, per organization id, its paid-balance account id — one
    statement; the account and wallets are created where missing."""
    in_list = ", ".join(["%s"] * len(organization_ids)) or "NULL"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, NULL FROM {quoted_table(LedgerAccount)} WHERE code = %s UNION ALL SELECT paid_account_id,"
            f" organization_id FROM {quoted_table(Wallet)} WHERE organization_id IN ({in_list})",
            [destination.value, *organization_ids],
        )
        rows = cursor.fetchall()
    system = next((int(account_id) for account_id, org_id in rows if org_id is None), None)
    paid = {int(org_id): int(account_id) for account_id, org_id in rows if org_id is not None}
    from portal.models import Organization

    for org_id in set(organization_ids) - paid.keys():
        paid[org_id] = wallet_create(organization=Organization.objects.get(pk=org_id)).paid_account_id
    return system if system is not None else int(system_account(destination).pk), paid


def spend_fingerprint(
    *,
    kind: TransactionKind,
    organization_id: int,
    amount_micros: int,
    destination: SystemAccount,
    credit_wallets: Sequence[tuple[int, int]],
) -> str:
    """The content hash of a ``wallet_spend`` posting (its idempotency key must come back with the same one);
    shared with the app-call settlement in SQL (``billing.call_sql``)."""
    return _fingerprint(
        {
            "kind": str(kind),
            "org": organization_id,
            "amount": amount_micros,
            "to": destination.value,
            "wallets": sorted(credit_wallets),
        }
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
    credit_wallets: Sequence[tuple[int, int]] = (),
) -> LedgerTransaction:
    """Take ``amount_micros`` from the wallet: unexpired grants first (earliest expiry first), then paid.

    The money goes to ``destination``, less the parts listed in ``credit_wallets`` — (organization id,
    micros) pairs credited to those organizations' paid balances in the same balanced transaction, e.g. a
    publisher's revenue share of an app call.

    Runs under the wallet's lock (``wallet_lock``), so concurrent spends of one organization serialize;
    raises ``InsufficientFunds`` (nothing written) when grants plus paid balance cannot cover the amount —
    the balance never goes below zero. Idempotent: the same key and amount returns the first
    transaction even if the split between grants changed since; the same key for another amount or
    destination raises ``IdempotencyKeyReused``.
    """
    if amount_micros <= 0:
        raise LedgerError("a spend must be positive")
    now = now or timezone.now()
    credit_total = sum(micros for _, micros in credit_wallets)
    if any(micros <= 0 for _, micros in credit_wallets) or credit_total > amount_micros:
        raise LedgerError("the parts credited to wallets must be positive and at most the amount")
    fingerprint = spend_fingerprint(
        kind=kind,
        organization_id=organization.pk,
        amount_micros=amount_micros,
        destination=destination,
        credit_wallets=credit_wallets,
    )
    with transaction.atomic():
        wallet = wallet_lock(organization=organization, now=now)
        txn, created = _transaction_insert(
            idempotency_key=idempotency_key,
            kind=kind,
            organization_id=organization.pk,
            memo=memo,
            created_by_id=created_by.pk if created_by else None,
            metadata=metadata,
            fingerprint=fingerprint,
        )
        if not created:  # a retry: the first posting stands, whatever the balance is now
            return txn
        legs: list[_Leg] = []
        left = amount_micros
        for account_id, balance in wallet.grants:
            take = min(left, balance)
            legs.append(_Leg(account_id, -take, True, False, f"grant account {account_id}"))
            left -= take
            if left == 0:
                break
        if left > 0:
            if wallet.paid_micros < left:
                available = amount_micros - left + wallet.paid_micros
                raise InsufficientFunds(
                    f"balance {format_cny(available)} CNY cannot cover {format_cny(amount_micros)} CNY",
                    available_micros=available,
                    requested_micros=amount_micros,
                )
            legs.append(_Leg(wallet.paid_account_id, -left, True, False, f"org:{organization.pk}:paid"))
        system_id, paid_accounts = _credit_account_ids(destination, [org_id for org_id, _ in credit_wallets])
        if amount_micros - credit_total:
            legs.append(_Leg(system_id, amount_micros - credit_total, False, True, destination.value))
        legs.extend(
            _Leg(paid_accounts[org_id], micros, True, False, f"org:{org_id}:paid") for org_id, micros in credit_wallets
        )
        _check_balanced(legs, idempotency_key)
        _entries_apply(txn.pk, legs)
        return txn


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


__all__ = [
    "BulkPosting",
    "IdempotencyKeyReused",
    "InsufficientFunds",
    "LedgerError",
    "Posting",
    "UnbalancedTransaction",
    "ledger_post",
    "ledger_post_many",
    "system_account",
]
