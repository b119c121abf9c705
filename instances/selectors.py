"""Read queries of the instances app (console, API, metering)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import F, Q, QuerySet, Sum
from django.db.models.functions import Coalesce

from instances.choices import HOLDS_CAPACITY, InstanceStatus
from instances.models import (
    Checkpoint,
    GpuQuota,
    GpuType,
    Image,
    Instance,
    InstanceRunSegment,
    JobMetric,
    Node,
    TrainingJob,
)
from portal.models import Organization


def run_segments_overlapping(start: datetime, end: datetime) -> QuerySet[InstanceRunSegment, Any]:
    """Run segments that overlap ``[start, end)`` — the metering interface.

    Returns dicts with ``instance_id``, ``organization_id``, ``gpu_type`` (the GPU type code),
    ``gpu_count`` (the GPUs held in that segment), ``mode``, ``tier`` (the price tier), ``started_at``,
    ``ended_at`` (``None`` while the
    instance still runs), ``seen_until`` (the last sighting of an open segment, ``None`` when none was
    recorded: metering charges an open segment up to it), ordered
    by ``(instance_id, started_at)``. A segment overlaps when it started before ``end`` and has not ended
    or ended after ``start``. Times are timezone-aware UTC.
    """
    return (
        InstanceRunSegment.objects.filter(started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
        .order_by("instance_id", "started_at", "id")
        .values(
            "instance_id",
            "started_at",
            "ended_at",
            "seen_until",
            organization_id=F("instance__organization_id"),
            gpu_type=F("instance__gpu_type__code"),
            gpu_count=Coalesce(F("gpus_held"), F("instance__gpu_count")),  # held in the segment (elastic resume)
            mode=F("instance__mode"),
            tier=F("instance__tier"),
        )
    )


def instances_for_org(organization: Organization) -> QuerySet[Instance]:
    """The organization's instances, newest first, with GPU type and job."""
    return Instance.objects.filter(organization=organization).select_related("gpu_type", "image", "job").order_by("-id")


def jobs_for_org(organization: Organization) -> QuerySet[TrainingJob]:
    """The organization's training jobs, newest first, with their instance."""
    return (
        TrainingJob.objects.filter(organization=organization)
        .select_related("instance", "instance__gpu_type")
        .order_by("-id")
    )


def gpu_types_offered() -> QuerySet[GpuType]:
    """Active GPU types, by code."""
    return GpuType.objects.filter(active=True).order_by("code")


def gpus_in_use(organization: Organization) -> int:
    """GPUs the organization holds now (instances provisioning, running or stopping)."""
    total = Instance.objects.filter(organization=organization, status__in=HOLDS_CAPACITY).aggregate(s=Sum("gpu_count"))[
        "s"
    ]
    return int(total or 0)


def gpu_quota_of(organization: Organization) -> int | None:
    """The organization's GPU quota: its ``GpuQuota`` row, else ``INSTANCES_DEFAULT_GPU_QUOTA`` (None =
    unlimited)."""
    row = GpuQuota.objects.filter(organization=organization).first()
    if row is not None:
        return row.gpus
    return getattr(settings, "INSTANCES_DEFAULT_GPU_QUOTA", None)


def newest_complete_checkpoint(job: TrainingJob) -> Checkpoint | None:
    """The checkpoint a resume starts from: the newest complete one not set aside by a rollback nor deleted."""
    return job.checkpoints.filter(complete=True, rolled_back=False, deleted_at__isnull=True).order_by("-step").first()


def checkpoint_by_id(checkpoint_id: int) -> Checkpoint:
    """One checkpoint by id, for internal tasks that already checked ownership (raises DoesNotExist)."""
    return Checkpoint.objects.select_related("job").get(pk=checkpoint_id)


def checkpoints_of(job: TrainingJob) -> QuerySet[Checkpoint]:
    """The job's checkpoints, newest step first."""
    return job.checkpoints.order_by("-step")


@dataclass(frozen=True)
class CurvePoint:
    """One point of a job's curve: the value reported for ``step`` by the latest attempt that trained it."""

    step: int
    loss: float
    lr: float
    tokens_per_s: float


def loss_curve(job: TrainingJob) -> list[CurvePoint]:
    """The job's training curve on its current timeline, one point per step, ascending. Each attempt
    continues the curve from the step it started at (``started_step``, else the ``resume_from_step`` it was
    given): points of earlier attempts past that step belong to an abandoned timeline (a rollback, or steps
    re-run after a crash) and are left out, and while a rollback is pending (``job.resume_step``) so are
    the points past its target. A step trained again is taken from the newest attempt that reported it.
    Two queries."""
    by_attempt: dict[int, list[CurvePoint]] = {}
    rows = JobMetric.objects.filter(job=job).order_by("attempt__number", "step")
    for number, step, loss, lr, tokens_per_s in rows.values_list(
        "attempt__number", "step", "loss", "lr", "tokens_per_s"
    ):
        by_attempt.setdefault(number, []).append(CurvePoint(step, loss, lr, tokens_per_s))
    points: dict[int, CurvePoint] = {}
    attempts = job.attempts.order_by("number").values_list("number", "started_step", "resume_from_step")
    for number, started, resume_from in attempts:
        start = started if started is not None else (resume_from if resume_from >= 0 else None)
        if start is not None:
            points = {s: p for s, p in points.items() if s <= start}
        for p in by_attempt.get(number, []):
            points[p.step] = p
    if job.resume_step >= 0:
        points = {s: p for s, p in points.items() if s <= job.resume_step}
    return [points[s] for s in sorted(points)]


def nodes_for_scheduler() -> QuerySet[Node]:
    """Every node with its GPU type (the scheduler filters by state itself)."""
    return Node.objects.select_related("gpu_type").order_by("name")


def queued_instances() -> QuerySet[Instance]:
    """Instances waiting for capacity, first come first served."""
    return (
        Instance.objects.filter(status=InstanceStatus.SCHEDULING)
        .select_related("gpu_type")
        .order_by("submitted_at", "id")
    )


def node_views() -> list[Any]:
    """The inventory as the scheduler sees it: every node with GPUs free = total minus the placements of
    instances holding capacity (the portal's own allocation, not the backend's lagging view)."""
    from instances import scheduler

    used: dict[str, int] = {}
    for placement in Instance.objects.filter(status__in=HOLDS_CAPACITY).values_list("placement", flat=True):
        for name, gpus in placement or []:
            used[name] = used.get(name, 0) + int(gpus)
    return [
        scheduler.NodeView(n.name, n.gpu_type.code, n.gpus, max(0, n.gpus - used.get(n.name, 0)), n.block, n.state)  # type: ignore[arg-type]
        for n in nodes_for_scheduler()
    ]


def queue_estimate(*, organization: Organization, gpu_type: str, gpu_count: int, mode: str) -> tuple[bool, str]:
    """Whether a request would start now, and a sentence for the user: where it would run, or why it waits
    and how many requests of that GPU type are ahead. Read-only (nothing is reserved)."""
    from django.utils import timezone
    from django.utils.translation import gettext as _

    from instances import scheduler
    from instances.reason_display import reason_render
    from instances.reasons import reason_fields

    ahead = Instance.objects.filter(status=InstanceStatus.SCHEDULING, gpu_type__code=gpu_type).count()
    request = scheduler.PlacementRequest(
        "estimate",
        str(organization.pk),
        gpu_type,
        gpu_count,
        mode,  # type: ignore[arg-type]
        timezone.now(),
    )
    result = scheduler.place(
        request, node_views(), quota_gpus=gpu_quota_of(organization), used_gpus=gpus_in_use(organization)
    )
    if isinstance(result, scheduler.Placement) and not ahead:
        return True, _("Starts now on %(nodes)s.") % {"nodes": ", ".join(result.node_names)}
    if isinstance(result, scheduler.Placement):
        return False, _("%(n)d request(s) for this GPU type are waiting ahead of you.") % {"n": ahead}
    code, params = reason_fields(result.reason)
    why = reason_render(code=code, params=params, fallback=result.reason)
    return False, _("Waits: %(reason)s (%(n)d request(s) ahead).") % {"reason": why, "n": ahead}


def preemption_summary(instance: Instance) -> dict[str, Any]:
    """What the tier and its preemptions cost an instance (console and API): ``tier``; ``preemptions`` (moves
    to ``preempted``); ``steps_rerun`` (training steps reported more than once: 0 when every resume started
    exactly at the checkpoint saved on preemption) and ``minutes_rerun`` (those steps' share of the billed
    minutes, rounded up; 0 when none); ``minutes_billed`` and ``charged_micros`` (metered minutes and their
    charge, micro-CNY); ``on_demand_micros`` (the same minutes at the on-demand price, by the one charging
    rule) and ``saved_micros`` (the difference)."""
    from billing.models import UsageRecord
    from billing.pricing import PriceBook, cumulative_charge_micros

    preemptions = instance.transitions.filter(to_status=InstanceStatus.PREEMPTED).count()
    steps_rerun = distinct_steps = 0
    job = TrainingJob.objects.filter(instance=instance).first()
    if job is not None:
        reported = JobMetric.objects.filter(job=job)
        distinct_steps = reported.values("step").distinct().count()
        steps_rerun = reported.count() - distinct_steps
    usage = list(
        UsageRecord.objects.filter(instance_id=instance.pk).values_list(
            "minute", "gpu_type", "mode", "gpu_count", "amount_micros"
        )
    )
    book = PriceBook({instance.gpu_type.code})
    runs: dict[tuple[int, int], int] = {}  # (on-demand price, gpus) -> minutes
    for minute, gpu_type, mode, gpus, _amount in usage:
        price = book.at(gpu_type, mode, minute) or 0
        runs[(price, gpus)] = runs.get((price, gpus), 0) + 1
    on_demand = sum(
        cumulative_charge_micros(price_per_gpu_hour_micros=p, gpus=g, minutes=m) for (p, g), m in runs.items()
    )
    charged = sum(row[4] for row in usage)
    minutes = len(usage)
    return {
        "tier": instance.tier,
        "preemptions": preemptions,
        "steps_rerun": steps_rerun,
        "minutes_rerun": -(-steps_rerun * minutes // distinct_steps) if steps_rerun else 0,
        "minutes_billed": minutes,
        "charged_micros": charged,
        "on_demand_micros": on_demand,
        "saved_micros": on_demand - charged,
    }


def instance_labels(instance_ids: Iterable[int]) -> dict[int, tuple[str, int | None]]:
    """``{instance id: (name, training job id or None)}`` for the given ids (one query) — what billing names on
    ledger lines and statements (``billing.line_labels``, a documented hook)."""
    rows = Instance.objects.filter(pk__in=set(instance_ids)).values_list("pk", "name", "job__pk")
    return {pk: (name, job) for pk, name, job in rows}


def instance_image(instance: Instance) -> tuple[Image | None, bool]:
    """The image ``instance`` runs in and whether it is the default: its own image, else the catalogue's
    default image (``Image.is_default``; ``(None, True)`` when the catalogue has none) — what the instance
    page names instead of "—"."""
    if instance.image_id is not None:
        return instance.image, False
    return Image.objects.filter(is_default=True).order_by("pk").first(), True
