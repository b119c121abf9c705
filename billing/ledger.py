"""The ledger core: double-entry postings with idempotency keys, one at a time (``ledger_post``) or many in a
few statements (``ledger_post_many``, the metering tick). Every posting writes through the same two steps —
``_transaction_insert`` (the row that holds the idempotency key) and ``_entries_apply`` (entries and cached
balances) — which ``billing.services.wallet_spend`` shares.

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

from billing.choices import AccountKind, SystemAccount, TransactionKind
from billing.models import LedgerAccount, LedgerEntry, LedgerTransaction
from billing.money import format_cny
from portal.db import db_value, loaded, quoted_table
from portal.lib.coded_text import coded_fields

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
    the same statement. A ``memo`` made by ``billing.memos.memo`` stores its code and params beside the text.
    """
    now = timezone.now()
    memo_code, memo_params = coded_fields(memo)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quoted_table(LedgerTransaction)} (idempotency_key, kind, organization_id, memo,"
            " memo_code, memo_params, fingerprint, metadata, created_at, created_by_id)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
            [
                idempotency_key,
                str(kind),
                organization_id,
                memo[:300],
                memo_code,
                db_value(LedgerTransaction, "memo_params", memo_params),
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
        memo_code=memo_code,
        memo_params=memo_params,
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
        [
            ("idempotency_key", "text"),
            ("kind", "text"),
            ("organization_id", "bigint"),
            ("memo", "text"),
            ("memo_code", "text"),
            ("memo_params", "jsonb"),
            ("fingerprint", "text"),
            ("metadata", "jsonb"),
            ("created_at", "timestamptz"),
        ],
        [
            (
                p.idempotency_key,
                str(p.kind),
                p.organization_id,
                p.memo[:300],
                *coded_fields(p.memo),
                _fingerprint({"kind": str(p.kind), "org": p.organization_id, "postings": sorted(p.legs)}),
                p.metadata,
                p.created_at,
            )
            for p in postings
        ],
        suffix="ON CONFLICT (idempotency_key) DO NOTHING",
        returning="idempotency_key, id",
    )
    ids = {key: int(txn_id) for key, txn_id in returned}
    if len(ids) != len(postings):
        taken = next(p.idempotency_key for p in postings if p.idempotency_key not in ids)
        raise IdempotencyKeyReused(f"idempotency key {taken!r} was already used")
    bulk_insert(
        quoted_table(LedgerEntry),
        [("transaction_id", "bigint"), ("account_id", "bigint"), ("amount_micros", "bigint")],
        [(ids[p.idempotency_key], account, micros) for p in postings for account, micros in p.legs],
    )
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
                cursor.execute(
                    f"UPDATE {accounts} SET balance_micros = balance_micros + %s WHERE id = %s"
                    " AND (allow_negative OR balance_micros + %s >= 0)",
                    [delta, account, delta],
                )
                updated += cursor.rowcount
    if updated != len(items):
        raise InsufficientFunds("a bulk posting would take an account below zero")
    return ids
