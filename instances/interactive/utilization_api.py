"""``GET /api/v1/instances/{id}/utilization``: the kept utilization samples of one instance, with their units,
for partners who watch their fleet (the action lives on ``instances.api.views.InstanceViewSet``, so the
lookup is scoped to the request's organization: another organization's instance is a 404)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from instances.interactive.utilization import busy_thresholds, sample_busy, utilization_absent
from instances.interactive.utilization_models import UtilizationSample
from instances.models import Instance
from instances.services.backend import _setting


class UtilizationCardSerializer(serializers.Serializer[Any]):
    """One NVIDIA card of the instance's node at the sample's time (NVML)."""

    index = serializers.IntegerField(help_text="the card's NVML index on its node")
    name = serializers.CharField(help_text="the card's model, as NVML names it")
    utilization_percent = serializers.IntegerField(
        help_text="percent (0–100) of NVML's last sample period (1/6 s to 1 s) in which a kernel ran on the card, "
        "whoever's process ran it"
    )
    memory_used_bytes = serializers.IntegerField(help_text="bytes of card memory in use, all processes together")
    memory_total_bytes = serializers.IntegerField(help_text="bytes of card memory")
    instance_processes = serializers.IntegerField(
        allow_null=True,
        help_text="how many of this instance's processes have a compute context on the card; null when NVML "
        "did not list the card's processes",
    )
    instance_memory_bytes = serializers.IntegerField(
        allow_null=True, help_text="bytes of card memory held by this instance's processes; null when unknown"
    )


class UtilizationSampleSerializer(serializers.ModelSerializer[UtilizationSample]):
    """One reading of the instance's processes (the local backend samples them) and of its node's cards."""

    sampled_at = serializers.DateTimeField(help_text="when the sample was taken (ISO 8601, with its UTC offset)")
    processes = serializers.IntegerField(help_text="the instance's processes alive at the sample")
    cpu_seconds = serializers.FloatField(help_text="cumulative CPU time (user + system) of those processes, in seconds")
    cpu_percent = serializers.FloatField(
        allow_null=True,
        help_text="CPU use since the previous sample in percent of one core (100 = one core busy, 200 = two); "
        "null for the first sample",
    )
    memory_bytes = serializers.IntegerField(help_text="resident memory of those processes, in bytes")
    gpus = UtilizationCardSerializer(many=True, help_text="the node's cards; empty when gpu_absent says why")
    gpu_absent = serializers.CharField(
        help_text="why there are no GPU readings: no_nvml (no NVIDIA driver), no_gpu (NVML sees no card), "
        "nvml_error; empty when there are"
    )
    busy = serializers.SerializerMethodField(
        help_text="whether the sample shows the instance's processes at work (CPU at or above cpu_busy_percent, "
        "or a card carrying one of its processes at or above gpu_busy_percent): idle autostop counts it as activity"
    )

    class Meta:
        model = UtilizationSample
        fields = [
            "sampled_at",
            "processes",
            "cpu_seconds",
            "cpu_percent",
            "memory_bytes",
            "gpus",
            "gpu_absent",
            "busy",
        ]

    def get_busy(self, obj: UtilizationSample) -> bool:
        return sample_busy(obj, thresholds=self.context.get("thresholds"))


class InstanceUtilizationSerializer(serializers.Serializer[Any]):
    """Output of ``GET /instances/{id}/utilization``: the kept samples, oldest first, and their pace."""

    instance = serializers.IntegerField(help_text="the instance's id")
    every_s = serializers.IntegerField(help_text="least seconds between two samples of one instance")
    keep = serializers.IntegerField(help_text="how many of the newest samples are kept per instance")
    cpu_busy_percent = serializers.FloatField(
        help_text="CPU use (percent of one core) at or above which a sample counts as work for idle autostop"
    )
    gpu_busy_percent = serializers.FloatField(
        help_text="card utilization (percent) at or above which a card carrying one of the instance's processes "
        "counts as work for idle autostop"
    )
    absent = serializers.ListField(
        child=serializers.CharField(),
        help_text="why metrics are missing (no samples yet, another backend, no NVIDIA GPU), in the request's language",
    )
    samples = UtilizationSampleSerializer(many=True)


def utilization_payload(instance: Instance) -> tuple[dict[str, Any], dict[str, Any]]:
    """(data, serializer context) for :class:`InstanceUtilizationSerializer` of ``instance``'s kept samples."""
    samples = list(UtilizationSample.objects.filter(instance=instance).order_by("sampled_at", "id"))
    thresholds = busy_thresholds()
    data = {
        "instance": instance.pk,
        "every_s": int(_setting("INSTANCES_UTILIZATION_EVERY_S", 30)),
        "keep": int(_setting("INSTANCES_UTILIZATION_KEEP", 120)),
        "cpu_busy_percent": thresholds[0],
        "gpu_busy_percent": thresholds[1],
        "absent": utilization_absent(instance, samples[-1] if samples else None),
        "samples": samples,
    }
    return data, {"thresholds": thresholds}
