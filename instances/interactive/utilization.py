"""Utilization of running instances: sampled by the reconcile tick (``instances_reconcile`` calls
:func:`utilization_sample_due`), kept as a bounded window of :class:`UtilizationSample` rows per instance,
charted on the instance page with the project's chart module (``portal.lib.charts``).

Instances on the local backend are sampled from their processes (on this machine: the launcher's process
group plus the processes carrying the job's marker, as the backend itself finds them, and the node's cards
through NVML); on Kubernetes from the cluster's metrics API (``metrics.k8s.io/v1beta1`` PodMetrics of the
attempt's pods, as metrics-server serves them: CPU cores and memory, no GPU; the portal's service account
needs ``get``/``list`` on ``pods.metrics.k8s.io``). Settings:
``INSTANCES_UTILIZATION_EVERY_S`` (least seconds between two samples of one instance, default 30) and
``INSTANCES_UTILIZATION_KEEP`` (samples kept per instance, default 120: an hour at the default pace).

The samples also tell idle autostop whether the instance's own processes work (:func:`sample_busy`: CPU use
of at least ``INSTANCES_IDLE_CPU_PERCENT`` of one core (default 10) over a sample's interval, or a card
carrying one of its processes at least ``INSTANCES_IDLE_GPU_PERCENT`` busy (default 10)): a sample that shows
work moves the instance's ``last_activity_at`` to its time, so the record outlives the kept window.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from instances.backends.k8s_objects import JOB_LABEL
from instances.backends.kubernetes import KubernetesBackend
from instances.backends.local import LocalBackend
from instances.backends.procfs import job_processes
from instances.choices import InstanceStatus
from instances.interactive import metrics
from instances.interactive.utilization_models import UtilizationSample
from instances.models import Instance
from instances.services import backend as boundary
from instances.services.backend import _setting
from portal.lib.charts import svg_line_chart

log = logging.getLogger(__name__)
_METRICS_REFUSED: set[int] = set()  # statuses of the metrics API already logged as warnings by this process

GPU_ABSENT = {
    metrics.NOT_SAMPLED: gettext_lazy(
        "GPU use of pods is not sampled on Kubernetes (the cluster's metrics API reports CPU and memory)."
    ),
    metrics.NO_NVML: gettext_lazy("No NVIDIA GPU on this node (the NVIDIA driver's NVML library is not installed)."),
    metrics.NO_GPU: gettext_lazy("No NVIDIA GPU on this node (NVML sees no card)."),
    metrics.NVML_ERROR: gettext_lazy("The NVIDIA driver did not answer (NVML error)."),
}


def _local_pids(instance: Instance) -> list[int] | None:
    """Pids of the instance's current local attempt, or None when it is not a local one."""
    handle = instance.attempts.order_by("-number").values_list("handle", flat=True).first()
    if not handle or not handle.startswith("local:"):
        return None
    pgid, ws = LocalBackend.parse_handle(handle)
    return [p.pid for p in job_processes(str(ws), pgid)]


def _cards_of(totals: metrics.ProcessTotals, gpu: metrics.GpuReading) -> list[dict[str, Any]]:
    """The node's cards as the instance sees them: each card's reading plus ``instance_processes`` (how many
    of ``totals.pids`` have a compute context on it) and ``instance_memory_bytes`` (their GPU memory), both
    None where NVML did not list the card's processes. Other instances' pids are never stored."""
    mine = set(totals.pids)
    cards = []
    for card in gpu.cards:
        on_card = gpu.processes.get(card["index"])
        if on_card is None:
            cards.append({**card, "instance_processes": None, "instance_memory_bytes": None})
            continue
        own = [used for pid, used in on_card.items() if pid in mine]
        cards.append({**card, "instance_processes": len(own), "instance_memory_bytes": sum(own)})
    return cards


def _kubernetes_usage(instance: Instance) -> tuple[int, float, int] | None:
    """(containers, CPU cores in use, memory bytes) of the pods of the instance's current Kubernetes attempt,
    from the cluster's metrics API (``metrics.k8s.io/v1beta1`` PodMetrics with the attempt's Job label; usage
    averaged over metrics-server's window), or None when it is not such an attempt or the API refuses (no
    metrics-server: 404; no right to read it: 403; logged as a warning once per status and process)."""
    handle = instance.attempts.order_by("-number").values_list("handle", flat=True).first()
    backend = boundary.compute_backend()
    if not handle or not handle.startswith("k8s:") or not isinstance(backend, KubernetesBackend):
        return None
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.utils import parse_quantity

    namespace, name = backend.parse_handle(handle)
    try:
        found: dict[str, Any] = cast(
            dict[str, Any],
            client.CustomObjectsApi(backend.api_client).list_namespaced_custom_object(
                "metrics.k8s.io", "v1beta1", namespace, "pods", label_selector=f"{JOB_LABEL}={name}"
            ),
        )
    except ApiException as exc:  # no metrics-server (404), no right to read it (403): a warning once
        level = logging.DEBUG if exc.status in _METRICS_REFUSED else logging.WARNING
        _METRICS_REFUSED.add(exc.status)
        log.log(level, "the metrics API did not answer for instance %s: %s %s", instance.pk, exc.status, exc.reason)
        return None
    containers = [c for pod in found.get("items", []) for c in pod.get("containers", [])]
    cores = sum(float(parse_quantity(c.get("usage", {}).get("cpu", "0"))) for c in containers)
    memory = sum(int(parse_quantity(c.get("usage", {}).get("memory", "0"))) for c in containers)
    return len(containers), cores, memory


def utilization_record(
    *,
    instance: Instance,
    totals: metrics.ProcessTotals,
    gpu: metrics.GpuReading,
    now: datetime | None = None,
    cpu_rate_percent: float | None = None,
) -> UtilizationSample:
    """Store one sample (CPU % from the previous sample's CPU time, clamped at 0 when processes ended; the
    cards with the instance's share, :func:`_cards_of`) and keep the newest ``INSTANCES_UTILIZATION_KEEP``; a
    sample showing work (:func:`sample_busy`) moves ``Instance.last_activity_at`` forward to ``now`` (a
    compare-and-set, as ``instances.interactive.idle.instance_activity_record``). ``cpu_rate_percent``: a
    reader that measures a rate (the metrics API on Kubernetes) gives the CPU share itself; the cumulative
    ``cpu_seconds`` is then integrated from it (``totals.cpu_seconds`` is not used). Returns the sample."""
    now = now or timezone.now()
    keep = int(_setting("INSTANCES_UTILIZATION_KEEP", 120))
    with transaction.atomic():
        prev = UtilizationSample.objects.filter(instance=instance).order_by("-sampled_at", "-id").first()
        cpu_percent, cpu_seconds = None, totals.cpu_seconds
        seconds = (now - prev.sampled_at).total_seconds() if prev is not None and now > prev.sampled_at else 0.0
        if cpu_rate_percent is not None:
            cpu_percent = round(cpu_rate_percent, 1)
            cpu_seconds = round((prev.cpu_seconds if prev is not None else 0.0) + cpu_rate_percent / 100 * seconds, 2)
        elif prev is not None and seconds > 0:
            cpu_percent = round(max(0.0, totals.cpu_seconds - prev.cpu_seconds) / seconds * 100, 1)
        sample = UtilizationSample.objects.create(
            instance=instance,
            sampled_at=now,
            processes=totals.processes,
            cpu_seconds=cpu_seconds,
            cpu_percent=cpu_percent,
            memory_bytes=totals.memory_bytes,
            gpus=_cards_of(totals, gpu),
            gpu_absent=gpu.absent,
            gpu_detail=gpu.detail[:200],
        )
        old = UtilizationSample.objects.filter(instance=instance).order_by("-sampled_at", "-id")[keep:]
        UtilizationSample.objects.filter(pk__in=list(old.values_list("pk", flat=True))).delete()
        if sample_busy(sample):  # the instance's own processes work: not idle (idle autostop reads it)
            Instance.objects.filter(pk=instance.pk).filter(
                Q(last_activity_at__isnull=True) | Q(last_activity_at__lt=now)
            ).update(last_activity_at=now)
    return sample


def utilization_sample_due(*, now: datetime | None = None) -> int:
    """Sample every running local or Kubernetes instance whose last sample is at least
    ``INSTANCES_UTILIZATION_EVERY_S`` old (or that has none); returns how many were sampled. Never raises into
    the reconcile tick (a metrics API that does not answer is logged, and the instance has no sample)."""
    now = now or timezone.now()
    every = timedelta(seconds=float(_setting("INSTANCES_UTILIZATION_EVERY_S", 30)))
    running = Instance.objects.filter(status=InstanceStatus.RUNNING).filter(
        Q(attempts__handle__startswith="local:") | Q(attempts__handle__startswith="k8s:")
    )
    due = [
        i
        for i in running.distinct().annotate(last=Max("utilization_samples__sampled_at"))
        if i.last is None or now - i.last >= every
    ]
    gpu: metrics.GpuReading | None = None
    sampled = 0
    for instance in due:
        try:
            pids = _local_pids(instance)
            if pids is not None:
                gpu = gpu or metrics.gpu_reading()  # one NVML reading per tick: the cards are the node's
                utilization_record(instance=instance, totals=metrics.process_totals(pids), gpu=gpu, now=now)
                sampled += 1
                continue
            usage = _kubernetes_usage(instance)
            if usage is None:
                continue
            containers, cores, memory = usage
            utilization_record(
                instance=instance,
                totals=metrics.ProcessTotals(containers, 0.0, memory),
                gpu=metrics.GpuReading(absent=metrics.NOT_SAMPLED),
                now=now,
                cpu_rate_percent=cores * 100,
            )
            sampled += 1
        except Exception:  # a sample is never worth a failed reconcile
            log.exception("utilization sample of instance %s failed", instance.pk)
    return sampled


def busy_thresholds() -> tuple[float, float]:
    """(CPU %, GPU %) at or above which a sample shows the instance working: ``INSTANCES_IDLE_CPU_PERCENT``
    (of one core, default 10) and ``INSTANCES_IDLE_GPU_PERCENT`` (of one card, default 10)."""
    return (
        float(_setting("INSTANCES_IDLE_CPU_PERCENT", 10)),
        float(_setting("INSTANCES_IDLE_GPU_PERCENT", 10)),
    )


def sample_busy(sample: UtilizationSample, *, thresholds: tuple[float, float] | None = None) -> bool:
    """Whether the instance's processes worked over the sample's interval: CPU use (``cpu_percent``, since
    the previous sample; 100 = one core) at or above the CPU threshold, or a card with one of its processes
    on it (``instance_processes`` > 0) at or above the GPU threshold. A card whose processes NVML did not
    list (``instance_processes`` None, or a sample from before it was recorded) counts when busy: unknown
    is not idle."""
    cpu_min, gpu_min = thresholds or busy_thresholds()
    if sample.cpu_percent is not None and sample.cpu_percent >= cpu_min:
        return True
    return any(
        card.get("instance_processes", None) != 0 and float(card.get("utilization_percent") or 0) >= gpu_min
        for card in sample.gpus or []
    )


def utilization_absent(instance: Instance, latest: UtilizationSample | None) -> list[str]:
    """The sentences saying why metrics are missing: no samples yet or another backend (no ``latest``), or
    why the newest sample has no GPU readings."""
    if latest is None:
        if instance.attempts.filter(handle__startswith="k8s:").exists():
            return [_("No samples: the cluster's metrics API (metrics-server) has not answered for this instance.")]
        local = instance.attempts.filter(handle__startswith="local:").exists() or not instance.attempts.exists()
        return [
            _("No samples yet: the first one is taken within a minute of the start.")
            if local
            else _("Utilization is sampled for instances on the local or Kubernetes backend; this one runs elsewhere.")
        ]
    return [str(GPU_ABSENT.get(latest.gpu_absent, latest.gpu_absent))] if latest.gpu_absent else []


@dataclass
class UtilizationView:
    """What the instance page shows: the latest sample (or None), the charts, and why metrics are absent."""

    latest: UtilizationSample | None
    charts: list[SafeString] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)


def utilization_view(instance: Instance) -> UtilizationView:
    """The samples of ``instance`` as charts (CPU %, memory MiB, and per card GPU % and memory MiB; x axis:
    minutes before the latest sample) and the sentences that explain missing metrics."""
    samples = list(UtilizationSample.objects.filter(instance=instance).order_by("sampled_at", "id"))
    if not samples:
        return UtilizationView(latest=None, absent=utilization_absent(instance, None))
    last = samples[-1]

    def minutes(s: UtilizationSample) -> float:
        return round((s.sampled_at - last.sampled_at).total_seconds() / 60, 2)

    def ago(x: float) -> str:  # the x axis reads "N min ago … now", not "-N … 0"
        return str(_("now")) if x == 0 else _("%(n)s min ago") % {"n": f"{-x:g}"}

    axis: dict[str, Any] = {"y_min": 0, "x_label": ago}  # use and sizes start at 0: never a negative axis
    charts = [
        svg_line_chart(
            [(minutes(s), s.cpu_percent) for s in samples if s.cpu_percent is not None],
            title=_("CPU (%)"),
            unit="%",
            **axis,
        ),
        svg_line_chart(
            [(minutes(s), s.memory_bytes / 2**20) for s in samples], title=_("Memory (MiB)"), color="#1f8a4c", **axis
        ),
    ]
    for card in last.gpus:
        idx = card["index"]
        per = [(minutes(s), c) for s in samples for c in s.gpus if c["index"] == idx]
        charts.append(
            svg_line_chart(
                [(x, c["utilization_percent"]) for x, c in per],
                title=_("GPU %(i)s utilization (%%)") % {"i": idx},
                color="#b4541a",
                unit="%",
                **axis,
            )
        )
        charts.append(
            svg_line_chart(
                [(x, c["memory_used_bytes"] / 2**20) for x, c in per],
                title=_("GPU %(i)s memory (MiB)") % {"i": idx},
                color="#7a3db8",
                **axis,
            )
        )
    return UtilizationView(latest=last, charts=charts, absent=utilization_absent(instance, last), gpus=last.gpus)
