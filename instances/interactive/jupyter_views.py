"""Console views for JupyterLab on an instance: the panel with its progress state (htmx partial, polled while
the server starts) and the door (``…/jupyter/``) that hands a user who may enter a single-use ticket; and the
server's re-check (``/api/v1/runtime/instances/<id>/jupyter-access``, authenticated by the server's token only).

The console views look the instance up through the user's organization (``portal.scoping``): an outsider gets
a 404, an anonymous visitor the login page, a member who may not enter this instance a 403 at the door
(``instances.interactive.access``). The door's answer is a page that POSTs the ticket to the server's
``login`` URL (so the ticket is in no URL, no access log, no Referer); it is not cached and sends no Referer.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from instances.interactive.access import enter_authorize, may_enter
from instances.interactive.jupyter import (
    JupyterAccessRefused,
    jupyter_access_answer,
    jupyter_enabled,
    jupyter_state,
    jupyter_ticket_issue,
)
from instances.models import Instance
from portal.api.parsers import loads_checked
from portal.lib.http import AuthedHttpRequest
from portal.models import Organization
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
    allowed = state is not None and may_enter(user=request.user, instance=instance)
    ctx = {"org": organization, "instance": instance, "jupyter_state": state, "may_enter": allowed}
    return render(request, "instances/_jupyter_panel.html", ctx)


@login_required
@require_GET
@never_cache
def jupyter_open(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """Hand the member a ticket and send the browser to the instance's JupyterLab (see the module
    docstring); back to the instance page with a message while the server is not there yet."""
    organization, instance = _instance(request, org, pk)
    # A shell in the instance is work on it: its launcher, owners, admins, and others by the organization's
    # setting or a share (a billing viewer never). PermissionRefused: 403.
    enter_authorize(user=request.user, instance=instance)
    try:
        endpoint, ticket = jupyter_ticket_issue(instance=instance, user=request.user)
    except LookupError:
        messages.info(request, _("JupyterLab is not running yet: it starts with the instance."))
        return redirect("instance_detail", org=organization.slug, pk=instance.pk)
    response = render(request, "instances/jupyter_open.html", {"action": f"{endpoint.url}login", "ticket": ticket})
    response["Referrer-Policy"] = "no-referrer"
    return response


@csrf_exempt
def jupyter_access_check(request: HttpRequest, pk: int) -> JsonResponse:
    """The instance's Jupyter server asks whether a user may still enter: body ``{"user": "<id>"}``, answer
    ``{"allowed": bool, "recheck_s": int}`` (``jupyter.jupyter_access_answer``); 401 ``{"allowed": false,
    "error": …}`` (the API's envelope, ``authentication_failed``) for anyone without the server's token, 400
    for a body that is not JSON; other methods than POST: 405 in the API's error envelope (as the runtime's
    callback)."""
    if request.method != "POST":
        response = JsonResponse(
            {"error": {"code": "method_not_allowed", "message": "Use POST.", "details": None}}, status=405
        )
        response["Allow"] = "POST"
        return response
    try:
        body = loads_checked(request.body or b"null")
    except ValueError as exc:
        invalid = {"code": "invalid", "message": str(exc), "details": None}
        return JsonResponse({"allowed": False, "error": invalid}, status=400)
    user_ref = body.get("user") if isinstance(body, dict) else None
    try:
        answer = jupyter_access_answer(
            instance_id=pk, authorization=request.headers.get("Authorization", ""), user_ref=user_ref
        )
    except JupyterAccessRefused as exc:
        refusal = {"code": "authentication_failed", "message": str(exc), "details": None}
        return JsonResponse({"allowed": False, "error": refusal}, status=401)
    response = JsonResponse(answer)
    response["Cache-Control"] = "no-store"
    return response
