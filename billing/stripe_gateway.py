"""The one module that talks to Stripe (official ``stripe`` client). Tests replace only Stripe's
servers, by pointing ``STRIPE_API_BASE`` at a local stand-in; signatures are checked by the real library.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import stripe
from django.conf import settings


class StripeNotConfigured(RuntimeError):
    """No ``STRIPE_SECRET_KEY`` / ``STRIPE_WEBHOOK_SECRET`` in the environment."""


class StripeUnavailable(RuntimeError):
    """Stripe refused or could not be reached; the message is safe to show."""


class StripeOutcomeUnknown(StripeUnavailable):
    """The call may have reached Stripe (a timeout, a dropped connection, a 5xx or an idempotency lock): Stripe
    may have created the object. Retrying with the same ``Idempotency-Key`` returns what Stripe made
    (https://docs.stripe.com/api/idempotent_requests: the first response is saved for 24 h)."""


@dataclass(frozen=True)
class CheckoutSession:
    id: str
    url: str


def is_configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def _client() -> stripe.StripeClient:
    if not settings.STRIPE_SECRET_KEY:
        raise StripeNotConfigured("Stripe is not configured (STRIPE_SECRET_KEY is not set)")
    kwargs: dict[str, Any] = {
        "max_network_retries": 2,
        "http_client": stripe.new_default_http_client(timeout=settings.STRIPE_TIMEOUT_S),
    }
    if settings.STRIPE_API_BASE:
        kwargs["base_addresses"] = {"api": settings.STRIPE_API_BASE}
    return stripe.StripeClient(settings.STRIPE_SECRET_KEY, **kwargs)


def checkout_session_create(
    *,
    amount_fen: int,
    currency: str,
    idempotency_key: str,
    reference: str,
    customer_email: str,
    success_url: str,
    cancel_url: str,
    metadata: dict[str, str],
) -> CheckoutSession:
    """Create a Checkout Session in ``payment`` mode for one line item of ``amount_fen`` (CNY minor units).

    ``idempotency_key`` is sent as Stripe's ``Idempotency-Key`` header, so a retried call returns the
    same session (https://docs.stripe.com/api/idempotent_requests). Raises ``StripeNotConfigured``,
    ``StripeOutcomeUnknown`` (timeout, connection lost, 5xx, 409: Stripe may have made the session) or
    ``StripeUnavailable`` (Stripe refused: no session exists).
    """
    try:
        session = _client().v1.checkout.sessions.create(
            {
                "mode": "payment",
                "client_reference_id": reference,
                "customer_email": customer_email,
                "line_items": [
                    {
                        "quantity": 1,
                        "price_data": {
                            "currency": currency,
                            "unit_amount": amount_fen,
                            "product_data": {"name": "gpu-portal wallet top-up"},
                        },
                    }
                ],
                "metadata": metadata,
                "payment_intent_data": {"metadata": metadata},
                "success_url": success_url,
                "cancel_url": cancel_url,
            },
            {"idempotency_key": idempotency_key},
        )
    except stripe.APIConnectionError as exc:
        raise StripeOutcomeUnknown(f"Stripe did not answer in time: {exc.user_message or exc}") from exc
    except stripe.StripeError as exc:
        if exc.http_status is None or exc.http_status >= 500 or exc.http_status == 409:
            raise StripeOutcomeUnknown(f"Stripe could not complete the checkout: {exc.user_message or exc}") from exc
        raise StripeUnavailable(f"Stripe refused the checkout: {exc.user_message or exc}") from exc
    return CheckoutSession(id=session.id, url=session.url or "")


def event_construct(*, payload: bytes, signature_header: str | None) -> stripe.Event:
    """Verify a webhook's ``Stripe-Signature`` (HMAC-SHA256 of ``"{t}.{payload}"`` with the endpoint
    secret, timestamp within ``STRIPE_WEBHOOK_TOLERANCE_S``; https://docs.stripe.com/webhooks#verify-manually)
    and parse it. Raises ``stripe.SignatureVerificationError`` or ``ValueError`` for a bad payload.
    """
    if not settings.STRIPE_WEBHOOK_SECRET:
        raise StripeNotConfigured("Stripe webhooks are not configured (STRIPE_WEBHOOK_SECRET is not set)")
    return stripe.Webhook.construct_event(
        payload, signature_header, settings.STRIPE_WEBHOOK_SECRET, tolerance=settings.STRIPE_WEBHOOK_TOLERANCE_S
    )
