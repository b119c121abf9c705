"""App-call billing in one database round trip per phase on PostgreSQL (issue 15, item 9).

Two PL/pgSQL functions do what ``portal.marketplace.calls.call_reserve`` and ``billing.services.wallet_spend``
(with ``call_settle``'s update of the call) do in Python, statement for statement, so one ``SELECT`` runs each
phase as its own transaction:

- ``billing_call_reserve`` locks the caller's wallet (``FOR UPDATE``, the lock every spend of the
  organization takes), then — each statement after the lock sees what committed before it — reads the paid
  balance and the unexpired grants with money left, the earlier call with the same idempotency key, the open
  reservations and the month's calls, and inserts the ``reserved`` call (or re-reserves a failed one). It
  returns ``(outcome, call id, attempts)``; outcomes other than ``reserved`` write nothing.
- ``billing_call_settle`` locks the caller's wallet, returns the earlier posting of the key when there is one
  (a retry: it stands) or refuses a key used for other content, takes the price from grants (earliest expiry
  first) then paid — or refuses, writing nothing, when they cannot cover it — credits the publisher's share to
  its paid balance and the rest to platform revenue, moves the cached balances in account-id order (never below
  zero), writes the entries and marks the call ``succeeded``.

Outcome ``no_wallet`` (a wallet or system account that does not exist yet) sends the caller to the Python
path, which creates it. The functions are (re)created after every ``migrate`` on PostgreSQL (``install``,
connected in ``billing.apps``) from the models' current table names, so they follow a renamed table.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from django.db import connection, transaction

from portal.lib.coded_text import coded_fields

_RESERVE = """
CREATE OR REPLACE FUNCTION billing_call_reserve(
    p_caller bigint, p_app bigint, p_version bigint, p_user bigint, p_key text, p_sha text, p_price bigint,
    p_share bigint, p_now timestamptz, p_month_start timestamptz, p_cap bigint
) RETURNS TABLE (outcome text, call_id bigint, call_attempts integer) LANGUAGE plpgsql AS $fn$
DECLARE
    v_wallet bigint; v_paid_account bigint; v_paid bigint; v_grants bigint; v_held bigint; v_month bigint;
    v_prev record; v_id bigint; v_attempts integer := 1;
BEGIN
    SELECT w.id, w.paid_account_id INTO v_wallet, v_paid_account FROM {wallet} w
        WHERE w.organization_id = p_caller FOR UPDATE;
    IF NOT FOUND THEN RETURN QUERY SELECT 'no_wallet'::text, NULL::bigint, NULL::integer; RETURN; END IF;
    SELECT balance_micros INTO v_paid FROM {account} WHERE id = v_paid_account;
    SELECT COALESCE(sum(ga.balance_micros), 0) INTO v_grants FROM {grant} g JOIN {account} ga ON ga.id = g.account_id
        WHERE g.wallet_id = v_wallet AND g.expired_at IS NULL AND g.expires_at > p_now AND ga.balance_micros > 0;
    IF p_key IS NOT NULL THEN
        SELECT id, status, request_sha256, attempts INTO v_prev FROM {call}
            WHERE caller_id = p_caller AND app_id = p_app AND idempotency_key = p_key;
        IF FOUND THEN
            IF v_prev.request_sha256 <> p_sha THEN
                RETURN QUERY SELECT 'conflict'::text, v_prev.id, v_prev.attempts; RETURN;
            ELSIF v_prev.status = {succeeded} THEN
                RETURN QUERY SELECT 'replay'::text, v_prev.id, v_prev.attempts; RETURN;
            ELSIF v_prev.status = {reserved} THEN
                RETURN QUERY SELECT 'in_progress'::text, v_prev.id, v_prev.attempts; RETURN;
            END IF;
            v_id := v_prev.id;
            v_attempts := v_prev.attempts + 1;
        END IF;
    END IF;
    SELECT COALESCE(sum(CASE WHEN status = {reserved} THEN price_micros ELSE 0 END), 0),
           COALESCE(sum(CASE WHEN p_month_start IS NOT NULL AND created_at >= p_month_start
                             THEN price_micros ELSE 0 END), 0)
        INTO v_held, v_month FROM {call}
        WHERE caller_id = p_caller AND (status = {reserved}
            OR (p_month_start IS NOT NULL AND status = {succeeded} AND created_at >= p_month_start));
    IF p_cap > 0 AND v_month + p_price > p_cap THEN
        RETURN QUERY SELECT 'cap'::text, NULL::bigint, NULL::integer; RETURN;
    END IF;
    IF p_price > v_paid + v_grants - v_held THEN
        RETURN QUERY SELECT 'refused'::text, NULL::bigint, NULL::integer; RETURN;
    END IF;
    IF v_id IS NULL THEN
        INSERT INTO {call} (app_id, version_id, caller_id, user_id, idempotency_key, request_sha256, status,
            price_micros, publisher_share_micros, attempts, error_code, error, created_at, reserved_at)
        VALUES (p_app, p_version, p_caller, p_user, p_key, p_sha, {reserved}, p_price, p_share, 1, '', '', p_now,
            p_now)
        RETURNING id INTO v_id;
    ELSE
        UPDATE {call} SET status = {reserved}, attempts = v_attempts, version_id = p_version, price_micros = p_price,
            publisher_share_micros = p_share, error = '', error_code = '', finished_at = NULL, reserved_at = p_now
            WHERE id = v_id;
    END IF;
    RETURN QUERY SELECT 'reserved'::text, v_id, v_attempts;
END
$fn$;
"""

_SETTLE = """
CREATE OR REPLACE FUNCTION billing_call_settle(
    p_call bigint, p_caller bigint, p_publisher bigint, p_price bigint, p_share bigint, p_key text, p_kind text,
    p_memo text, p_metadata jsonb, p_fingerprint text, p_now timestamptz, p_response jsonb, p_latency integer,
    p_billed_tokens integer, p_revenue_code text, p_prompt_tokens integer, p_memo_code text, p_memo_params jsonb
) RETURNS TABLE (outcome text, transaction_id bigint, available_micros bigint) LANGUAGE plpgsql AS $fn$
DECLARE
    v_wallet bigint; v_paid_account bigint; v_paid bigint; v_publisher_account bigint; v_revenue bigint;
    v_txn bigint; v_fingerprint text; v_left bigint := p_price; v_take bigint; v_grant record;
    v_accounts bigint[] := '{{}}'; v_amounts bigint[] := '{{}}'; v_row record;
BEGIN
    IF p_price > 0 THEN
        SELECT w.id, w.paid_account_id INTO v_wallet, v_paid_account FROM {wallet} w
            WHERE w.organization_id = p_caller FOR UPDATE;
        IF NOT FOUND THEN RETURN QUERY SELECT 'no_wallet'::text, NULL::bigint, NULL::bigint; RETURN; END IF;
        SELECT id, fingerprint INTO v_txn, v_fingerprint FROM {txn} WHERE idempotency_key = p_key;
        IF FOUND AND v_fingerprint <> p_fingerprint THEN
            RETURN QUERY SELECT 'key_reused'::text, v_txn, NULL::bigint; RETURN;
        END IF;
        IF NOT FOUND THEN
            SELECT id INTO v_revenue FROM {account} WHERE code = p_revenue_code;
            IF p_share > 0 THEN
                SELECT paid_account_id INTO v_publisher_account FROM {wallet} WHERE organization_id = p_publisher;
            END IF;
            IF v_revenue IS NULL OR (p_share > 0 AND v_publisher_account IS NULL) THEN
                RETURN QUERY SELECT 'no_wallet'::text, NULL::bigint, NULL::bigint; RETURN;
            END IF;
            FOR v_grant IN SELECT ga.id, ga.balance_micros FROM {grant} g JOIN {account} ga ON ga.id = g.account_id
                    WHERE g.wallet_id = v_wallet AND g.expired_at IS NULL AND g.expires_at > p_now
                        AND ga.balance_micros > 0
                    ORDER BY g.expires_at, g.id LOOP
                EXIT WHEN v_left = 0;
                v_take := least(v_left, v_grant.balance_micros);
                v_accounts := v_accounts || v_grant.id;
                v_amounts := v_amounts || -v_take;
                v_left := v_left - v_take;
            END LOOP;
            IF v_left > 0 THEN
                SELECT balance_micros INTO v_paid FROM {account} WHERE id = v_paid_account;
                IF v_paid < v_left THEN
                    RETURN QUERY SELECT 'insufficient'::text, NULL::bigint, p_price - v_left + v_paid; RETURN;
                END IF;
                v_accounts := v_accounts || v_paid_account;
                v_amounts := v_amounts || -v_left;
            END IF;
            IF p_price - p_share > 0 THEN
                v_accounts := v_accounts || v_revenue;
                v_amounts := v_amounts || (p_price - p_share);
            END IF;
            IF p_share > 0 THEN
                v_accounts := v_accounts || v_publisher_account;
                v_amounts := v_amounts || p_share;
            END IF;
            INSERT INTO {txn} (idempotency_key, kind, organization_id, memo, memo_code, memo_params, fingerprint,
                metadata, created_at, created_by_id)
            VALUES (p_key, p_kind, p_caller, p_memo, p_memo_code, p_memo_params, p_fingerprint, p_metadata, p_now, NULL)
                RETURNING id INTO v_txn;
            FOR v_row IN SELECT a.id, sum(v.d) AS d FROM unnest(v_accounts, v_amounts) AS v(id, d)
                    JOIN {account} a ON a.id = v.id WHERE a.track_balance GROUP BY a.id ORDER BY a.id LOOP
                UPDATE {account} SET balance_micros = balance_micros + v_row.d
                    WHERE id = v_row.id AND (allow_negative OR balance_micros + v_row.d >= 0);
                IF NOT FOUND THEN
                    RAISE EXCEPTION 'account % cannot take % micro-CNY', v_row.id, -v_row.d;
                END IF;
            END LOOP;
            INSERT INTO {entry} (transaction_id, account_id, amount_micros)
                SELECT v_txn, v.id, v.d FROM unnest(v_accounts, v_amounts) WITH ORDINALITY AS v(id, d, n) ORDER BY n;
        END IF;
    END IF;
    UPDATE {call} SET status = {succeeded}, response = p_response, latency_ms = p_latency, finished_at = p_now,
        ledger_transaction_id = v_txn, price_micros = p_price, publisher_share_micros = p_share,
        billed_tokens = p_billed_tokens, prompt_tokens = p_prompt_tokens
        WHERE id = p_call;
    RETURN QUERY SELECT 'ok'::text, v_txn, NULL::bigint;
END
$fn$;
"""


# The settle functions before it recorded prompt tokens (issue 29) and before it stored the memo's code (issue
# 25): a new argument list is another function in PostgreSQL, so the old ones are dropped rather than left beside.
_DROP_OLD_SETTLE = (
    "DROP FUNCTION IF EXISTS billing_call_settle(bigint, bigint, bigint, bigint, bigint, text, text, text, jsonb,"
    " text, timestamptz, jsonb, integer, integer, text)",
    "DROP FUNCTION IF EXISTS billing_call_settle(bigint, bigint, bigint, bigint, bigint, text, text, text, jsonb,"
    " text, timestamptz, jsonb, integer, integer, text, integer)",
)


def _sql(template: str) -> str:
    from billing.models import CreditGrant, LedgerAccount, LedgerEntry, LedgerTransaction, Wallet
    from portal.db import quoted_table
    from portal.marketplace.choices import CallStatus
    from portal.marketplace.models import AppCall

    return template.format(
        wallet=quoted_table(Wallet),
        account=quoted_table(LedgerAccount),
        grant=quoted_table(CreditGrant),
        txn=quoted_table(LedgerTransaction),
        entry=quoted_table(LedgerEntry),
        call=quoted_table(AppCall),
        reserved=f"'{CallStatus.RESERVED.value}'",
        succeeded=f"'{CallStatus.SUCCEEDED.value}'",
    )


def install(using: str = "default", **_: Any) -> None:
    """Create or replace both functions on a PostgreSQL database (a ``post_migrate`` receiver)."""
    from django.db import connections

    db = connections[using]
    if db.vendor != "postgresql":
        return
    with db.cursor() as cursor:
        cursor.execute(_sql(_RESERVE))
        for drop in _DROP_OLD_SETTLE:
            cursor.execute(drop)
        cursor.execute(_sql(_SETTLE))


def _own_transaction() -> AbstractContextManager[Any]:
    """Nothing in autocommit mode (the statement is its transaction: one round trip); a savepoint inside an outer
    transaction, so a failed call leaves that transaction usable, as the Python path's ``atomic`` blocks do."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def call_reserve_sql(params: list[Any]) -> tuple[str, int | None, int | None]:
    """Run ``billing_call_reserve`` (one round trip): (outcome, call id, attempts)."""
    with _own_transaction(), connection.cursor() as cursor:
        cursor.execute("SELECT * FROM billing_call_reserve(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", params)
        outcome, call_id, attempts = cursor.fetchone()
    return outcome, call_id, attempts


def call_settle_sql(params: list[Any]) -> tuple[str, int | None, int | None]:
    """Run ``billing_call_settle`` (one round trip): (outcome, ledger transaction id or None, micro-CNY the
    wallet could spend when the outcome is ``insufficient``). ``params`` are the function's arguments up to
    ``p_prompt_tokens``; the memo (``p_memo``, a ``billing.memos.memo``) is stored as its English text, and its
    code and params go in the last two arguments, as ``billing.ledger`` stores them."""
    code, memo_params = coded_fields(params[7])
    params = [*params[:7], str(params[7])[:300], *params[8:], code, json.dumps(memo_params)]
    with _own_transaction(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT * FROM billing_call_settle(%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s::jsonb, %s,"
            " %s, %s, %s, %s, %s::jsonb)",
            params,
        )
        outcome, txn_id, available = cursor.fetchone()
    return outcome, txn_id, available
