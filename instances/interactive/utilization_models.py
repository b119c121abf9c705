"""The model of utilization samples (imported by ``instances.models``; the sampling is in
:mod:`instances.interactive.utilization`)."""

from __future__ import annotations

from django.db import models


class UtilizationSample(models.Model):
    """One reading of an instance's processes and the node's NVIDIA cards. A bounded window is kept per
    instance (``INSTANCES_UTILIZATION_KEEP`` newest samples). ``cpu_seconds``: cumulative CPU time (user +
    system, seconds) of the processes alive at ``sampled_at``; ``cpu_percent``: their CPU use since the
    previous sample (100 = one core busy), None for the first one; ``memory_bytes``: resident memory;
    ``gpus``: one dict per card (see ``instances.interactive.metrics.GpuReading``); ``gpu_absent``: why there
    are no GPU readings (a code of ``instances.interactive.metrics``), "" when there are."""

    instance = models.ForeignKey("instances.Instance", on_delete=models.CASCADE, related_name="utilization_samples")
    sampled_at = models.DateTimeField()
    processes = models.PositiveIntegerField()
    cpu_seconds = models.FloatField()
    cpu_percent = models.FloatField(null=True, blank=True)
    memory_bytes = models.BigIntegerField()
    gpus = models.JSONField(default=list, blank=True)
    gpu_absent = models.CharField(max_length=20, blank=True)
    gpu_detail = models.CharField(max_length=200, blank=True)

    class Meta:
        app_label = "instances"
        ordering = ["sampled_at", "id"]
        indexes = [models.Index(fields=["instance", "sampled_at"], name="util_instance_time")]

    def __str__(self) -> str:
        return f"{self.instance_id} @ {self.sampled_at:%H:%M:%S}"
