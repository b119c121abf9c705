"""Billing console views (wallet, top-up, pricing, statements) and the Stripe webhook endpoint."""

from __future__ import annotations

import logging
from decimal import Decimal

import stripe
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from billing import stripe_gateway
from billing.forms import TcoForm
from billing.line_labels import app_call_lines, instance_names, ledger_line_labels
from billing.models import GpuPrice
from billing.money import format_cny, from_micros
from billing.payments import TopUpError, stripe_event_handle, stripe_event_record, topup_create
from billing.pricing import DEFAULT_PRICES, PriceBook
from billing.selectors import ledger_lines, wallet_balance, wallet_grants
from billing.statement_months import statement_month_check, statement_months
from billing.statements import SPEND_KINDS, daily_cost, statement_build, statement_csv
from billing.tco import CARD_PRICE_CNY, GPU_POWER_KW, TCO_SOURCES, TcoInputs, tco_compare
from portal.lib.charts import line_chart, stacked_bar_chart
from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.scoping import request_organization

log = logging.getLogger(__name__)


@login_required
@require_POST
def topup_start(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """Create a top-up and send the browser to Stripe Checkout."""
    organization = request_organization(request, slug=org)
    amount = request.POST.get("custom_amount") or request.POST.get("amount") or ""
    wallet_url = reverse("wallet", args=[organization.slug])
    try:
        topup = topup_create(
            organization=organization,
            user=request.user,
            amount=amount.strip(),
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
        event = stripe_gateway.event_construct(
            payload=request.body, signature_header=request.headers.get("Stripe-Signature")
        )
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


def pricing(request: HttpRequest) -> HttpResponse:
    """Public prices per GPU type and mode, and the rent-vs-buy calculator (htmx updates the result)."""

    # every type with a price row (the local CPU slot the launch page starts on included), catalogue order first
    codes = list(DEFAULT_PRICES) + sorted(
        set(GpuPrice.objects.values_list("gpu_type", flat=True)) - set(DEFAULT_PRICES)
    )
    book, now = PriceBook(set(codes)), timezone.now()
    rows = []
    for gpu_type in codes:
        row: dict[str, object] = {"gpu_type": gpu_type}
        for mode in ("container", "bare_metal"):
            price = book.at(gpu_type, mode, now)
            row[mode] = None if price is None else from_micros(price)
        rows.append(row)
    # the calculator needs a card price to compare with: GPU types only
    types = [str(r["gpu_type"]) for r in rows if r["container"] is not None and r["gpu_type"] in CARD_PRICE_CNY]
    data = request.GET if "gpus" in request.GET else None
    form = TcoForm(data, gpu_types=types, initial={"gpu_type": types[0] if types else ""})
    result = chart = None
    if form.is_bound and form.is_valid() and types:
        d = form.cleaned_data
        gpu_type = d["gpu_type"]
        inputs = TcoInputs(
            gpu_type=gpu_type,
            gpus=d["gpus"],
            months=d["months"],
            utilization=d["utilization"] / 100,
            card_price=d["card_price"] if d["card_price"] is not None else Decimal(CARD_PRICE_CNY[gpu_type]),
            server_overhead=d["server_overhead"] / 100,
            gpu_power_kw=d["gpu_power_kw"] if d["gpu_power_kw"] is not None else Decimal(GPU_POWER_KW[gpu_type]),
            pue=d["pue"],
            power_price=d["power_price"],
            staff_monthly=d["staff_monthly"],
            rent_price_per_gpu_hour=from_micros(book.at(gpu_type, "container", now) or 0),
        )
        result = tco_compare(inputs)
        chart = line_chart(
            {"buy": [(m, float(v)) for m, v in result.buy_curve], "rent": [(m, float(v)) for m, v in result.rent_curve]}
        )
    context = {"rows": rows, "form": form, "result": result, "chart": chart, "sources": TCO_SOURCES}
    return render(
        request,
        "billing/tco_result.html" if is_partial(request) else "billing/pricing.html",
        context,
        status=400 if form.is_bound and form.errors else 200,
    )


@login_required
def statement(request: AuthedHttpRequest, org: str, year: int, month: int) -> HttpResponse:
    """A month's statement as a page, or as CSV with ``?format=csv``."""

    organization = request_organization(request, slug=org)
    try:
        statement_month_check(organization=organization, year=year, month=month, tz_name=request.user.timezone)
        st = statement_build(organization=organization, year=year, month=month, tz_name=request.user.timezone)  # type: ignore[union-attr]
    except ValueError as exc:
        raise Http404(str(exc)) from exc
    names = instance_names([u.instance_id for u in st.usage] + [x.instance_id for x in st.write_offs])
    app_calls = app_call_lines(organization=organization, start=st.start, end=st.end)
    if request.GET.get("format") == "csv":
        response = HttpResponse(
            statement_csv(st, names=names, app_calls=app_calls), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="statement-{organization.slug}-{year}-{month:02d}.csv"'
        return response
    context = {
        "org": organization,
        "st": st,
        "usage_rows": [(u, names.get(u.instance_id, f"#{u.instance_id}")) for u in st.usage],
        "write_off_rows": [(x, names.get(x.instance_id, f"#{x.instance_id}")) for x in st.write_offs],
        "app_calls": app_calls,
    }
    return render(request, "billing/statement.html", context)


@login_required
def wallet(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = request_organization(request, slug=org)
    page = Paginator(ledger_lines(organization=organization), 25).get_page(request.GET.get("page"))
    labels = ledger_line_labels(page.object_list)
    for entry in page.object_list:
        entry.label = labels.get(entry.transaction_id, "")  # type: ignore[attr-defined]
    context = {
        "org": organization,
        "balance": wallet_balance(organization=organization),
        "grants": wallet_grants(organization=organization),
        "page": page,
        "stripe_configured": stripe_gateway.is_configured(),
        "topup_presets": settings.TOP_UP_PRESETS,
        "topup_min": settings.TOP_UP_MIN,
        "topup_max": settings.TOP_UP_MAX,
    }
    if not is_partial(request):
        costs = daily_cost(organization=organization, tz_name=request.user.timezone)
        context["cost_chart"] = stacked_bar_chart(
            [(c.day.isoformat(), [c.micros_by_kind[kind] for kind in SPEND_KINDS]) for c in costs],
            series=[(kind.value, str(kind.label)) for kind in SPEND_KINDS],
            fmt=format_cny,
            unit="CNY",
            total_label=_("Total"),
        )
        context["statement_months"] = statement_months(organization=organization, tz_name=request.user.timezone)
    template = "billing/wallet_table.html" if is_partial(request) else "billing/wallet.html"
    return render(request, template, context)
