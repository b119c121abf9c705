"""Operations that move money. Every one writes through the same two steps — ``_transaction_insert`` (the
row that holds the idempotency key) and ``_entries_apply`` (entries and cached balances) — which
``ledger_post`` (balanced postings given by the caller) and ``wallet_spend`` (grants first, then paid)
share.

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

from django.db import connection, transaction
from django.utils import timezone

from billing.choices import AccountKind, GrantKind, SystemAccount, TransactionKind
from billing.models import CreditGrant, LedgerAccount, LedgerEntry, LedgerTransaction, Wallet
from billing.money import format_cny
from portal.audit import audit_log
from portal.db import db_value, loaded, quoted_table

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
) -> LedgerTransaction:
    """Post one balanced transaction atomically and return it — the only way money moves.

    ``postings`` must be non-empty, integer, non-zero and sum to exactly 0 micro-CNY, else
    ``UnbalancedTransaction``. The idempotency key is enforced by a unique constraint: a key already
    used with the same content (``fingerprint``, by default a hash of kind, organization and postings)
    returns the original transaction and writes nothing; with different content it raises
    ``IdempotencyKeyReused``. Accounts with a cached balance are updated in primary-key order in the same
    database transaction (each ``UPDATE`` takes the row's lock); an account that may not go negative raises
    ``InsufficientFunds`` instead. On any error nothing is written.
    """
    legs = [
        _Leg(p.account.pk, p.amount_micros, p.account.track_balance, p.account.allow_negative, p.account.code)
        for p in postings
    ]
    _check_balanced(legs, idempotency_key)
    fingerprint = fingerprint or _fingerprint(
        {
            "kind": str(kind),
            "org": organization.pk if organization else None,
            "postings": sorted((leg.account_id, leg.amount_micros) for leg in legs),
        }
    )
    with transaction.atomic():
        txn, created = _transaction_insert(
            idempotency_key=idempotency_key,
            kind=kind,
            organization_id=organization.pk if organization else None,
            memo=memo,
            created_by_id=created_by.pk if created_by else None,
            metadata=metadata,
            fingerprint=fingerprint,
        )
        if created:
            _entries_apply(txn.pk, legs)
    return txn


@dataclass(frozen=True)
class _Leg:
    """A posting by account id, with the account's two immutable flags (set at creation, never changed)."""

    account_id: int | None
    amount_micros: int
    track_balance: bool
    allow_negative: bool
    code: str


def _check_balanced(legs: Sequence[_Leg], idempotency_key: str) -> None:
    if not legs:
        raise UnbalancedTransaction("a transaction needs at least one entry")
    for leg in legs:
        amount = leg.amount_micros
        if not isinstance(amount, int) or isinstance(amount, bool) or amount == 0:
            raise UnbalancedTransaction(f"entry amount must be a non-zero integer of micros, got {amount!r}")
        if leg.account_id is None:
            raise UnbalancedTransaction("entry account is not saved")
    total = sum(leg.amount_micros for leg in legs)
    if total != 0:
        raise UnbalancedTransaction(f"entries sum to {total} micros, not 0")
    if not idempotency_key or len(idempotency_key) > 200:
        raise LedgerError("an idempotency key of 1 to 200 characters is required")


def _transaction_insert(
    *,
    idempotency_key: str,
    kind: TransactionKind,
    organization_id: int | None,
    memo: str,
    created_by_id: int | None,
    metadata: dict[str, Any] | None,
    fingerprint: str,
) -> tuple[LedgerTransaction, bool]:
    """Insert the transaction row, or find the one holding the key. Returns (transaction, created).

    One statement: ``INSERT … ON CONFLICT (idempotency_key) DO NOTHING RETURNING id``; no row back means
    the key exists (perhaps written by a concurrent posting that committed first), and the original is
    returned if its fingerprint matches, else ``IdempotencyKeyReused``. SQLite (3.35+) and PostgreSQL take
    the same statement.
    """
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quoted_table(LedgerTransaction)} (idempotency_key, kind, organization_id, memo,"
            " fingerprint, metadata, created_at, created_by_id) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
            [
                idempotency_key,
                str(kind),
                organization_id,
                memo[:300],
                fingerprint,
                db_value(LedgerTransaction, "metadata", metadata or {}),
                db_value(LedgerTransaction, "created_at", now),
                created_by_id,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return _same_or_raise(LedgerTransaction.objects.get(idempotency_key=idempotency_key), fingerprint), False
    txn = LedgerTransaction(
        id=row[0],
        idempotency_key=idempotency_key,
        kind=kind,
        organization_id=organization_id,
        memo=memo[:300],
        fingerprint=fingerprint,
        metadata=metadata or {},
        created_at=now,
        created_by_id=created_by_id,
    )
    loaded(txn)
    return txn, True


def _entries_apply(txn_id: int, legs: Sequence[_Leg]) -> None:
    """Write the entries of transaction ``txn_id`` and move the cached balances, inside the caller's block.

    One conditional ``UPDATE`` per tracked account in primary-key order (each takes the row's lock; ``…
    WHERE allow_negative OR balance_micros + delta >= 0``: no row updated raises ``InsufficientFunds`` and
    the caller's ``atomic`` block rolls back), then one multi-row ``INSERT`` of the entries.
    """
    deltas: dict[int, int] = {}
    for leg in legs:
        if leg.track_balance and leg.account_id is not None:
            deltas[leg.account_id] = deltas.get(leg.account_id, 0) + leg.amount_micros
    codes = {leg.account_id: leg.code for leg in legs}
    with connection.cursor() as cursor:
        for account_id in sorted(deltas):
            delta = deltas[account_id]
            cursor.execute(
                f"UPDATE {quoted_table(LedgerAccount)} SET balance_micros = balance_micros + %s"
                " WHERE id = %s AND (allow_negative OR balance_micros + %s >= 0)",
                [delta, account_id, delta],
            )
            if cursor.rowcount != 1:
                balance = LedgerAccount.objects.get(pk=account_id).balance_micros
                raise InsufficientFunds(
                    f"account {codes[account_id]} holds {format_cny(balance, 6)} CNY, "
                    f"cannot take {format_cny(-delta, 6)} CNY",
                    available_micros=balance,
                    requested_micros=-delta,
                )
        cursor.execute(
            f"INSERT INTO {quoted_table(LedgerEntry)} (transaction_id, account_id, amount_micros) VALUES "
            + ", ".join(["(%s, %s, %s)"] * len(legs)),
            [value for leg in legs for value in (txn_id, leg.account_id, leg.amount_micros)],
        )


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
    fingerprint = _fingerprint(
        {
            "kind": str(kind),
            "org": organization.pk,
            "amount": amount_micros,
            "to": destination.value,
            "wallets": sorted(credit_wallets),
        }
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


@dataclass(frozen=True)
class BulkPosting:
    """One balanced transaction of a ``ledger_post_many`` call: ``legs`` are (account id, signed micros)."""

    idempotency_key: str
    kind: TransactionKind
    organization_id: int
    memo: str
    metadata: dict[str, Any]
    created_at: datetime
    legs: tuple[tuple[int, int], ...]


def ledger_post_many(*, postings: Sequence[BulkPosting], tracked_account_ids: set[int]) -> dict[str, int]:
    """Post many balanced transactions in a few statements — the set-based twin of ``ledger_post`` for the
    metering tick. Returns {idempotency key: transaction id}.

    Must run inside ``transaction.atomic`` with the wallets of every organization concerned locked by the
    caller (``wallet_lock`` or the tick's one-statement lock), the caller having computed the legs from the
    balances read under that lock. Each posting is checked balanced (``UnbalancedTransaction``); keys are
    unique by constraint: a key already used raises ``IdempotencyKeyReused`` (the caller rolls back — it
    means another writer got there first). Cached balances of ``tracked_account_ids`` move in one
    conditional ``UPDATE`` per statement set (never below zero for accounts that may not go negative, else
    ``InsufficientFunds``). ``created_at`` is the posting time (the metering tick posts a minute in the
    month it was used).
    """
    from billing.bulk import bulk_insert

    if not postings:
        return {}
    for p in postings:
        _check_balanced([_Leg(a, m, a in tracked_account_ids, True, str(a)) for a, m in p.legs], p.idempotency_key)
    returned = bulk_insert(
        quoted_table(LedgerTransaction),
        [("idempotency_key", "text"), ("kind", "text"), ("organization_id", "bigint"), ("memo", "text"),
         ("fingerprint", "text"), ("metadata", "jsonb"), ("created_at", "timestamptz")],
        [(p.idempotency_key, str(p.kind), p.organization_id, p.memo[:300],
          _fingerprint({"kind": str(p.kind), "org": p.organization_id, "postings": sorted(p.legs)}), p.metadata,
          p.created_at) for p in postings],
        suffix="ON CONFLICT (idempotency_key) DO NOTHING", returning="idempotency_key, id",
    )
    ids = {key: int(txn_id) for key, txn_id in returned}
    if len(ids) != len(postings):
        taken = next(p.idempotency_key for p in postings if p.idempotency_key not in ids)
        raise IdempotencyKeyReused(f"idempotency key {taken!r} was already used")
    bulk_insert(quoted_table(LedgerEntry), [("transaction_id", "bigint"), ("account_id", "bigint"),
                                            ("amount_micros", "bigint")],
                [(ids[p.idempotency_key], account, micros) for p in postings for account, micros in p.legs])
    deltas: dict[int, int] = {}
    for p in postings:
        for account, micros in p.legs:
            if account in tracked_account_ids:
                deltas[account] = deltas.get(account, 0) + micros
    accounts = quoted_table(LedgerAccount)
    items = sorted(deltas.items())
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {accounts} a SET balance_micros = a.balance_micros + v.d FROM unnest(%s::bigint[],"
                " %s::bigint[]) AS v(id, d) WHERE a.id = v.id AND (a.allow_negative OR a.balance_micros + v.d >= 0)",
                [[a for a, _ in items], [d for _, d in items]],
            )
            updated = cursor.rowcount
        else:
            updated = 0
            for account, delta in items:
                cursor.execute(f"UPDATE {accounts} SET balance_micros = balance_micros + %s WHERE id = %s"
                               " AND (allow_negative OR balance_micros + %s >= 0)", [delta, account, delta])
                updated += cursor.rowcount
    if updated != len(items):
        raise InsufficientFunds("a bulk posting would take an account below zero")
    return ids
