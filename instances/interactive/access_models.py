"""The model of access shares (imported by ``instances.models``; the rule that reads them is
:mod:`instances.interactive.access`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class AccessShare(models.Model):
    """The launcher of ``instance`` (or the creator of ``volume``), an owner or an admin let ``user``, a member
    of ``organization`` who may launch, enter that instance (JupyterLab, SSH) or attach that volume. Exactly
    one of ``instance`` / ``volume`` is set; one row per (target, user). Deleted when it is withdrawn or the
    user leaves the organization (a member who comes back starts with no shares)."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.CASCADE, related_name="access_shares")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_shares")
    instance = models.ForeignKey(
        "instances.Instance", null=True, blank=True, on_delete=models.CASCADE, related_name="shares"
    )
    volume = models.ForeignKey(
        "instances.Volume", null=True, blank=True, on_delete=models.CASCADE, related_name="shares"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "instances"
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(instance__isnull=False, volume__isnull=True)
                | Q(instance__isnull=True, volume__isnull=False),
                name="access_share_one_target",
            ),
            models.UniqueConstraint(
                fields=["instance", "user"], condition=Q(instance__isnull=False), name="uniq_instance_share"
            ),
            models.UniqueConstraint(
                fields=["volume", "user"], condition=Q(volume__isnull=False), name="uniq_volume_share"
            ),
        ]

    def __str__(self) -> str:
        target = f"instance {self.instance_id}" if self.instance_id else f"volume {self.volume_id}"
        return f"{target} shared with {self.user_id}"
