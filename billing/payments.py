"""Top-ups through Stripe Checkout and the Stripe webhook handler.

Flow: ``topup_create`` stores a ``TopUp`` with its Stripe idempotency key (``topup:<uuid>``), commits, then
creates the Checkout Session with that key. Money arrives only through ``stripe_event_handle`` for a verified
``checkout.session.completed`` (``payment_status == "paid"``) or ``checkout.session.async_payment_succeeded``
whose session id is the stored ``stripe_session_id`` of a top-up, with the same organization, top-up id
(``client_reference_id`` / metadata), amount and currency; anything else is a ``PaymentMismatch``: the event
is stored as failed with the reason, audited for staff, and nothing is credited. The ledger posting's key
``topup:<id>`` makes any number of deliveries credit once.

Every event of one payment (completion, async success / failure, refunds, disputes opened / closed) first
takes the lock of its payment intent (``StripePayment``, ``INSERT … ON CONFLICT DO NOTHING`` then
``SELECT … FOR UPDATE``), so they serialize and any interleaving gives the same ledger. ``charge.refunded``
and ``charge.dispute.created`` debit the paid balance; one that arrives before its payment's completion
waits in ``PaymentReversal`` and is applied right after the credit — and ``payment_reversals_sweep`` (Celery
beat) applies any reversal still unapplied whose payment is paid. A dispute closed as won credits back what
it debited; a lost one stays debited. ``checkout.session.async_payment_failed`` marks the top-up failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.utils import timezone

from billing import stripe_gateway
from billing.choices import StripeEventStatus, SystemAccount, TopUpStatus, TransactionKind
from billing.memos import memo as coded_memo
from billing.models import PaymentReversal, StripeEvent, StripePayment, TopUp, Wallet
from billing.money import MoneyError, format_cny, to_micros
from billing.services import LedgerError, Posting, ledger_post, system_account, wallet_top_up
from portal.audit import audit_log
from portal.db import db_value, quoted_table
from portal.models import Organization, User
from portal.permissions import Action, authorize
from portal.webhooks.services import webhook_emit

MICROS_PER_FEN = 10_000
#: Longest API ``Idempotency-Key`` stored on a top-up (as for app calls and publish requests).
MAX_REQUEST_KEY_LENGTH = 200


class TopUpError(ValueError):
    """An amount outside the allowed range or not in whole fen; nothing is created."""


class TopUpKeyReused(ValueError):
    """The API's ``Idempotency-Key`` was used before by this organization with another request body (409)."""


class PaymentMismatch(ValueError):
    """A verified Stripe event that does not match what the portal created (unknown session, another
    organization or top-up, another amount or currency): stored as a failed event, audited, never credited."""

    def __init__(self, message: str, *, organization_id: int | None = None) -> None:
        super().__init__(message)
        self.organization_id = organization_id


def topup_amount_validate(amount: Decimal | str) -> int:
    """Parse a top-up amount in CNY; returns micros. Raises ``TopUpError`` naming the rule broken."""
    try:
        micros = to_micros(amount)
    except MoneyError as exc:
        raise TopUpError(f"{amount!r} is not an amount of money") from exc
    if micros % MICROS_PER_FEN:
        raise TopUpError("top-ups are in whole fen (two decimal places)")
    lo, hi = to_micros(settings.TOP_UP_MIN), to_micros(settings.TOP_UP_MAX)
    if not lo <= micros <= hi:
        raise TopUpError(f"a top-up must be between {format_cny(lo)} and {format_cny(hi)} CNY")
    return micros


@dataclass(frozen=True)
class TopUpResult:
    topup: TopUp
    replayed: bool  # True when an earlier request with the same Idempotency-Key was answered again


def topup_create(
    *, organization: Organization, user: User, amount: Decimal | str, success_url: str, cancel_url: str
) -> TopUp:
    """Create a top-up and its Stripe Checkout Session; returns the TopUp with ``checkout_url``.

    Raises ``TopUpError`` (bad amount, nothing written), ``StripeNotConfigured`` (nothing written) or
    ``StripeUnavailable`` (Stripe refused: the TopUp is kept as ``failed`` with the error, nothing credited;
    ``StripeOutcomeUnknown``, a timeout after which Stripe may hold a session: the TopUp stays ``created`` with
    the error, and a retry under the same API key recovers Stripe's session), and
    ``PermissionRefused`` when the user's role may not top up (``portal.permissions``).
    """
    return topup_create_once(
        organization=organization,
        user=user,
        amount=amount,
        success_url=success_url,
        cancel_url=cancel_url,
        idempotency_key="",
    ).topup


def topup_create_once(
    *,
    organization: Organization,
    user: User,
    amount: Decimal | str,
    success_url: str,
    cancel_url: str,
    idempotency_key: str,
) -> TopUpResult:
    """``topup_create`` under the API's ``Idempotency-Key`` (scoped to the organization).

    The first request with a key stores it on the top-up with the SHA-256 of the request (amount in micros
    and both URLs; ``portal.marketplace.services.request_hash``) in the transaction that creates the row —
    unique per (organization, key). A later request with the same key and body creates nothing and returns
    that top-up with ``replayed=True`` (a top-up still ``created`` because the first attempt died before
    Stripe answered calls Stripe again with the same Stripe key, which returns the same session); the same
    key with another body raises ``TopUpKeyReused``. An empty key creates a new top-up every time. Raises
    what ``topup_create`` raises, and ``TopUpError`` for a key over 200 characters.
    """
    from portal.marketplace.services import request_hash  # the one hash of a request under an Idempotency-Key

    authorize(user=user, organization=organization, action=Action.WALLET_TOP_UP)
    micros = topup_amount_validate(amount)
    key = idempotency_key.strip()
    if len(key) > MAX_REQUEST_KEY_LENGTH:
        raise TopUpError(f"an Idempotency-Key has at most {MAX_REQUEST_KEY_LENGTH} characters")
    if not stripe_gateway.is_configured():
        raise stripe_gateway.StripeNotConfigured("Stripe is not configured (STRIPE_SECRET_KEY is not set)")
    body = {"amount_micros": micros, "success_url": success_url, "cancel_url": cancel_url}
    digest = request_hash(body) if key else ""

    def replay() -> TopUp | None:
        prior = TopUp.objects.filter(organization=organization, request_key=key).first() if key else None
        if prior is not None and prior.request_sha256 != digest:
            raise TopUpKeyReused("this Idempotency-Key was already used for a different top-up request")
        return prior

    if (prior := replay()) is not None:
        if prior.status == TopUpStatus.CREATED:
            prior = _checkout_open(prior, user=user, success_url=success_url, cancel_url=cancel_url)
        return TopUpResult(prior, True)
    try:
        with transaction.atomic():
            topup = TopUp.objects.create(
                organization=organization, user=user, amount_micros=micros, request_key=key, request_sha256=digest
            )
            topup.idempotency_key = f"topup:{topup.stripe_key_uuid}"
            topup.save(update_fields=["idempotency_key"])
            audit_log(
                action="billing.topup_create",
                actor=user,
                organization=organization,
                obj=topup,
                extra={"amount_micros": micros, "request_key": key},
            )
    except IntegrityError:
        if (prior := replay()) is not None:  # a concurrent request with the key committed first
            return TopUpResult(prior, True)
        raise
    return TopUpResult(_checkout_open(topup, user=user, success_url=success_url, cancel_url=cancel_url), False)


def _checkout_open(topup: TopUp, *, user: User, success_url: str, cancel_url: str) -> TopUp:
    """Create the Checkout Session of a stored top-up (after commit: never inside a transaction)."""
    try:
        session = stripe_gateway.checkout_session_create(
            amount_fen=topup.amount_micros // MICROS_PER_FEN,
            currency="cny",
            idempotency_key=f"topup:{topup.stripe_key_uuid}",
            reference=str(topup.pk),
            customer_email=user.email,
            success_url=success_url,
            cancel_url=cancel_url,
            metadata={"topup_id": str(topup.pk), "organization_id": str(topup.organization_id)},
        )
    except stripe_gateway.StripeOutcomeUnknown as exc:
        # Stripe may have created the session: the top-up stays ``created`` (with the error), so the retry
        # with the same Idempotency-Key calls Stripe again with the same Stripe key and recovers that session.
        TopUp.objects.filter(pk=topup.pk, status=TopUpStatus.CREATED).update(error=str(exc))
        raise
    except stripe_gateway.StripeUnavailable as exc:
        TopUp.objects.filter(pk=topup.pk, status=TopUpStatus.CREATED).update(status=TopUpStatus.FAILED, error=str(exc))
        raise
    TopUp.objects.filter(pk=topup.pk, status=TopUpStatus.CREATED).update(
        status=TopUpStatus.CHECKOUT_OPEN, stripe_session_id=session.id, checkout_url=session.url, error=""
    )
    topup.refresh_from_db()
    return topup


HANDLED_TYPES = {
    "checkout.session.completed",
    "checkout.session.async_payment_succeeded",
    "checkout.session.async_payment_failed",
    "checkout.session.expired",
    "charge.refunded",
    "charge.dispute.created",
    "charge.dispute.closed",
}


def stripe_event_record(*, event: dict[str, Any]) -> tuple[StripeEvent, bool]:
    """Store a verified event once per id; returns (row, created)."""
    try:
        with transaction.atomic():
            return StripeEvent.objects.create(
                event_id=event["id"], type=event["type"], livemode=bool(event.get("livemode")), payload=event
            ), True
    except IntegrityError:
        return StripeEvent.objects.get(event_id=event["id"]), False


def stripe_event_handle(*, row: StripeEvent) -> StripeEvent:
    """Apply one stored event (safe to call again: every posting is idempotent). Records the outcome.

    A ``PaymentMismatch`` leaves the event ``failed`` with its reason and writes a staff audit row
    (``billing.stripe_event_rejected``); other errors leave it ``failed`` with the error, to be retried on
    the next delivery.
    """
    if row.status in (StripeEventStatus.PROCESSED, StripeEventStatus.IGNORED):
        return row
    StripeEvent.objects.filter(pk=row.pk).update(attempts=row.attempts + 1)
    obj = row.payload.get("data", {}).get("object", {})
    try:
        with transaction.atomic():
            status = _event_apply(row.type, obj)
            StripeEvent.objects.filter(pk=row.pk).update(status=status, error="", processed_at=timezone.now())
    except PaymentMismatch as exc:
        with transaction.atomic():
            StripeEvent.objects.filter(pk=row.pk).update(status=StripeEventStatus.FAILED, error=f"mismatch: {exc}")
            organization = Organization.objects.filter(pk=exc.organization_id).first() if exc.organization_id else None
            audit_log(
                action="billing.stripe_event_rejected",
                organization=organization,
                obj=row,
                staff=True,
                extra={"event_id": row.event_id, "type": row.type, "reason": str(exc)},
            )
    except (LedgerError, KeyError, TypeError, ValueError) as exc:
        StripeEvent.objects.filter(pk=row.pk).update(status=StripeEventStatus.FAILED, error=repr(exc))
    row.refresh_from_db()
    return row


def _event_apply(kind: str, obj: dict[str, Any]) -> StripeEventStatus:
    if kind not in HANDLED_TYPES:
        return StripeEventStatus.IGNORED
    if kind in ("checkout.session.completed", "checkout.session.async_payment_succeeded"):
        return _checkout_completed(obj)
    if kind == "checkout.session.async_payment_failed":
        if obj.get("payment_intent"):
            _payment_lock(obj["payment_intent"])
        topup = _matched_topup(obj, check_amount=False)
        TopUp.objects.filter(pk=topup.pk, status__in=[TopUpStatus.CREATED, TopUpStatus.CHECKOUT_OPEN]).update(
            status=TopUpStatus.FAILED, error="the payment failed (checkout.session.async_payment_failed)"
        )
        return StripeEventStatus.PROCESSED
    if kind == "checkout.session.expired":
        TopUp.objects.filter(stripe_session_id=obj.get("id"), status=TopUpStatus.CHECKOUT_OPEN).update(
            status=TopUpStatus.EXPIRED
        )
        return StripeEventStatus.PROCESSED
    if kind == "charge.refunded":
        return _reversal_event(obj.get("payment_intent"), f"refund:{obj['id']}", int(obj["amount_refunded"]))
    if kind == "charge.dispute.created":
        return _reversal_event(obj.get("payment_intent"), f"dispute:{obj['id']}", int(obj["amount"]))
    # charge.dispute.closed: "won" gives the money back, "lost" keeps it debited; other statuses change nothing
    outcome = {"won": "won", "lost": "lost"}.get(obj.get("status", ""))
    if outcome is None:
        return StripeEventStatus.IGNORED
    return _reversal_event(obj.get("payment_intent"), f"dispute:{obj['id']}", int(obj["amount"]), outcome=outcome)


def _payment_lock(payment_intent: str) -> None:
    """Take the lock of one payment (its ``StripePayment`` row, created on first use) until the end of the
    current transaction. Every event of the payment takes it before reading or writing anything else."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quoted_table(StripePayment)} (payment_intent, created_at) VALUES (%s, %s)"  # noqa: S608
            " ON CONFLICT (payment_intent) DO NOTHING",
            [payment_intent, db_value(StripePayment, "created_at", timezone.now())],
        )
    StripePayment.objects.select_for_update().get(payment_intent=payment_intent)


def _matched_topup(session: dict[str, Any], *, check_amount: bool) -> TopUp:
    """The top-up whose stored session id is the event's, row-locked, after checking that the event's
    ``client_reference_id``, metadata (top-up and organization ids) and — with ``check_amount`` — amount and
    currency are the ones the portal sent. Raises ``PaymentMismatch`` naming the first difference."""
    session_id = session.get("id")
    topup = TopUp.objects.select_for_update().filter(stripe_session_id=session_id).first() if session_id else None
    if topup is None:
        raise PaymentMismatch(f"session {session_id!r} is not a checkout session created by this portal")
    org = topup.organization_id
    metadata = session.get("metadata") or {}
    if str(session.get("client_reference_id")) != str(topup.pk):
        raise PaymentMismatch(
            f"session {session_id}: client_reference_id {session.get('client_reference_id')!r}"
            f" is not top-up {topup.pk}",
            organization_id=org,
        )
    if "topup_id" in metadata and str(metadata["topup_id"]) != str(topup.pk):
        raise PaymentMismatch(
            f"session {session_id}: metadata names top-up {metadata['topup_id']!r}, the session is top-up {topup.pk}'s",
            organization_id=org,
        )
    if "organization_id" in metadata and str(metadata["organization_id"]) != str(org):
        raise PaymentMismatch(
            f"session {session_id}: metadata names organization {metadata['organization_id']!r},"
            f" the session is organization {org}'s",
            organization_id=org,
        )
    if check_amount:
        paid_micros = int(session.get("amount_total") or 0) * MICROS_PER_FEN
        if paid_micros != topup.amount_micros or str(session.get("currency", "")).lower() != "cny":
            raise PaymentMismatch(
                f"top-up {topup.pk}: paid {session.get('amount_total')} {session.get('currency')},"
                f" expected {topup.amount_micros // MICROS_PER_FEN} cny",
                organization_id=org,
            )
    return topup


def _checkout_completed(session: dict[str, Any]) -> StripeEventStatus:
    if session.get("payment_status") != "paid":
        return StripeEventStatus.IGNORED  # async methods: wait for async_payment_succeeded
    payment_intent = session.get("payment_intent")
    if not payment_intent:
        raise PaymentMismatch(f"session {session.get('id')!r}: a paid session without a payment_intent")
    _payment_lock(payment_intent)
    topup = _matched_topup(session, check_amount=True)
    if (
        topup.stripe_payment_intent not in (None, payment_intent)
        or TopUp.objects.filter(stripe_payment_intent=payment_intent).exclude(pk=topup.pk).exists()
    ):
        raise PaymentMismatch(
            f"payment {payment_intent} does not belong to top-up {topup.pk}", organization_id=topup.organization_id
        )
    wallet_top_up(
        organization=topup.organization,
        amount_micros=topup.amount_micros,
        idempotency_key=f"topup:{topup.pk}",
        memo=coded_memo("stripe_top_up"),
        metadata={"topup_id": topup.pk, "session": session.get("id")},
    )
    if topup.status != TopUpStatus.PAID:
        TopUp.objects.filter(pk=topup.pk).update(
            status=TopUpStatus.PAID, paid_at=timezone.now(), error="", stripe_payment_intent=payment_intent
        )
        webhook_emit(
            organization=topup.organization,
            event_type="wallet.top_up_credited",
            data={"top_up_id": topup.pk, "amount_micros": topup.amount_micros, "currency": "CNY"},
        )
    _reversals_apply(payment_intent)
    return StripeEventStatus.PROCESSED


def _reversal_event(
    payment_intent: str | None, reference: str, amount_fen: int, outcome: str = ""
) -> StripeEventStatus:
    """Record a refund (cumulative amount of a charge) or a dispute (opened, or closed won / lost) under the
    payment's lock, and apply it if the payment is credited."""
    if not payment_intent:
        raise ValueError(f"{reference}: no payment_intent")
    _payment_lock(payment_intent)
    micros = 0 if outcome == "won" else amount_fen * MICROS_PER_FEN
    reversal, created = PaymentReversal.objects.select_for_update().get_or_create(
        reference=reference, defaults={"payment_intent": payment_intent, "target_micros": micros, "outcome": outcome}
    )
    if reversal.payment_intent != payment_intent:
        raise ValueError(f"{reference} belongs to payment {reversal.payment_intent}, not {payment_intent}")
    if not created:
        # Refunds only grow (late old events change nothing); a won dispute is 0 for good.
        won = "won" in (outcome, reversal.outcome)
        PaymentReversal.objects.filter(pk=reversal.pk).update(
            target_micros=0 if won else max(micros, reversal.target_micros),
            outcome="won" if won else outcome or reversal.outcome,
            updated_at=timezone.now(),
        )
    _reversals_apply(payment_intent)
    return StripeEventStatus.PROCESSED


def _reversals_apply(payment_intent: str) -> int:
    """Apply every reversal of a credited payment not yet applied (caller holds the payment's lock).
    Returns how many changed the wallet or the top-up."""
    topup = (
        TopUp.objects.select_for_update().filter(stripe_payment_intent=payment_intent, status=TopUpStatus.PAID).first()
    )
    if topup is None:
        return 0
    changed = 0
    for reversal in PaymentReversal.objects.select_for_update().filter(payment_intent=payment_intent).order_by("id"):
        changed += _apply_reversal(topup, reversal)
    return changed


def payment_reversals_sweep(*, limit: int = 500) -> int:
    """Apply every refund or dispute still unapplied whose payment is credited (Celery beat): the safety net
    behind the per-payment lock. Returns how many reversals it applied; safe to run any time, twice."""
    pending = list(
        PaymentReversal.objects.exclude(applied_micros=F("target_micros"))
        .values_list("payment_intent", flat=True)
        .distinct()[:limit]
    )
    applied = 0
    for payment_intent in pending:
        with transaction.atomic():
            _payment_lock(payment_intent)
            applied += _reversals_apply(payment_intent)
    return applied


def _apply_reversal(topup: TopUp, reversal: PaymentReversal) -> int:
    """Bring ``reversal`` to its target. Growing: debit at most the paid balance (it never goes negative),
    the shortfall recorded on the top-up and audited for staff. Back to 0 (a dispute won): credit back what
    it debited, and forget what it had recorded as unrecoverable. Returns 1 if anything changed, else 0."""
    delta = reversal.target_micros - reversal.applied_micros
    if delta == 0:
        return 0
    wallet = Wallet.objects.select_for_update().select_related("paid_account").get(organization=topup.organization)
    if delta < 0:  # a won dispute: the money comes back
        give = reversal.debited_micros
        if give > 0:
            ledger_post(
                idempotency_key=f"{reversal.reference}:won",
                kind=TransactionKind.REFUND,
                organization=topup.organization,
                memo=coded_memo("stripe_dispute_won"),
                postings=[Posting(wallet.paid_account, give), Posting(system_account(SystemAccount.STRIPE), -give)],
                metadata={"reference": reversal.reference, "topup_id": topup.pk},
            )
        PaymentReversal.objects.filter(pk=reversal.pk).update(
            applied_micros=reversal.target_micros, debited_micros=0, updated_at=timezone.now()
        )
        TopUp.objects.filter(pk=topup.pk).update(
            refunded_micros=F("refunded_micros") + delta,
            unrecovered_micros=F("unrecovered_micros") - (reversal.applied_micros - give),
        )
        audit_log(
            action="billing.dispute_won",
            organization=topup.organization,
            obj=topup,
            extra={"reference": reversal.reference, "credited_micros": give},
        )
        return 1
    take = min(delta, wallet.paid_account.balance_micros)
    if take > 0:
        ledger_post(
            idempotency_key=f"{reversal.reference}:{reversal.target_micros}",
            kind=TransactionKind.REFUND,
            organization=topup.organization,
            memo=coded_memo("stripe_refund" if reversal.reference.startswith("refund:") else "stripe_dispute"),
            postings=[Posting(wallet.paid_account, -take), Posting(system_account(SystemAccount.STRIPE), take)],
            metadata={"reference": reversal.reference, "topup_id": topup.pk},
        )
    shortfall = delta - take
    PaymentReversal.objects.filter(pk=reversal.pk).update(
        applied_micros=reversal.target_micros, debited_micros=F("debited_micros") + take, updated_at=timezone.now()
    )
    TopUp.objects.filter(pk=topup.pk).update(
        refunded_micros=F("refunded_micros") + delta, unrecovered_micros=F("unrecovered_micros") + shortfall
    )
    if shortfall:
        audit_log(
            action="billing.refund_shortfall",
            organization=topup.organization,
            obj=topup,
            extra={"reference": reversal.reference, "shortfall_micros": shortfall},
        )
    return 1
