"""Calling an app and billing the call per request (issue 7, part 3).

A call is *reserved* before the backend is called — an ``AppCall`` row in state ``reserved``, written
under the caller's wallet lock only if the wallet's spendable money minus all its open reservations covers
the price — and *posted* only when the call succeeds: one balanced ledger transaction (the caller's grants
first, then paid → platform revenue, plus the publisher's share credited to the publisher's paid balance).
A failed or timed-out call releases its reservation and costs nothing. The same ``Idempotency-Key`` makes a
retried call run and cost once: a succeeded call is replayed, a failed one runs again on the same row.

An app priced per 1,000 tokens as well (``price_per_1k_tokens_micros``) charges for the tokens its output
reports in ``tokens`` (a model published from a checkpoint: the generated tokens), rounded up to the
micro-CNY. The OpenAI-compatible API (``portal.marketplace.completions``) reserves and settles through the same
``call_reserve`` / ``call_settle`` with prompt tokens too (``price_per_1k_prompt_tokens_micros``); one rule prices
both, ``token_price_micros``. The call holds the price of its token allowance — the request's
``max_new_tokens`` when it gives one, at most ``APP_MAX_BILLED_TOKENS`` — and is charged for at most that many
tokens; an output without an integer ``tokens`` is invalid output (nothing charged).

A publisher's calls of its own app cost only the platform's part: the price less the share it would credit
to itself. A reservation whose process died (no answer recorded ``APP_CALL_TIMEOUT_S`` + 2 minutes after it
was made) is released by ``calls_release_stale`` (beat, every minute), so it holds no money for ever.

Billing runs on every call (``benchmarks/app_call_bench.py`` measures it). On PostgreSQL each phase is one
round trip and its own transaction: ``billing_call_reserve`` and ``billing_call_settle`` (``billing.call_sql``)
do the statements below inside the database. Elsewhere (SQLite), and where a wallet must first be created,
reserving is the wallet lock and its balance (``billing.services.wallet_lock``), the key lookup, the
open-reservation sum and one ``INSERT``; posting is ``billing.services.wallet_spend`` and one ``UPDATE`` of the
call. A test runs both ways and compares every row (``tests/billing/test_call_sql.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.call_sql import call_reserve_sql, call_settle_sql
from billing.choices import SystemAccount, TransactionKind
from billing.memos import memo
from billing.models import LedgerTransaction
from billing.money import format_cny
from billing.services import IdempotencyKeyReused, InsufficientFunds, spend_fingerprint, wallet_lock, wallet_spend
from portal.db import db_value, loaded, quoted_table, set_based_paths
from portal.marketplace import serving
from portal.marketplace.choices import AppState, CallStatus
from portal.marketplace.models import App, AppCall, AppVersion
from portal.marketplace.pricing import list_price_micros, own_share_micros
from portal.marketplace.services import (
    MAX_KEY_LENGTH,
    CallFailed,
    CallInProgress,
    CallRefused,
    IdempotencyConflict,
    InputInvalid,
    MarketplaceError,
    MonthlyCapReached,
    request_hash,
)
from portal.models import Organization, User
from portal.permissions import Action, authorize
from portal.webhooks.services import webhook_emit

if TYPE_CHECKING:
    import jsonschema


@dataclass(frozen=True)
class CallResult:
    """What ``app_invoke`` returns: the call row, the backend's output, and whether it was a replay of an
    earlier successful call with the same ``Idempotency-Key``."""

    call: AppCall
    output: dict[str, Any]
    replayed: bool


def validation_error(schema: dict[str, Any], data: Any) -> jsonschema.ValidationError | None:
    """The most relevant JSON Schema (draft 2020-12) error of ``data``, or None when it is valid.

    ``jsonschema`` is imported here, when a call is checked, not with the module: its optional format checkers
    (``rfc3987_syntax``, which jupyterlab's dependencies install) build a grammar at import, ~1.4 s of CPU that every
    Django process (web, each worker, each ``manage.py``) paid at start."""
    import jsonschema

    try:
        return jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    except RecursionError:
        return jsonschema.ValidationError("the document is nested too deeply")


def token_allowance(app: App, payload: Any) -> int:
    """Tokens a call of ``app`` may be charged for: 0 for an app without a per-token price, else the request's
    ``max_new_tokens`` (a positive integer) capped at ``APP_MAX_BILLED_TOKENS``, or that setting."""
    if not app.price_per_1k_tokens_micros:
        return 0
    cap = int(settings.APP_MAX_BILLED_TOKENS)
    asked = payload.get("max_new_tokens") if isinstance(payload, dict) else None
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        return min(asked, cap)
    return cap


def token_price_micros(app: App, *, prompt_tokens: int, completion_tokens: int, caller: Organization) -> int:
    """Price of one call of ``app`` by ``caller`` with ``prompt_tokens`` in and ``completion_tokens`` out, in
    micro-CNY — the one pricing rule of app calls: the listed price (:func:`list_price_micros`) — less the
    publisher's share (:func:`own_share_micros`) when the caller is the publisher itself."""
    full = list_price_micros(app, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return full - own_share_micros(app, full) if caller.pk == app.publisher_id else full


def call_price_micros(app: App, tokens: int, caller: Organization) -> int:
    """Price of one call of ``app`` by ``caller`` that is charged for ``tokens`` completion tokens and no prompt
    tokens (``invoke``), in micro-CNY (``token_price_micros``)."""
    return token_price_micros(app, prompt_tokens=0, completion_tokens=tokens, caller=caller)


def publisher_share_micros(app: App, caller: Organization, price_micros: int) -> int:
    """The publisher's share of ``price_micros`` (``publisher_share_bps``, rounded down; 0 on its own calls)."""
    return own_share_micros(app, price_micros) if app.publisher_id != caller.pk else 0


def monthly_cap_micros(organization: Organization) -> int:
    """The organization's monthly cap on app calls in micro-CNY (0 = none): its own
    ``app_monthly_cap_micros`` when set, else the platform default ``APP_MONTHLY_CAP_MICROS``."""
    own = organization.app_monthly_cap_micros
    return int(own) if own is not None else int(settings.APP_MONTHLY_CAP_MICROS)


def month_start(now: datetime) -> datetime:
    """The first instant of ``now``'s calendar month in the portal's time zone (monthly caps reset then)."""
    local = now.astimezone(timezone.get_default_timezone())
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def held_and_month_micros(organization: Organization, since: datetime | None) -> tuple[int, int]:
    """(micro-CNY held by the organization's open reservations, micro-CNY its calls cost since ``since``) —
    the second counts succeeded calls at their price and open ones at what they hold, created since
    ``since`` (the month's start: what the monthly cap is checked against); 0 when ``since`` is None. One
    statement, run inside the reservation's transaction or alone (the calls page)."""
    calls = quoted_table(AppCall)
    with connection.cursor() as cursor:
        if since is None:
            cursor.execute(
                f"SELECT COALESCE(SUM(price_micros), 0) FROM {calls} WHERE caller_id = %s AND status = %s",
                [organization.pk, CallStatus.RESERVED.value],
            )
            return int(cursor.fetchone()[0]), 0
        after = db_value(AppCall, "created_at", since)
        cursor.execute(
            "SELECT COALESCE(SUM(CASE WHEN status = %s THEN price_micros ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN created_at >= %s THEN price_micros ELSE 0 END), 0)"
            f" FROM {calls} WHERE caller_id = %s AND (status = %s OR (status = %s AND created_at >= %s))",
            [
                CallStatus.RESERVED.value,
                after,
                organization.pk,
                CallStatus.RESERVED.value,
                CallStatus.SUCCEEDED.value,
                after,
            ],
        )
        held, month = cursor.fetchone()
    return int(held), int(month)


def app_invoke(
    *,
    app: App,
    caller: Organization,
    user: User | None,
    payload: Any,
    idempotency_key: str | None = None,
    fail_after_reserve: Exception | None = None,
) -> CallResult:
    """Call ``app`` with ``payload`` for ``caller`` and bill it (see the module docstring).

    Raises ``PermissionRefused`` (403) when the user's role may not call apps, ``InputInvalid`` (422, with
    the JSON path), ``CallRefused`` / ``MonthlyCapReached`` (402),
    ``CallInProgress`` / ``IdempotencyConflict`` (409) before anything is reserved; ``CallFailed`` (502 /
    504) after releasing the reservation. ``fail_after_reserve`` is a test hook that raises inside the
    call after the reservation, as a crash of the forwarding step would.
    """
    authorize(user=user, organization=caller, action=Action.APPS_INVOKE)
    publisher_testing = caller.pk == app.publisher_id and app.state in (AppState.DRAFT, AppState.IN_REVIEW)
    if app.state != AppState.PUBLISHED and not publisher_testing:  # publishers may try their app before review
        raise MarketplaceError(_("This app is not published."), details={"state": app.state})
    error = validation_error(app.input_schema, payload)
    if error is not None:
        path = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        message = error.message if len(error.message) <= 300 else error.message[:300] + "…"  # never echo big input
        raise InputInvalid(
            _("The input does not match the app's schema at %(path)s: %(message)s")
            % {"path": path, "message": message},
            details={"path": path, "message": message, "validator": error.validator},
        )
    version = app.versions.filter(active=True).first()
    if version is None:
        raise MarketplaceError(_("The app has no ready version."))
    if idempotency_key is not None and not 1 <= len(idempotency_key) <= MAX_KEY_LENGTH:
        bad_key = MarketplaceError(_("An Idempotency-Key has 1 to %(n)d characters.") % {"n": MAX_KEY_LENGTH})
        bad_key.code = "invalid_idempotency_key"
        raise bad_key
    allowance = token_allowance(app, payload)
    hold = call_price_micros(app, allowance, caller)

    reserved = call_reserve(
        app=app,
        version=version,
        caller=caller,
        user=user,
        idempotency_key=idempotency_key,
        request_sha256=request_hash(payload),
        price_micros=hold,
        share_micros=publisher_share_micros(app, caller, hold),
    )
    if isinstance(reserved, CallResult):
        return reserved
    call = reserved
    started = time.perf_counter()
    try:
        if fail_after_reserve is not None:
            raise fail_after_reserve
        output = serving.forward(
            version=version, payload=payload, call_id=call.pk, timeout_s=settings.APP_CALL_TIMEOUT_S
        )
        bad = validation_error(app.output_schema, output)
        if bad is not None:
            raise serving.BackendError(_("the output does not match the app's schema: %(m)s") % {"m": bad.message})
        tokens = output.get("tokens") if isinstance(output, dict) else None
        if allowance and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
            raise serving.BackendError(_("the app is priced per token but its output has no integer `tokens` count"))
    except serving.BackendTimeout as exc:
        call_release(call=call, code="backend_timeout", message=str(exc), started=started)
        err = CallFailed(_("The app did not answer in time (%(e)s); nothing was charged.") % {"e": exc})
        err.code, err.status = "backend_timeout", 504
        raise err from exc
    except Exception as exc:  # any failure after the reservation releases it
        call_release(call=call, code="backend_error", message=str(exc), started=started)
        err = CallFailed(_("The app failed: %(e)s; nothing was charged.") % {"e": exc})
        err.code = "backend_error"
        raise err from exc
    billed = min(tokens, allowance) if allowance and isinstance(tokens, int) else None
    try:
        call_settle(call=call, app=app, output=output, started=started, billed_tokens=billed)
    except CallRefused:
        raise
    except Exception as exc:  # the posting failed (nothing was committed): release, charge nothing
        call_release(call=call, code="settle_failed", message=f"{type(exc).__name__}: {exc}", started=started)
        err = CallFailed(_("The call could not be recorded (%(e)s); nothing was charged.") % {"e": type(exc).__name__})
        err.code = "settle_failed"
        raise err from exc
    return CallResult(call=call, output=output, replayed=False)


def call_reserve(
    *,
    app: App,
    version: AppVersion,
    caller: Organization,
    user: User | None,
    idempotency_key: str | None,
    request_sha256: str,
    price_micros: int,
    share_micros: int,
) -> AppCall | CallResult:
    """Reserve ``price_micros`` for one call in one transaction and return the ``reserved`` call row.

    Under the caller's wallet lock: a known ``idempotency_key`` returns the earlier success as a
    ``CallResult`` (replay), raises ``IdempotencyConflict`` for another request or ``CallInProgress`` while
    it runs, and reuses a failed call's row (``attempts`` + 1); then the monthly cap
    (``monthly_cap_micros``: succeeded and open calls since the month's start, ``MonthlyCapReached``)
    and the balance (spendable minus open reservations, ``CallRefused``) are checked. Nothing is written
    when it raises.
    """
    now = timezone.now()
    cap = monthly_cap_micros(caller)
    if set_based_paths():  # one round trip: billing.call_sql
        outcome, sql_call_id, sql_attempts = call_reserve_sql(
            [
                caller.pk,
                app.pk,
                version.pk,
                user.pk if user else None,
                idempotency_key or None,
                request_sha256,
                price_micros,
                share_micros,
                now,
                month_start(now) if cap else None,
                cap,
            ]
        )
        if outcome == "replay" and sql_call_id is not None:  # the call's id comes with this outcome
            done = AppCall.objects.get(pk=sql_call_id)
            return CallResult(call=done, output=done.response or {}, replayed=True)
        if outcome == "reserved" and sql_call_id is not None and sql_attempts is not None:  # both come with it
            return _reserved_call(
                sql_call_id, sql_attempts, app, version, caller, user, idempotency_key, request_sha256, now,
                price_micros, share_micros,
            )  # fmt: skip
        if outcome != "no_wallet":  # no wallet yet: the path below creates it
            _refuse(outcome, price_micros)
    calls = quoted_table(AppCall)
    with transaction.atomic(), connection.cursor() as cursor:
        wallet = wallet_lock(organization=caller, now=now)
        previous = None
        if idempotency_key:
            cursor.execute(
                f"SELECT id, status, request_sha256, attempts FROM {calls}"
                " WHERE caller_id = %s AND app_id = %s AND idempotency_key = %s",
                [caller.pk, app.pk, idempotency_key],
            )
            previous = cursor.fetchone()
            if previous is not None:
                if previous[2] != request_sha256:
                    _refuse("conflict", price_micros)
                if previous[1] == CallStatus.SUCCEEDED:
                    done = AppCall.objects.get(pk=previous[0])
                    return CallResult(call=done, output=done.response or {}, replayed=True)
                if previous[1] == CallStatus.RESERVED:
                    _refuse("in_progress", price_micros)
        open_micros, month_micros = held_and_month_micros(caller, month_start(now) if cap else None)
        if cap and month_micros + price_micros > cap:
            _refuse("cap", price_micros)
        if price_micros > wallet.spendable_micros - int(open_micros):
            _refuse("refused", price_micros)
        attempts = 1
        if previous is None:
            cursor.execute(
                f"INSERT INTO {calls} (app_id, version_id, caller_id, user_id, idempotency_key, request_sha256,"
                " status, price_micros, publisher_share_micros, attempts, error_code, error, created_at,"
                " reserved_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 1, '', '', %s, %s) RETURNING id",
                [
                    app.pk,
                    version.pk,
                    caller.pk,
                    user.pk if user else None,
                    idempotency_key or None,
                    request_sha256,
                    CallStatus.RESERVED.value,
                    price_micros,
                    share_micros,
                    db_value(AppCall, "created_at", now),
                    db_value(AppCall, "reserved_at", now),
                ],
            )
            call_id = cursor.fetchone()[0]
        else:  # a retry of a failed call with the same key
            call_id, attempts = previous[0], previous[3] + 1
            cursor.execute(
                f"UPDATE {calls} SET status = %s, attempts = %s, version_id = %s, price_micros = %s,"
                " publisher_share_micros = %s, error = '', error_code = '', finished_at = NULL, reserved_at = %s"
                " WHERE id = %s",
                [
                    CallStatus.RESERVED.value,
                    attempts,
                    version.pk,
                    price_micros,
                    share_micros,
                    db_value(AppCall, "reserved_at", now),
                    call_id,
                ],
            )
    return _reserved_call(
        call_id, attempts, app, version, caller, user, idempotency_key, request_sha256, now, price_micros, share_micros
    )


def _refuse(outcome: str, price_micros: int) -> NoReturn:
    """Raise the refusal of a reservation ``outcome`` (the Python path's and ``billing_call_reserve``'s)."""
    if outcome == "conflict":
        raise IdempotencyConflict(_("This Idempotency-Key was used for a different request."))
    if outcome == "in_progress":
        raise CallInProgress(_("A call with this Idempotency-Key is still running."))
    if outcome == "cap":
        raise MonthlyCapReached(_("This organization's monthly cap on app calls is reached."))
    raise CallRefused(
        _("The wallet cannot cover this call (%(p)s CNY); top up first.") % {"p": format_cny(price_micros, 6)}
    )


def _reserved_call(
    call_id: int,
    attempts: int,
    app: App,
    version: AppVersion,
    caller: Organization,
    user: User | None,
    idempotency_key: str | None,
    request_sha256: str,
    now: datetime,
    price_micros: int,
    share_micros: int,
) -> AppCall:
    """The ``reserved`` call row as written, without reading it back."""
    call = AppCall(
        id=call_id,
        app=app,
        version=version,
        caller=caller,
        user=user,
        idempotency_key=idempotency_key or None,
        request_sha256=request_sha256,
        status=CallStatus.RESERVED,
        price_micros=price_micros,
        publisher_share_micros=share_micros,
        attempts=attempts,
        created_at=now,
        reserved_at=now,
    )
    loaded(call)
    return call


def call_settle(
    *,
    call: AppCall,
    app: App,
    output: dict[str, Any],
    started: float,
    billed_tokens: int | None = None,
    prompt_tokens: int | None = None,
) -> AppCall:
    """Post a succeeded call's price and mark it ``succeeded`` in one transaction; updates ``call``.

    The price is the held ``call.price_micros`` for an app priced per call only; with ``billed_tokens``
    (completion tokens, at most the allowance the hold was computed for) and ``prompt_tokens`` it is
    ``token_price_micros(app, prompt_tokens, billed_tokens)``, and the publisher's share follows it. Both counts
    are recorded on the call and in the posting's metadata (``tokens``, ``prompt_tokens``).

    The posting's idempotency key is ``app-call:<call id>``. If the wallet no longer covers the price (a
    grant expired, or GPU metering spent it meanwhile) the call is released and ``CallRefused`` raised:
    nothing is charged.
    """
    latency_ms = int((time.perf_counter() - started) * 1000)
    finished = timezone.now()
    price, share = call.price_micros, call.publisher_share_micros
    if billed_tokens is not None or prompt_tokens is not None:
        price = token_price_micros(
            app, prompt_tokens=prompt_tokens or 0, completion_tokens=billed_tokens or 0, caller=call.caller
        )
        share = publisher_share_micros(app, call.caller, price)
    metadata: dict[str, Any] = {"app": app.slug, "call": call.pk, "tokens": billed_tokens}
    if prompt_tokens is not None:
        metadata["prompt_tokens"] = prompt_tokens
    if set_based_paths() and _settle_sql(
        call=call, app=app, output=output, started=started, finished=finished, latency_ms=latency_ms,
        price=price, share=share, billed_tokens=billed_tokens, prompt_tokens=prompt_tokens, metadata=metadata,
    ):  # fmt: skip
        return call
    try:
        with transaction.atomic():
            txn = (
                wallet_spend(
                    organization=call.caller,
                    amount_micros=price,
                    idempotency_key=f"app-call:{call.pk}",
                    kind=TransactionKind.APP_CALL,
                    memo=memo("app_call", name=app.name),
                    credit_wallets=[(app.publisher_id, share)] if share else (),
                    metadata=metadata,
                )
                if price
                else None
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {quoted_table(AppCall)} SET status = %s, response = %s, latency_ms = %s,"
                    " finished_at = %s, ledger_transaction_id = %s, price_micros = %s,"
                    " publisher_share_micros = %s, billed_tokens = %s, prompt_tokens = %s WHERE id = %s",
                    [
                        CallStatus.SUCCEEDED.value,
                        db_value(AppCall, "response", output),
                        latency_ms,
                        db_value(AppCall, "finished_at", finished),
                        txn.pk if txn else None,
                        price,
                        share,
                        billed_tokens,
                        prompt_tokens,
                        call.pk,
                    ],
                )
    except InsufficientFunds as exc:
        call_release(call=call, code="insufficient_funds", message=str(exc), started=started)
        raise CallRefused(_("The wallet no longer covers this call; nothing was charged.")) from exc
    call.status, call.response, call.latency_ms, call.finished_at = CallStatus.SUCCEEDED, output, latency_ms, finished
    call.price_micros, call.publisher_share_micros, call.billed_tokens = price, share, billed_tokens
    call.prompt_tokens = prompt_tokens
    call.ledger_transaction_id = txn.pk if txn else None
    return call


def _settle_sql(
    *,
    call: AppCall,
    app: App,
    output: dict[str, Any],
    started: float,
    finished: datetime,
    latency_ms: int,
    price: int,
    share: int,
    billed_tokens: int | None,
    prompt_tokens: int | None,
    metadata: dict[str, Any],
) -> bool:
    """``call_settle`` in one round trip (``billing_call_settle``); updates ``call`` and returns True, or False
    when a wallet or account must first be created by the Python path. Raises as ``call_settle`` does."""
    key = f"app-call:{call.pk}"
    credit = [(app.publisher_id, share)] if share else []
    outcome, txn_id, available = call_settle_sql(
        [
            call.pk,
            call.caller_id,
            app.publisher_id,
            price,
            share,
            key,
            TransactionKind.APP_CALL.value,
            memo("app_call", name=app.name),  # its code and params are stored beside it (call_settle_sql)
            db_value(LedgerTransaction, "metadata", metadata),
            spend_fingerprint(
                kind=TransactionKind.APP_CALL,
                organization_id=call.caller_id,
                amount_micros=price,
                destination=SystemAccount.REVENUE,
                credit_wallets=credit,
            ),
            finished,
            db_value(AppCall, "response", output),
            latency_ms,
            billed_tokens,
            SystemAccount.REVENUE.value,
            prompt_tokens,
        ]
    )
    if outcome == "no_wallet":
        return False
    if outcome == "insufficient":
        message = f"balance {format_cny(available or 0)} CNY cannot cover {format_cny(price)} CNY"  # as wallet_spend
        call_release(call=call, code="insufficient_funds", message=message, started=started)
        raise CallRefused(_("The wallet no longer covers this call; nothing was charged."))
    if outcome == "key_reused":
        raise IdempotencyKeyReused(f"idempotency key {key!r} was already used for a different transaction")
    call.status, call.response, call.latency_ms, call.finished_at = CallStatus.SUCCEEDED, output, latency_ms, finished
    call.price_micros, call.publisher_share_micros, call.billed_tokens = price, share, billed_tokens
    call.prompt_tokens = prompt_tokens
    call.ledger_transaction_id = txn_id
    return True


def call_release(*, call: AppCall, code: str, message: str, started: float) -> None:
    """Release a reserved call: mark it ``failed`` with ``code`` and ``message``; nothing was charged."""
    latency_ms = int((time.perf_counter() - started) * 1000)
    AppCall.objects.filter(pk=call.pk, status=CallStatus.RESERVED).update(
        status=CallStatus.FAILED,
        error_code=code,
        error=message[:2000],
        finished_at=timezone.now(),
        latency_ms=latency_ms,
    )
    call.status, call.error_code, call.error, call.latency_ms = CallStatus.FAILED, code, message[:2000], latency_ms
    webhook_emit(
        organization=call.caller,
        event_type="app_call.failed",
        data={"call_id": call.pk, "app": call.app.slug, "error_code": code, "message": message[:300]},
    )


STALE_AFTER = timedelta(minutes=2)  # beyond APP_CALL_TIMEOUT_S: the reserving process is gone


def calls_release_stale(*, now: datetime | None = None) -> int:
    """Release reservations older than ``APP_CALL_TIMEOUT_S`` + ``STALE_AFTER`` (the process that made them died
    before recording an answer): they become ``failed`` with ``error_code`` ``expired`` and hold nothing. A call
    still running cannot be that old (the backend's timeout ends it first). Returns how many were released.
    Safe to run twice (it only touches rows still ``reserved``)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=int(settings.APP_CALL_TIMEOUT_S)) - STALE_AFTER
    return (
        AppCall.objects.filter(status=CallStatus.RESERVED)
        .filter(Q(reserved_at__lt=cutoff) | Q(reserved_at__isnull=True, created_at__lt=cutoff))
        .update(
            status=CallStatus.FAILED,
            error_code="expired",
            finished_at=now,
            error="no answer was recorded for this call (its worker stopped); nothing was charged",
        )
    )
