"""Top-ups through Stripe Checkout and the Stripe webhook handler.

Flow: ``topup_create`` stores a ``TopUp`` with its idempotency key, commits, then creates the Checkout
Session with that key. Money arrives only through ``stripe_event_handle`` for a verified
``checkout.session.completed`` with ``payment_status == "paid"``; the ledger posting's idempotency key
``topup:<id>`` makes any number of deliveries, in any order, credit once. ``charge.refunded`` and
``charge.dispute.created`` debit the paid balance; if they arrive before the payment's completion they
wait in ``PaymentReversal`` and are applied right after the credit.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from billing import stripe_gateway
from billing.choices import StripeEventStatus, SystemAccount, TopUpStatus, TransactionKind
from billing.models import PaymentReversal, StripeEvent, TopUp, Wallet
from billing.money import MoneyError, format_cny, to_micros
from billing.services import LedgerError, Posting, ledger_post, system_account, wallet_top_up
from portal.audit import audit_log
from portal.models import Organization, User
from portal.permissions import Action, authorize
from portal.webhooks.services import webhook_emit

MICROS_PER_FEN = 10_000


class TopUpError(ValueError):
    """An amount outside the allowed range or not in whole fen; nothing is created."""


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


def topup_create(*, organization: Organization, user: User, amount: Decimal | str,
                 success_url: str, cancel_url: str) -> TopUp:
    """Create a top-up and its Stripe Checkout Session; returns the TopUp with ``checkout_url``.

    Raises ``TopUpError`` (bad amount, nothing written), ``StripeNotConfigured`` (nothing written) or
    ``StripeUnavailable`` (the TopUp is kept as ``failed`` with the error, nothing credited), and
    ``PermissionRefused`` when the user's role may not top up (``portal.permissions``).
    """
    authorize(user=user, organization=organization, action=Action.WALLET_TOP_UP)
    micros = topup_amount_validate(amount)
    if not stripe_gateway.is_configured():
        raise stripe_gateway.StripeNotConfigured("Stripe is not configured (STRIPE_SECRET_KEY is not set)")
    with transaction.atomic():
        topup = TopUp.objects.create(organization=organization, user=user, amount_micros=micros)
        topup.idempotency_key = f"topup:{topup.pk}"
        topup.save(update_fields=["idempotency_key"])
        audit_log(action="billing.topup_create", actor=user, organization=organization, obj=topup,
                  extra={"amount_micros": micros})
    try:
        session = stripe_gateway.checkout_session_create(
            amount_fen=micros // MICROS_PER_FEN, currency="cny", idempotency_key=topup.idempotency_key,
            reference=str(topup.pk), customer_email=user.email,
            success_url=success_url, cancel_url=cancel_url,
            metadata={"topup_id": str(topup.pk), "organization_id": str(organization.pk)},
        )
    except stripe_gateway.StripeUnavailable as exc:
        TopUp.objects.filter(pk=topup.pk).update(status=TopUpStatus.FAILED, error=str(exc))
        raise
    TopUp.objects.filter(pk=topup.pk, status=TopUpStatus.CREATED).update(
        status=TopUpStatus.CHECKOUT_OPEN, stripe_session_id=session.id, checkout_url=session.url
    )
    topup.refresh_from_db()
    return topup


HANDLED_TYPES = {"checkout.session.completed", "checkout.session.async_payment_succeeded",
                 "checkout.session.expired", "charge.refunded", "charge.dispute.created"}


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
    """Apply one stored event (safe to call again: every posting is idempotent). Records the outcome."""
    if row.status in (StripeEventStatus.PROCESSED, StripeEventStatus.IGNORED):
        return row
    StripeEvent.objects.filter(pk=row.pk).update(attempts=row.attempts + 1)
    obj = row.payload.get("data", {}).get("object", {})
    try:
        with transaction.atomic():
            if row.type not in HANDLED_TYPES:
                status = StripeEventStatus.IGNORED
            elif row.type in ("checkout.session.completed", "checkout.session.async_payment_succeeded"):
                status = _checkout_completed(obj)
            elif row.type == "checkout.session.expired":
                TopUp.objects.filter(stripe_session_id=obj.get("id"), status=TopUpStatus.CHECKOUT_OPEN).update(
                    status=TopUpStatus.EXPIRED)
                status = StripeEventStatus.PROCESSED
            elif row.type == "charge.refunded":
                status = _debit(obj.get("payment_intent"), f"refund:{obj['id']}", int(obj["amount_refunded"]))
            else:  # charge.dispute.created
                status = _debit(obj.get("payment_intent"), f"dispute:{obj['id']}", int(obj["amount"]))
            StripeEvent.objects.filter(pk=row.pk).update(status=status, error="", processed_at=timezone.now())
    except (LedgerError, KeyError, TypeError, ValueError, TopUp.DoesNotExist) as exc:
        StripeEvent.objects.filter(pk=row.pk).update(status=StripeEventStatus.FAILED, error=repr(exc))
    row.refresh_from_db()
    return row


def _checkout_completed(session: dict[str, Any]) -> StripeEventStatus:
    if session.get("payment_status") != "paid":
        return StripeEventStatus.IGNORED  # async methods: wait for async_payment_succeeded
    topup = TopUp.objects.select_for_update().get(pk=int(session["metadata"]["topup_id"]))
    paid_micros = int(session["amount_total"]) * MICROS_PER_FEN
    if paid_micros != topup.amount_micros or session.get("currency", "cny").lower() != "cny":
        raise ValueError(f"top-up {topup.pk}: paid {session.get('amount_total')} {session.get('currency')}, "
                         f"expected {topup.amount_micros // MICROS_PER_FEN} cny")
    wallet_top_up(organization=topup.organization, amount_micros=topup.amount_micros,
                  idempotency_key=f"topup:{topup.pk}", memo="Stripe top-up",
                  metadata={"topup_id": topup.pk, "session": session.get("id")})
    if topup.status != TopUpStatus.PAID:
        TopUp.objects.filter(pk=topup.pk).update(
            status=TopUpStatus.PAID, paid_at=timezone.now(),
            stripe_session_id=topup.stripe_session_id or session.get("id"),
            stripe_payment_intent=session.get("payment_intent"),
        )
        webhook_emit(organization=topup.organization, event_type="wallet.top_up_credited",
                     data={"top_up_id": topup.pk, "amount_micros": topup.amount_micros, "currency": "CNY"})
    paid_topup = TopUp.objects.get(pk=topup.pk)
    for reversal in PaymentReversal.objects.select_for_update().filter(payment_intent=session.get("payment_intent")):
        _apply_reversal(paid_topup, reversal)
    return StripeEventStatus.PROCESSED


def _debit(payment_intent: str | None, reference: str, amount_fen: int) -> StripeEventStatus:
    """Record a refund (cumulative amount of a charge) or a dispute and apply it if the payment landed."""
    if not payment_intent:
        raise ValueError(f"{reference}: no payment_intent")
    micros = amount_fen * MICROS_PER_FEN
    reversal, created = PaymentReversal.objects.select_for_update().get_or_create(
        reference=reference, defaults={"payment_intent": payment_intent, "target_micros": micros})
    if not created and micros > reversal.target_micros:  # refunds only grow; late old events change nothing
        PaymentReversal.objects.filter(pk=reversal.pk).update(target_micros=micros, updated_at=timezone.now())
    topup = TopUp.objects.select_for_update().filter(stripe_payment_intent=payment_intent).first()
    if topup is not None and topup.status == TopUpStatus.PAID:
        _apply_reversal(topup, PaymentReversal.objects.get(pk=reversal.pk))
    return StripeEventStatus.PROCESSED


def _apply_reversal(topup: TopUp, reversal: PaymentReversal) -> None:
    """Debit what is still unapplied of ``reversal``: at most the paid balance (it never goes negative);
    the shortfall is recorded on the top-up and audited for staff."""
    wallet = Wallet.objects.select_for_update().select_related("paid_account").get(organization=topup.organization)
    delta = reversal.target_micros - reversal.applied_micros
    if delta <= 0:
        return
    take = min(delta, wallet.paid_account.balance_micros)
    if take > 0:
        ledger_post(
            idempotency_key=f"{reversal.reference}:{reversal.target_micros}",
            kind=TransactionKind.REFUND,
            organization=topup.organization,
            memo="Stripe refund" if reversal.reference.startswith("refund:") else "Stripe dispute",
            postings=[Posting(wallet.paid_account, -take), Posting(system_account(SystemAccount.STRIPE), take)],
            metadata={"reference": reversal.reference, "topup_id": topup.pk},
        )
    shortfall = delta - take
    PaymentReversal.objects.filter(pk=reversal.pk).update(applied_micros=reversal.target_micros,
                                                          updated_at=timezone.now())
    TopUp.objects.filter(pk=topup.pk).update(
        refunded_micros=F("refunded_micros") + delta, unrecovered_micros=F("unrecovered_micros") + shortfall)
    if shortfall:
        audit_log(action="billing.refund_shortfall", organization=topup.organization, obj=topup,
                  extra={"reference": reversal.reference, "shortfall_micros": shortfall})
