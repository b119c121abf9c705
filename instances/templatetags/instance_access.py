"""Template tags of the instance page's SSH and utilization section (``instances/_ssh.html``)."""

from __future__ import annotations

from django import template

from instances.interactive.ssh import SshAccess, ssh_access
from instances.interactive.utilization import UtilizationView, utilization_view
from instances.models import Instance

register = template.Library()


@register.simple_tag
def instance_ssh(instance: Instance) -> SshAccess | None:
    """``{% instance_ssh instance as ssh %}``: how to log in, or None (no SSH server for this instance)."""
    return ssh_access(instance)


@register.simple_tag
def instance_utilization(instance: Instance) -> UtilizationView:
    """``{% instance_utilization instance as util %}``: the latest sample, charts, why metrics are absent."""
    return utilization_view(instance)
