"""Console view of the instance page's SSH and utilization section, refreshed by htmx."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from instances.models import Instance
from portal.lib.http import AuthedHttpRequest
from portal.scoping import request_organization, scoped_get_or_404


@login_required
def instance_access(request: AuthedHttpRequest, org: str, pk: int) -> HttpResponse:
    """The ``instances/_ssh.html`` section alone (an outsider's or a missing instance is a 404)."""
    organization = request_organization(request, slug=org)
    instance = scoped_get_or_404(Instance.objects.select_related("gpu_type"), organization=organization, pk=pk)
    return render(request, "instances/_ssh.html", {"org": organization, "instance": instance})
