"""Console pages of who may enter: the organization's setting (``o/<org>/instances/access/``) and the shares
of one instance or volume (``…/instances/<id>/shares/``, ``…/volumes/<id>/shares/``).

Lookups go through the request's organization (an outsider: 404); changes through
``instances.interactive.access`` (a member who may not: 403)."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from instances.interactive import access
from instances.interactive.volumes import volumes_for_org
from instances.models import Instance, Volume
from portal.lib.http import AuthedHttpRequest
from portal.models import Organization
from portal.permissions import Action, allowed_actions
from portal.scoping import request_organization, scoped_get_or_404


class InstanceAccessForm(forms.Form):
    """The organization's choice: may members enter each other's instances and attach each other's volumes."""

    members_enter_any = forms.BooleanField(
        label=gettext_lazy("Members may enter instances other members launched and attach their volumes"),
        required=False,
        help_text=gettext_lazy(
            "Off (the default): an instance's JupyterLab and SSH are open to its launcher, owners, admins and the "
            "members it is shared with; a volume is attached by its creator, owners, admins and those it is shared "
            "with. Billing viewers never enter."
        ),
    )


class ShareForm(forms.Form):
    email = forms.EmailField(label=gettext_lazy("Share with (e-mail address of a member)"), max_length=254)


@login_required
def access_settings(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """Who may enter whose instance: the organization's setting (owners and admins change it)."""
    organization = request_organization(request, slug=org)
    data = request.POST if request.method == "POST" else None  # an unticked box posts nothing: still bound
    form = InstanceAccessForm(data, initial={"members_enter_any": organization.members_enter_any_instance})
    can_change = Action.MEMBERS_MANAGE in allowed_actions(user=request.user, organization=organization)
    form.fields["members_enter_any"].disabled = not can_change
    if request.method == "POST" and form.is_valid():
        access.organization_instance_access_set(
            organization=organization,
            members_enter_any=form.cleaned_data["members_enter_any"],
            acting_user=request.user,
        )
        messages.success(request, _("Instance access saved."))
        return redirect("instance_access_settings", org=organization.slug)
    ctx = {"org": organization, "form": form, "can_change": can_change}
    return render(request, "instances/access_settings.html", ctx, status=400 if form.errors else 200)


def _target(request: AuthedHttpRequest, org: str, pk: int, kind: str) -> tuple[Organization, Instance | Volume]:
    organization = request_organization(request, slug=org)
    if kind == "volume":
        return organization, scoped_get_or_404(volumes_for_org(organization), organization=organization, pk=pk)
    return organization, scoped_get_or_404(Instance, organization=organization, pk=pk)


def _back(organization: Organization, target: Instance | Volume) -> HttpResponse:
    name = "volume_shares" if isinstance(target, Volume) else "instance_shares"
    return redirect(name, org=organization.slug, pk=target.pk)


@login_required
def shares(request: AuthedHttpRequest, org: str, pk: int, kind: str) -> HttpResponse:
    """The shares of an instance or a volume; its launcher / creator, owners and admins add and withdraw them."""
    organization, target = _target(request, org, pk, kind)
    form = ShareForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            share = access.access_share_add(target=target, email=form.cleaned_data["email"], acting_user=request.user)
        except access.ShareError as exc:
            form.add_error("email", str(exc))
        else:
            messages.success(request, _("Shared with %(email)s.") % {"email": share.user.email})
            return _back(organization, target)
    actions = allowed_actions(user=request.user, organization=organization)
    own = target.created_by_id == request.user.pk
    ctx = {
        "org": organization,
        "target": target,
        "kind": kind,
        "shares": access.shares_of(target),
        "candidates": access.share_candidates(target),
        "form": form,
        "can_change": (own and Action.INSTANCES_LAUNCH in actions) or Action.INSTANCES_MANAGE_ANY in actions,
    }
    return render(request, "instances/shares.html", ctx, status=400 if form.errors else 200)


@login_required
@require_POST
def share_remove(request: AuthedHttpRequest, org: str, pk: int, kind: str, user_id: int) -> HttpResponse:
    organization, target = _target(request, org, pk, kind)
    if access.access_share_remove(target=target, user_id=user_id, acting_user=request.user):
        messages.success(request, _("Share withdrawn: that member's sessions end now."))
    return _back(organization, target)
