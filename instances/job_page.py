"""What the job page shows beside the curve: the dataset versions it trains on, its cost so far and how long
it has been running (read-only; uses the datasets app's selectors and the metering records). The price per
hour and the cost so far of any instance (:func:`instance_cost`) live here too: the job page and the instance
page show the same figures from the one function."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Sum
from django.utils import timezone

from billing.money import format_cny
from instances.models import Instance, TrainingJob, placement_gpus


@dataclass(frozen=True)
class InstanceCost:
    """``price_per_hour_micros``: micro-CNY one hour of the instance costs now (its GPUs held — the
    placement, else ``gpu_count`` — at the price book's price for its GPU type, mode and tier, by the one
    charging rule ``billing.pricing.cumulative_charge_micros``); None when the price book has no price.
    ``cost_micros``: micro-CNY charged so far (every metered minute of the instance, every attempt)."""

    price_per_hour_micros: int | None
    cost_micros: int

    @property
    def cost_cny(self) -> str:
        """The cost so far with 2 decimals (``billing.money.format_cny``)."""
        return format_cny(self.cost_micros)

    @property
    def price_per_hour_cny(self) -> str:
        """The price per hour with 2 decimals (``billing.money.format_cny``), ``""`` without a price."""
        return "" if self.price_per_hour_micros is None else format_cny(self.price_per_hour_micros)


def instance_cost(instance: Instance, *, now: datetime | None = None) -> InstanceCost:
    """The price per hour and the cost so far of ``instance`` (two queries: the price book rows of its GPU
    type, the sum of its usage records; a third for a tier discount)."""
    from billing.pricing import PriceBook, cumulative_charge_micros

    now = now or timezone.now()
    code = instance.gpu_type.code
    price = PriceBook({code}).at(code, instance.mode, now, instance.tier)
    gpus = placement_gpus(instance.placement) or instance.gpu_count
    per_hour = (
        None if price is None else cumulative_charge_micros(price_per_gpu_hour_micros=price, gpus=gpus, minutes=60)
    )
    return InstanceCost(per_hour, cost_so_far_micros(instance))


def cost_so_far_micros(instance: Instance) -> int:
    """Micro-CNY charged so far for ``instance``: the sum of its metered minutes (one query)."""
    from billing.models import UsageRecord  # metering's per-minute charges (billing's read model)

    return int(UsageRecord.objects.filter(instance_id=instance.pk).aggregate(s=Sum("amount_micros"))["s"] or 0)


@dataclass(frozen=True)
class JobSummary:
    """``datasets``: ``[{"dataset_id", "name", "version"}]`` in mount order; ``cost_micros``: micro-CNY
    charged so far for the job's instance (all minutes metered, every attempt); ``running``: time in run
    segments (open one up to ``now``); ``since_launch``: ``now`` minus the instance's creation."""

    datasets: list[dict[str, Any]]
    cost_micros: int
    running: timedelta
    since_launch: timedelta

    @property
    def cost_cny(self) -> str:
        """The cost as CNY with 2 decimals, rounded half-up (``billing.money.format_cny``)."""
        return format_cny(self.cost_micros)


def _hms(d: timedelta) -> str:
    total = max(0, int(d.total_seconds()))
    return f"{total // 3600}:{total % 3600 // 60:02d}:{total % 60:02d}"


def job_summary(job: TrainingJob, *, now: datetime | None = None) -> JobSummary:
    """The summary of ``job`` (two queries plus one for the dataset versions)."""
    from datasets.selectors import versions_visible_to

    now = now or timezone.now()
    instance = job.instance
    ids = [int(i) for i in job.dataset_version_ids or []]
    versions = {v.pk: v for v in versions_visible_to(job.organization).filter(pk__in=ids).select_related("dataset")}
    datasets = [
        {"dataset_id": v.dataset_id, "name": v.dataset.name, "version": v.number}
        for v in (versions.get(i) for i in ids)
        if v is not None
    ]
    cost = cost_so_far_micros(instance)
    running = timedelta()
    for start, end in instance.run_segments.values_list("started_at", "ended_at"):
        running += (end or now) - start
    return JobSummary(datasets, cost, running, now - instance.created_at)


@dataclass(frozen=True)
class JobSpeed:
    """``steps_per_s``: optimizer steps per second of the newest attempt, from its first and last reported
    metric (None with fewer than two reports apart in time); ``eta``: time left to ``max_steps`` at that rate
    (None without a rate, a step limit or while not running)."""

    steps_per_s: float | None
    eta: timedelta | None


def job_speed(job: TrainingJob) -> JobSpeed:
    """Steps per second and ETA of ``job`` (two queries)."""
    from instances.choices import InstanceStatus
    from instances.models import JobMetric

    attempt = job.attempts.order_by("-number").values_list("pk", flat=True).first()
    if attempt is None:
        return JobSpeed(None, None)
    rows = JobMetric.objects.filter(attempt_id=attempt).order_by("step")
    first = rows.values_list("step", "reported_at").first()
    last = rows.reverse().values_list("step", "reported_at").first()
    if first is None or last is None or last[0] <= first[0]:
        return JobSpeed(None, None)
    seconds = (last[1] - first[1]).total_seconds()
    if seconds <= 0:
        return JobSpeed(None, None)
    rate = (last[0] - first[0]) / seconds
    max_steps = int((job.hyperparameters or {}).get("max_steps") or 0)
    eta = None
    if max_steps and job.instance.status == InstanceStatus.RUNNING:
        eta = timedelta(seconds=round(max(0, max_steps - job.last_step) / rate))
    return JobSpeed(rate, eta)


def format_duration(d: timedelta) -> str:
    """``H:MM:SS`` (hours may exceed 24)."""
    return _hms(d)


def mfu_note_display(progress: dict[str, Any]) -> str:
    """Why the job shows no MFU, in the reader's language, from the newest progress event (a dict):
    its ``mfu_note_code`` (``cpu`` | ``unknown_device`` with ``mfu_device``; ``instances/runtime/mfu.py``),
    or, for a runtime from before the code, its English ``mfu_note`` recognised by its two wordings;
    the runtime's own text for a code or note this portal does not know. ``""`` for no note."""
    from django.utils.translation import gettext as _

    note, code = str(progress.get("mfu_note") or ""), progress.get("mfu_note_code")
    device = str(progress.get("mfu_device") or "")
    if code is None:  # an older runtime: the note's wording is all there is
        unknown = re.match(r"peak of (.+) unknown \(", note)
        code = "cpu" if note.startswith("no GPU") else "unknown_device" if unknown else ""
        device = unknown.group(1).strip("'\"") if unknown else ""
    if code == "cpu":
        return _("No GPU: the peak FLOP/s of a CPU is not tabulated, so MFU is not computed.")
    if code == "unknown_device" and device:
        return _("The peak FLOP/s of %(device)s is not in the runtime's table, so MFU is not computed.") % {
            "device": device
        }
    return note


@dataclass(frozen=True)
class CrashReport:
    """Why the job's newest failed attempt ended, for the job page: ``summary`` in the reader's language (what
    the runtime's exit code means, ``instances.reasons.runtime_exit_reason``, or the attempt's own reason when
    the runtime said nothing: a kill, a lost node), ``message`` the runtime's own words (English, technical; ""
    when none) and ``lines`` the last lines of that attempt's rank-0 log, where the traceback is."""

    attempt: int
    summary: str
    message: str
    lines: list[str]


def crash_report(job: TrainingJob, *, lines: int = 15) -> CrashReport | None:
    """The :class:`CrashReport` of the job's newest attempt when that attempt failed; None otherwise (no
    attempt failed, or a later attempt runs or ended otherwise: an old crash is history, in the attempts
    table). Two queries and one log read (the live log or the archived copy, ``instances.joblogs.job_log``)."""
    from instances.choices import AttemptState
    from instances.joblogs import UnknownRank, job_log
    from instances.reason_display import reason_render
    from instances.reasons import runtime_exit_reason

    attempt = job.attempts.order_by("-number").first()
    if attempt is None or attempt.state != AttemptState.FAILED:
        return None
    said: dict[str, Any] = (
        job.events.filter(attempt=attempt.number, type="exit")
        .order_by("-seq")
        .values_list("payload", flat=True)
        .first()
        or {}
    )
    if said:
        code = said.get("exit_code")
        step = said.get("step")
        why = runtime_exit_reason(code if isinstance(code, int) else None, step if isinstance(step, int) else None)
        summary = reason_render(code=why.code, params=why.params, fallback=str(why))
    else:
        summary = attempt.message_display
    try:
        tail = job_log(job=job, attempt_number=attempt.number, lines=lines).lines
    except UnknownRank:  # never submitted: no log
        tail = []
    return CrashReport(attempt.number, summary, str(said.get("message") or ""), list(tail))
