"""Console pages of the marketplace: browse and search, app page with "try it", publisher pages."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from billing.money import from_micros, to_micros
from portal.lib.charts import bar_chart
from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.marketplace import calls, pricing, services
from portal.marketplace.choices import AppCategory, AppState, AppVisibility, ServingKind
from portal.marketplace.forms import AppForm, CallCapForm, PublishForm, TryForm
from portal.marketplace.openai_api import BASE_PATH
from portal.marketplace.reasons import app_reason_display
from portal.marketplace.selectors import (
    app_for,
    app_of_publisher,
    apps_visible_to,
    calls_of_caller,
    revenue_summary,
    usage_per_day,
)
from portal.scoping import request_organization


@login_required
def app_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = request_organization(request, slug=org)
    qs = apps_visible_to(organization)
    q = request.GET.get("q", "").strip()
    category = request.GET.get("category", "")
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q))
    if category in AppCategory.values:
        qs = qs.filter(category=category)
    page = Paginator(qs.order_by("name", "id"), 20).get_page(request.GET.get("page"))
    context = {"org": organization, "page": page, "q": q, "category": category, "categories": AppCategory.choices}
    template = "marketplace/app_table.html" if is_partial(request) else "marketplace/app_list.html"
    return render(request, template, context)


@login_required
def app_detail(request: AuthedHttpRequest, org: str, slug: str) -> HttpResponse:
    organization = request_organization(request, slug=org)
    app = app_for(organization, slug)
    context = {
        "org": organization,
        "app": app,
        "form": TryForm(initial={"payload": app.example_request or {}}),
        "is_publisher": app.publisher_id == organization.pk,
    }
    version = app.versions.filter(active=True).first()
    context["version"] = version
    if version is not None and version.kind == ServingKind.CHECKPOINT:  # a model: the OpenAI-compatible API
        context["openai"] = {"base_url": request.build_absolute_uri(BASE_PATH), "model": app.slug}
    if context["is_publisher"]:
        context["versions"] = app.versions.all()[:10]
        days = usage_per_day(app)
        context["calls_chart"] = bar_chart([(d, n) for d, n, _ in days], fmt="{:.0f}")
        context["revenue_chart"] = bar_chart([(d, r / 1_000_000) for d, _, r in days])
        context["revenue"] = revenue_summary(app)
        listed = app.price_per_call_micros  # the publisher's own call: the listed price less its share
        share = pricing.own_share_micros(app, listed)
        context["own_price"] = {"list": listed, "share": share, "charged": listed - share}
    return render(request, "marketplace/app_detail.html", context)


@login_required
@require_POST
def app_try(request: AuthedHttpRequest, org: str, slug: str) -> HttpResponse:
    """The console's "try it": the same service as the API, billed the same way."""
    organization = request_organization(request, slug=org)
    app = app_for(organization, slug)
    form = TryForm(request.POST)
    context: dict[str, object] = {"org": organization, "app": app, "form": form}
    if len(request.POST.get("payload", "").encode()) > settings.APP_MAX_REQUEST_BYTES:
        context["error"] = _("The request exceeds %(n)d bytes.") % {"n": settings.APP_MAX_REQUEST_BYTES}
    elif form.is_valid():
        try:
            result = calls.app_invoke(
                app=app, caller=organization, user=request.user, payload=form.cleaned_data["payload"]
            )
            context["result"] = result
            context["cost"] = pricing.call_cost(result.call)
        except services.MarketplaceError as exc:
            context["error"] = str(exc)
    return render(request, "marketplace/try_result.html", context)


@login_required
def app_create(request: AuthedHttpRequest, org: str) -> HttpResponse:
    organization = request_organization(request, slug=org)
    form = AppForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            with transaction.atomic():  # an app whose version is refused is not kept
                app = services.app_create(
                    publisher=organization,
                    user=request.user,
                    name=d["name"],
                    category=d["category"],
                    description=d["description"],
                    input_schema=d["input_schema"],
                    output_schema=d["output_schema"],
                    price_per_call_micros=to_micros(d["price_per_call"]),
                    visibility=d["visibility"],
                )
                _version, secret = services.app_version_add(
                    app=app,
                    user=request.user,
                    kind=ServingKind.EXTERNAL if d["endpoint_url"] else ServingKind.ECHO,
                    endpoint_url=d["endpoint_url"],
                )
        except services.MarketplaceError as exc:
            form.add_error(None, str(exc))
        else:
            if secret:
                messages.success(request, _("Signing secret (shown once): %(s)s") % {"s": secret})
            return redirect("app_detail", org=organization.slug, slug=app.slug)
    return render(
        request, "marketplace/app_form.html", {"org": organization, "form": form}, status=400 if form.errors else 200
    )


@login_required
@require_POST
def app_state(request: AuthedHttpRequest, org: str, slug: str) -> HttpResponse:
    """Publisher actions: publish (private), submit for review (public), unpublish."""
    organization = request_organization(request, slug=org)
    app = app_of_publisher(organization, slug)
    action = request.POST.get("action")
    targets = {"publish": AppState.PUBLISHED, "review": AppState.IN_REVIEW, "unpublish": AppState.DRAFT}
    target = targets.get(action or "")
    if target is None:
        messages.error(request, _("Unknown action."))
    else:
        if target == AppState.PUBLISHED and app.visibility == AppVisibility.PUBLIC:
            target = AppState.IN_REVIEW
        try:
            services.app_transition(app=app, to=target, acting_user=request.user)
            messages.success(request, _("The app is now %(state)s.") % {"state": AppState(target).label})
        except services.MarketplaceError as exc:
            messages.error(request, str(exc))
    return redirect("app_detail", org=organization.slug, slug=app.slug)


@login_required
def app_publish(request: AuthedHttpRequest, org: str, job_id: int, checkpoint_id: int) -> HttpResponse:
    """ "Publish as app" from a job's checkpoint list: shows the training datasets and their licenses, then
    creates the app; the model is exported and served in the background (progress on the app page)."""
    organization = request_organization(request, slug=org)
    try:
        checkpoint = services._checkpoint_of(organization, job_id, checkpoint_id)
    except services.CheckpointNotFound as exc:
        raise Http404(str(exc)) from exc
    except services.MarketplaceError as exc:
        messages.error(request, str(exc))
        return redirect("job_detail", org=organization.slug, pk=job_id)
    lineage = services.training_lineage(job_id=checkpoint.job_id)
    form = PublishForm(request.POST or None, initial={"name": checkpoint.job.name})
    if request.method == "POST" and form.is_valid():
        d = form.cleaned_data
        try:
            app = services.app_publish_from_checkpoint(
                organization=organization,
                user=request.user,
                job_id=job_id,
                checkpoint_id=checkpoint_id,
                name=d["name"],
                category=d["category"],
                description=d["description"],
                price_per_call_micros=to_micros(d["price_per_call"]),
                visibility=d["visibility"],
                price_per_1k_tokens_micros=to_micros(d["price_per_1k_tokens"]),
                price_per_1k_prompt_tokens_micros=to_micros(d["price_per_1k_prompt_tokens"]),
            )
        except services.MarketplaceError as exc:
            form.add_error(None, str(exc))
        else:
            if app.visibility == AppVisibility.PRIVATE:
                messages.success(
                    request,
                    _("The model is being exported and deployed; the app goes live by itself when it is ready."),
                )
            else:
                messages.success(request, _("The model is being exported and deployed; this page shows the progress."))
            return redirect("app_detail", org=organization.slug, slug=app.slug)
    context = {
        "org": organization,
        "form": form,
        "checkpoint": checkpoint,
        "job": checkpoint.job,
        "lineage": lineage,
        "problems": [app_reason_display(p) for p in services.license_problems(lineage)],
    }
    return render(request, "marketplace/publish_form.html", context, status=400 if form.errors else 200)


@login_required
def call_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The organization's app calls (newest first, 25 a page, htmx partial for the table), this month's spend
    against its monthly cap, and — for owners and admins — the form that sets the cap."""
    organization = request_organization(request, slug=org)
    own = organization.app_monthly_cap_micros
    form = CallCapForm(request.POST or None, initial={"cap": from_micros(own) if own is not None else None})
    if request.method == "POST" and form.is_valid():
        cap = form.cleaned_data["cap"]
        try:
            services.app_call_cap_set(
                organization=organization, user=request.user, cap_micros=to_micros(cap) if cap is not None else None
            )
        except services.MarketplaceError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, _("The monthly cap on app calls is saved."))
            return redirect("app_calls", org=organization.slug)
    page = Paginator(calls_of_caller(organization).order_by("-id"), 25).get_page(request.GET.get("page"))
    context = {
        "org": organization,
        "page": page,
        "form": form,
        "spent_micros": calls.held_and_month_micros(organization, calls.month_start(timezone.now()))[1],
        "cap_micros": calls.monthly_cap_micros(organization),
        "own_cap": own is not None,
    }
    template = "marketplace/call_table.html" if is_partial(request) else "marketplace/call_list.html"
    return render(request, template, context, status=400 if form.errors else 200)
