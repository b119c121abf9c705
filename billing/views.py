"""Billing console views (top-up) and the Stripe webhook endpoint."""

from __future__ import annotations

import logging

import stripe
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from billing import stripe_gateway
from billing.payments import TopUpError, stripe_event_handle, stripe_event_record, topup_create
from portal.selectors import organization_for_user

log = logging.getLogger(__name__)


@login_required
@require_POST
def topup_start(request: HttpRequest, org: str) -> HttpResponse:
    """Create a top-up and send the browser to Stripe Checkout."""
    organization = organization_for_user(user=request.user, slug=org)  # type: ignore[arg-type]
    amount = request.POST.get("custom_amount") or request.POST.get("amount") or ""
    wallet_url = reverse("wallet", args=[organization.slug])
    try:
        topup = topup_create(
            organization=organization, user=request.user, amount=amount.strip(),  # type: ignore[arg-type]
            success_url=request.build_absolute_uri(wallet_url + "?topup=success"),
            cancel_url=request.build_absolute_uri(wallet_url + "?topup=cancelled"),
        )
    except TopUpError as exc:
        messages.error(request, str(exc))
        return redirect(wallet_url)
    except stripe_gateway.StripeNotConfigured:
        messages.error(request, _("Online top-up is not configured on this installation. Ask an administrator."))
        return redirect(wallet_url)
    except stripe_gateway.StripeUnavailable as exc:
        messages.error(request, str(exc))
        return redirect(wallet_url)
    return redirect(topup.checkout_url)


@csrf_exempt  # authenticated by Stripe's signature instead
@require_POST
def stripe_webhook(request: HttpRequest) -> HttpResponse:
    """Verify → store once per event id → handle; 400 for a bad signature or payload, else 200."""
    try:
        event = stripe_gateway.event_construct(payload=request.body,
                                               signature_header=request.headers.get("Stripe-Signature"))
    except stripe_gateway.StripeNotConfigured:
        return JsonResponse({"error": "webhooks not configured"}, status=503)
    except stripe.SignatureVerificationError:
        log.warning("stripe webhook with a bad signature refused")
        return JsonResponse({"error": "bad signature"}, status=400)
    except ValueError:
        return JsonResponse({"error": "bad payload"}, status=400)
    row, _created = stripe_event_record(event=event.to_dict())
    row = stripe_event_handle(row=row)
    return JsonResponse({"received": True, "status": row.status})
