"""Console page of outgoing webhooks: an organization's endpoints (register, rotate, delete) and recent
deliveries with their attempts and "redeliver". Every member sees the page; owners and admins change things.
Another organization's endpoint or delivery is a 404."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.choices import MANAGER_ROLES
from portal.lib.htmx import is_partial
from portal.models import Organization
from portal.scoping import request_organization, scoped_get_or_404
from portal.selectors import membership_of
from portal.webhooks import services
from portal.webhooks.forms import EndpointForm
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.selectors import webhook_deliveries_of, webhook_endpoints_of

DELIVERIES_PER_PAGE = 20


def _render(
    request: HttpRequest, organization: Organization, form: EndpointForm, *, status: int = 200, error: str = ""
) -> HttpResponse:
    page = Paginator(webhook_deliveries_of(organization), DELIVERIES_PER_PAGE).get_page(request.GET.get("page"))
    membership = membership_of(user=request.user, organization=organization)  # type: ignore[arg-type]
    context: dict[str, Any] = {
        "org": organization,
        "form": form,
        "page": page,
        "error": error,
        "endpoints": webhook_endpoints_of(organization),
        "is_manager": membership is not None and membership.role in MANAGER_ROLES,
    }
    if is_partial(request):
        return render(request, "webhooks/delivery_table.html", context, status=status)
    return render(request, "webhooks/webhooks.html", context, status=status)


@login_required
def webhooks(request: HttpRequest, org: str) -> HttpResponse:
    """GET: the page (or, for htmx, the deliveries table of ``?page=``). POST: register an endpoint; its secret
    is shown once."""
    organization = request_organization(request, slug=org)
    form = EndpointForm(request.POST or None)
    if request.method == "POST":
        if not form.is_valid():
            return _render(request, organization, form, status=400)
        d = form.cleaned_data
        try:
            endpoint, secret = services.webhook_endpoint_create(
                organization=organization,
                user=request.user,  # type: ignore[arg-type]
                url=d["url"],
                event_types=d["event_types"],
                description=d["description"],
            )
        except services.WebhookError as exc:
            return _render(request, organization, form, status=exc.status, error=str(exc))
        messages.success(
            request,
            _("Endpoint %(u)s registered. Signing secret (shown once): %(s)s") % {"u": endpoint.url, "s": secret},
        )
        return redirect("webhooks", org=organization.slug)
    return _render(request, organization, form)


@login_required
@require_POST
def endpoint_delete(request: HttpRequest, org: str, pk: int) -> HttpResponse:
    organization = request_organization(request, slug=org)
    endpoint = scoped_get_or_404(WebhookEndpoint.objects.all(), organization=organization, pk=pk)
    try:
        services.webhook_endpoint_delete(endpoint=endpoint, user=request.user)  # type: ignore[arg-type]
    except services.WebhookError as exc:
        return _render(request, organization, EndpointForm(), status=exc.status, error=str(exc))
    messages.success(request, _("Endpoint deleted."))
    return redirect("webhooks", org=organization.slug)


@login_required
@require_POST
def endpoint_rotate(request: HttpRequest, org: str, pk: int) -> HttpResponse:
    organization = request_organization(request, slug=org)
    endpoint = scoped_get_or_404(WebhookEndpoint.objects.all(), organization=organization, pk=pk)
    try:
        endpoint, secret = services.webhook_endpoint_rotate(endpoint=endpoint, user=request.user)  # type: ignore[arg-type]
    except services.WebhookError as exc:
        return _render(request, organization, EndpointForm(), status=exc.status, error=str(exc))
    messages.success(
        request,
        _("New signing secret for %(u)s (shown once; the previous one keeps signing for 24 hours): %(s)s")
        % {"u": endpoint.url, "s": secret},
    )
    return redirect("webhooks", org=organization.slug)


@login_required
@require_POST
def delivery_redeliver(request: HttpRequest, org: str, pk: int) -> HttpResponse:
    organization = request_organization(request, slug=org)
    delivery = scoped_get_or_404(
        WebhookDelivery.objects.select_related("event", "endpoint"),
        organization=organization,
        org_field="endpoint__organization",
        pk=pk,
    )
    try:
        services.webhook_delivery_redeliver(delivery=delivery, user=request.user)  # type: ignore[arg-type]
    except services.WebhookError as exc:
        return _render(request, organization, EndpointForm(), status=exc.status, error=str(exc))
    messages.success(request, _("Event %(e)s queued for redelivery.") % {"e": delivery.event.public_id})
    return redirect("webhooks", org=organization.slug)
