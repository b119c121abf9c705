"""Console pages of persistent volumes under ``o/<org>/volumes/``: the list (size, used, attached to, cost so
far) with the create form and its live price, and delete with confirmation. Every lookup is scoped to the
user's organization (an outsider gets a 404); changes go through ``instances.interactive.volumes``."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from instances.interactive import volumes as svc
from instances.models import Volume
from portal.lib.http import AuthedHttpRequest
from portal.models import Organization
from portal.scoping import request_organization, scoped_get_or_404


class VolumeCreateForm(forms.Form):
    name = forms.CharField(
        label=gettext_lazy("Name"), max_length=40, help_text=gettext_lazy("Lowercase letters, digits and hyphens.")
    )
    size_gb = forms.IntegerField(label=gettext_lazy("Size (GB)"), min_value=1, max_value=svc.MAX_SIZE_GB, initial=10)


def _context(organization: Organization, form: VolumeCreateForm) -> dict[str, Any]:
    quota = svc.volume_quota_gb(organization)
    rows = svc.volume_rows(organization)
    used = sum(r["volume"].size_gb for r in rows)
    return {
        "org": organization,
        "rows": rows,
        "form": form,
        "quota_gb": quota,
        "used_gb": used,
        **_price(form.data.get("size_gb") if form.is_bound else form.fields["size_gb"].initial),
    }


def _price(size: Any) -> dict[str, Any]:
    """The price of ``size`` (the form's text) as the create form would read it: its field's parsing and
    bounds, so a size the quote prices is one the form accepts (``1e30``, ``NaN``, ``-1``, 10^30 … get the
    field's own error)."""
    try:
        gb = VolumeCreateForm.base_fields["size_gb"].clean(size)
        hour = svc.volume_price_per_hour_micros(size_gb=gb)
    except ValidationError as exc:
        return {"price_error": " ".join(exc.messages), "price_hour_micros": None}
    except svc.VolumeError as exc:
        return {"price_error": str(exc), "price_hour_micros": None}
    return {"price_error": "", "price_gb": gb, "price_hour_micros": hour, "price_month_micros": hour * 24 * 30}


@login_required
@require_http_methods(["GET", "POST"])
def volume_list(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The volumes page; POST creates a volume (errors shown on the form, status 400, nothing written)."""
    organization = request_organization(request, slug=org)
    form = VolumeCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            volume = svc.volume_create(organization=organization, user=request.user, **form.cleaned_data)
        except svc.VolumeError as exc:
            form.add_error(exc.field or None, str(exc))
        else:
            messages.success(request, _("Volume %(name)s created.") % {"name": volume.name})
            return redirect("volumes", org=organization.slug)
    status = 400 if form.errors else 200
    return render(request, "instances/volume_list.html", _context(organization, form), status=status)


@login_required
def volume_quote(request: AuthedHttpRequest, org: str) -> HttpResponse:
    """The price of the size being typed (htmx partial of the create form); 400 with the reason for a size the
    form would refuse (the form lets htmx swap that answer in)."""
    request_organization(request, slug=org)
    price = _price(request.GET.get("size_gb"))
    return render(request, "instances/volume_price.html", price, status=400 if price["price_error"] else 200)


@login_required
@require_http_methods(["GET", "POST"])
def volume_delete(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """Confirm (GET), then delete (POST) a volume and its data; refused while an active instance has it."""
    organization = request_organization(request, slug=org)
    volume = scoped_get_or_404(Volume.objects.filter(deleted_at__isnull=True), organization=organization, pk=pk)
    if request.method == "POST":
        try:
            svc.volume_delete(volume=volume, user=request.user)
        except svc.VolumeError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, _("Volume %(name)s deleted.") % {"name": volume.name})
        return redirect("volumes", org=organization.slug)
    return render(
        request,
        "instances/confirm.html",
        {
            "org": organization,
            "title": _("Delete volume %(name)s?") % {"name": volume.name},
            "text": _(
                "Its %(size)d GB and every file on it are deleted for good; billing stops now. This cannot be undone."
            )
            % {"size": volume.size_gb},
            "button": _("Delete"),
        },
    )
