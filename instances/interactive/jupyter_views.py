"""Console views for JupyterLab on an instance: the panel with its progress state (htmx partial, polled while
the server starts) and the door (``…/jupyter/``) that hands a member a single-use ticket.

Both look the instance up through the user's organization (``portal.scoping``): an outsider gets a 404,
an anonymous visitor the login page. The door's answer is a page that POSTs the ticket to the server's
``login`` URL (so the ticket is in no URL, no access log, no Referer); it is not cached and sends no Referer.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from instances.interactive.jupyter import jupyter_enabled, jupyter_state, jupyter_ticket_issue
from instances.models import Instance
from portal.lib.http import AuthedHttpRequest
from portal.models import Organization
from portal.permissions import Action, authorize
from portal.scoping import request_organization, scoped_get_or_404


def _instance(request: AuthedHttpRequest, org: str, pk: int) -> tuple[Organization, Instance]:
    organization = request_organization(request, slug=org)
    return organization, scoped_get_or_404(Instance, organization=organization, pk=pk)


@login_required
@require_GET
def jupyter_panel(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """The "Open JupyterLab" panel of the instance page: ``starting…`` (polls itself) until the server
    answers, then the button; empty for instances without Jupyter."""
    organization, instance = _instance(request, org, pk)
    state = jupyter_state(instance) if jupyter_enabled(instance) else None
    ctx = {"org": organization, "instance": instance, "jupyter_state": state}
    return render(request, "instances/_jupyter_panel.html", ctx)


@login_required
@require_GET
@never_cache
def jupyter_open(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """Hand the member a ticket and send the browser to the instance's JupyterLab (see the module
    docstring); back to the instance page with a message while the server is not there yet."""
    organization, instance = _instance(request, org, pk)
    # Who may launch may enter (a billing viewer may not): a shell in the instance is work on it.
    authorize(user=request.user, organization=organization, action=Action.INSTANCES_LAUNCH)
    try:
        endpoint, ticket = jupyter_ticket_issue(instance=instance, user=request.user)
    except LookupError:
        messages.info(request, _("JupyterLab is not running yet: it starts with the instance."))
        return redirect("instance_detail", org=organization.slug, pk=instance.pk)
    response = render(request, "instances/jupyter_open.html", {"action": f"{endpoint.url}login", "ticket": ticket})
    response["Referrer-Policy"] = "no-referrer"
    return response
