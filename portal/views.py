"""Console views of the portal app: signup, verification, dashboard, API tokens, members (the wallet's
page is ``billing.views.wallet``).

One view serves the full page and its htmx partial (``request.htmx and not request.htmx.boosted``).
Every organization-scoped page resolves the organization through ``portal.scoping.request_organization``
(404 for outsiders).
"""

from __future__ import annotations

from typing import cast

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from portal.choices import Role, TokenScope
from portal.forms import ApiTokenForm, MemberForm, OrganizationForm, SignupForm
from portal.lib.htmx import is_partial
from portal.lib.http import AuthedHttpRequest
from portal.models import Membership, User
from portal.permissions import Action, PermissionRefused, allowed_actions
from portal.scoping import request_organization, scoped_get_or_404
from portal.selectors import api_tokens_for_user
from portal.services import (
    MembershipError,
    VerificationError,
    api_token_create,
    api_token_revoke,
    email_verify,
    membership_invite,
    membership_remove,
    organization_create,
    send_verification_email,
    user_signup,
)


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            user = user_signup(
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password1"],
                name=form.cleaned_data.get("name", ""),
            )
        except IntegrityError:
            form.add_error("email", _("An account with this e-mail address already exists."))
        else:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(
                request, _("Check your inbox: we sent a verification link to %(email)s.") % {"email": user.email}
            )
            return redirect("home")
    return render(request, "portal/signup.html", {"form": form}, status=400 if form.errors else 200)


def verify_email(request: HttpRequest, token: str) -> HttpResponse:
    try:
        result = email_verify(token=token)
    except VerificationError as exc:
        return render(request, "portal/verify_failed.html", {"error": str(exc)}, status=400)
    if result.trial_granted:
        messages.success(request, _("Your address is verified and your trial credit is in your wallet."))
    else:
        messages.info(request, _("Your address is verified."))
    if request.user.is_authenticated and request.user.pk == result.user.pk:
        return redirect("home")
    return redirect("login")


@login_required
@require_POST
def resend_verification(request: AuthedHttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    if not user.is_verified:
        send_verification_email(user=user)
        messages.info(request, _("We sent a new verification link to %(email)s.") % {"email": user.email})
    return redirect("home")


def home(request: HttpRequest) -> HttpResponse:
    """Signed in: the personal organization's dashboard. Anonymous: the landing page (what the product is,
    where the prices are, sign up / log in)."""
    if not request.user.is_authenticated:
        return render(
            request,
            "portal/landing.html",
            {"trial_credit": settings.TRIAL_CREDIT, "trial_days": settings.TRIAL_CREDIT_DAYS},
        )
    org = request_organization(request)
    return redirect("dashboard", org=org.slug)


@login_required
def dashboard(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The console home: the wallet's balance, burn rate and runway, and the open low-balance notice."""
    # Documented hook upward (ARCHITECTURE.md): the ground floor reads billing's selectors only here, inside
    # the function, so ``portal`` imports no ``billing`` module at load time.
    from billing.metering import burn_rates
    from billing.notices import open_notice
    from billing.pricing import burn_runway_minutes
    from billing.selectors import wallet_balance, wallet_grants

    organization = request_organization(request, slug=org)
    balance = wallet_balance(organization=organization)
    burn = burn_rates(organization=organization).get(organization.pk)
    per_hour = burn.per_minute_micros * 60 if burn else 0
    runway_minutes = burn_runway_minutes(
        balance_micros=balance.total_micros, per_minute_micros=burn.per_minute_micros if burn else 0
    )
    context = {
        "org": organization,
        "balance": balance,
        "grants": wallet_grants(organization=organization),
        "burn_per_hour_micros": per_hour,
        "runway_minutes": runway_minutes,
        "notice": open_notice(organization),
    }
    return render(request, "portal/dashboard.html", context)


@login_required
def api_tokens(request: AuthedHttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    form = ApiTokenForm(request.POST or None, user=user)
    created = None
    if request.method == "POST" and form.is_valid():
        try:
            created = api_token_create(
                user=user,
                organization=form.cleaned_data["organization"],
                name=form.cleaned_data["name"],
                scope=TokenScope(form.cleaned_data["scope"]),
            )
        except PermissionRefused as exc:
            form.add_error("scope", str(exc))
        else:
            form = ApiTokenForm(user=user)
    context = {
        "form": form,
        "tokens": api_tokens_for_user(user),
        "created": created,
        "site": settings.SITE_URL.rstrip("/"),
    }
    return render(request, "portal/tokens.html", context, status=400 if form.errors else 200)


@login_required
@require_POST
def api_token_revoke_view(request: AuthedHttpRequest, pk: int) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    token = api_tokens_for_user(user).filter(pk=pk).first()
    if token is None:  # another user's token is indistinguishable from a missing one
        raise Http404("token not found")
    api_token_revoke(token=token, acting_user=user)
    if is_partial(request):
        return render(request, "portal/token_row.html", {"token": token})
    messages.success(request, _("Token revoked."))
    return HttpResponseRedirect(reverse("api_tokens"))


@login_required
def placeholder(request: AuthedHttpRequest, org: str, section: str = "") -> HttpResponse:
    """Sections that later issues fill in (instances, jobs, datasets, apps): an honest empty state."""
    organization = request_organization(request, slug=org)
    return render(request, "portal/coming_soon.html", {"org": organization, "section": section})


@login_required
def members(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The organization's members; owners and admins add existing accounts and remove members."""

    organization = request_organization(request, slug=org)
    form = MemberForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            membership_invite(
                organization=organization,
                email=form.cleaned_data["email"],
                role=Role(form.cleaned_data["role"]),
                acting_user=request.user,
            )
        except MembershipError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, _("Member added."))
            return redirect("members", org=organization.slug)
    rows = organization.memberships.select_related("user").order_by("role", "user__email")
    is_manager = Action.MEMBERS_MANAGE in allowed_actions(user=cast(User, request.user), organization=organization)
    return render(
        request,
        "portal/members.html",
        {"org": organization, "rows": rows, "form": form, "is_manager": is_manager},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def member_remove(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:

    organization = request_organization(request, slug=org)
    membership = scoped_get_or_404(Membership, organization=organization, pk=pk)
    try:
        membership_remove(membership=membership, acting_user=request.user)
    except MembershipError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("Member removed."))
    if membership.user_id == request.user.pk:
        return redirect("home")
    return redirect("members", org=organization.slug)


@login_required
def organization_new(request: AuthedHttpRequest) -> HttpResponse:
    """Create a team organization (with its own wallet) owned by the current user."""

    form = OrganizationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        organization = organization_create(name=form.cleaned_data["name"], owner=request.user)
        messages.success(request, _("Team created. Add members and top up its wallet."))
        return redirect("members", org=organization.slug)
    return render(request, "portal/organization_new.html", {"form": form}, status=400 if form.errors else 200)
