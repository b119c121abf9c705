"""GPU catalog, node inventory, instances (with their transition log and run segments) and training jobs.

Invariants:
- an instance's ``status`` changes only through ``instances.services.instance_transition`` (one table in
  ``choices.py``); each change writes one ``InstanceTransition`` row and one audit row;
- an instance has at most one open ``InstanceRunSegment`` (``ended_at`` null), opened on entering
  ``running`` and closed on leaving it; metering reads these segments;
- runtime events are stored once per ``(job, attempt, seq)`` (unique constraint), so a resent batch
  changes nothing;
- a job attempt's token is stored as its SHA-256 only.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from billing.choices import PriceTier, RentalMode
from instances.choices import (
    AttemptState,
    Engine,
    InstanceKind,
    InstanceStatus,
    JobOutcome,
    ModelPreset,
    NodeState,
)
from instances.reason_display import reason_render


class GpuType(models.Model):
    """A GPU model offered for rent. ``code`` is the key of the price book (``billing.GpuPrice.gpu_type``)."""

    code = models.CharField(max_length=40, unique=True)
    name = models.CharField(_("name"), max_length=100)
    memory_gib = models.PositiveIntegerField(_("memory (GiB)"))
    interconnect = models.CharField(_("interconnect"), max_length=60, blank=True)
    gpus_per_node = models.PositiveIntegerField(default=8)
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["code"]
        verbose_name = _("GPU type")
        verbose_name_plural = _("GPU types")

    def __str__(self) -> str:
        return self.code


class Image(models.Model):
    """A container image the work runs in, with the framework versions it carries."""

    name = models.CharField(_("name"), max_length=120, unique=True)
    reference = models.CharField(max_length=200, help_text=_("Container image reference"))
    pytorch_version = models.CharField(max_length=20)
    cuda_version = models.CharField(max_length=20, blank=True)
    deepspeed_version = models.CharField(max_length=20, blank=True)
    megatron_version = models.CharField(max_length=20, blank=True)
    is_default = models.BooleanField(default=False)

    class Meta:
        ordering = ["name"]
        verbose_name = _("image")
        verbose_name_plural = _("images")

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    """A machine of the inventory, synced from the backend (``instances.tasks.sync_inventory``).

    ``gpus``: GPUs (CPU slots on the local backend); ``block``: topology block (rack / switch). ``state``
    is the portal's own (cordon / drain in the back office); the backend's view only adds and updates rows.
    """

    name = models.CharField(max_length=120, unique=True)
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="nodes")
    gpus = models.PositiveIntegerField()
    block = models.CharField(max_length=80, default="default")
    state = models.CharField(max_length=10, choices=NodeState.choices, default=NodeState.READY)
    backend_free_gpus = models.PositiveIntegerField(default=0)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name = _("node")
        verbose_name_plural = _("nodes")

    def __str__(self) -> str:
        return self.name


class GpuQuota(models.Model):
    """An organization's GPU quota (GPUs held at once, all types); no row = the default setting."""

    organization = models.OneToOneField("portal.Organization", on_delete=models.CASCADE, related_name="gpu_quota")
    gpus = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.organization}: {self.gpus} GPUs"


class Instance(models.Model):
    """Rented capacity: ``gpu_count`` GPUs of ``gpu_type`` in ``mode``, running a training job or a command.

    ``placement``: ``[[node_name, gpus], …]`` from the scheduler while the instance holds capacity.
    ``queue_position`` / ``status_reason``: what the user sees while it waits; the reason is stored as English
    text plus ``status_reason_code`` / ``status_reason_params`` and shown by :attr:`status_reason_display`
    in the reader's language (``instances.reasons``).
    ``idempotency_key``: the API's ``Idempotency-Key`` (unique per organization when given).
    ``tier``: on-demand, or interruptible (charged at the price book's discount; may be preempted for an
    on-demand request, ``instances.preemption``); ``preempt_requested_at``: the preemption notice was given
    and the attempt is being stopped (the attempt's end then counts as a preemption, not a stop);
    ``preempt_for``: the request it was given for; ``preempt_started_at``: the preemption task began stopping
    the attempt — before that, a notice whose request no longer waits is withdrawn (the instance keeps
    running, nothing is counted as a preemption).
    Idle autostop (interactive instances, ``instances.interactive.idle``): ``idle_autostop_minutes``
    (None or 0 = off; the organization's default at launch), ``last_activity_at`` (activity the portal
    records), ``idle_warned_at`` (the warning of the current idle period), ``autostopped_at``.
    """

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="instances")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(_("name"), max_length=100)
    kind = models.CharField(max_length=12, choices=InstanceKind.choices, default=InstanceKind.TRAINING)
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="instances")
    gpu_count = models.PositiveIntegerField()
    # "resume on at least K GPUs": 0 = only on gpu_count; else a preempted training job may resume on any count
    # of elastic_gpu_counts (those >= K below gpu_count that divide its global batch, largest first; launch)
    elastic_min_gpus = models.PositiveIntegerField(default=0)
    elastic_gpu_counts = models.JSONField(default=list, blank=True)
    mode = models.CharField(max_length=12, choices=RentalMode.choices, default=RentalMode.CONTAINER)
    image = models.ForeignKey(Image, null=True, blank=True, on_delete=models.PROTECT)
    command = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=InstanceStatus.choices, default=InstanceStatus.PENDING)
    status_reason = models.CharField(max_length=300, blank=True)  # English text (API, webhooks, old rows)
    status_reason_code = models.CharField(max_length=64, blank=True)  # a code of instances.reasons.REASON_TEXTS
    status_reason_params = models.JSONField(default=dict, blank=True)
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    placement = models.JSONField(default=list, blank=True)
    submitted_at = models.DateTimeField(default=timezone.now)
    idempotency_key = models.CharField(max_length=200, blank=True)
    tier = models.CharField(_("tier"), max_length=20, choices=PriceTier.choices, default=PriceTier.ON_DEMAND)
    preempt_requested_at = models.DateTimeField(null=True, blank=True)
    # the waiting on-demand request the notice was given for (withdrawn if it stops waiting first), and when
    # the preemption task began stopping the attempt (from then on the notice can no longer be withdrawn)
    preempt_for = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    preempt_started_at = models.DateTimeField(null=True, blank=True)
    idle_autostop_minutes = models.PositiveIntegerField(_("idle autostop (minutes)"), null=True, blank=True)
    last_activity_at = models.DateTimeField(null=True, blank=True)
    idle_warned_at = models.DateTimeField(null=True, blank=True)
    autostopped_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="uniq_instance_idempotency_key",
            ),
        ]
        indexes = [models.Index(fields=["status", "submitted_at"])]
        verbose_name = _("instance")
        verbose_name_plural = _("instances")

    def __str__(self) -> str:
        return f"{self.name} ({self.gpu_count}× {self.gpu_type_id})"

    @property
    def status_reason_display(self) -> str:
        """The status reason in the active language (the stored text for rows without a code)."""
        code, params = self.status_reason_code, self.status_reason_params
        return reason_render(code=code, params=params, fallback=self.status_reason)

    @property
    def status_reason_extra(self) -> str:
        """The status reason in the active language when it adds something to the status badge, else ``""``:
        a reason that only repeats the status (code or text ``running`` on a running instance, which read
        "Running running" / "运行中 运行中") is not shown beside it. The one rule of every page with a badge."""
        text = self.status_reason_display.strip()
        if not text:
            return ""
        status = str(self.status)
        same = {status.casefold(), str(self.get_status_display()).casefold()}  # type: ignore[attr-defined]
        if (
            self.status_reason_code == status
            or text.casefold() in same
            or self.status_reason.strip().casefold() in same
        ):
            return ""
        return text


class InstanceTransition(models.Model):
    """One status change of an instance (append-only)."""

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="transitions")
    from_status = models.CharField(max_length=12, choices=InstanceStatus.choices)
    to_status = models.CharField(max_length=12, choices=InstanceStatus.choices)
    reason = models.CharField(max_length=300, blank=True)  # English text; code + params below
    reason_code = models.CharField(max_length=64, blank=True)
    reason_params = models.JSONField(default=dict, blank=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.instance_id}: {self.from_status} -> {self.to_status}"

    @property
    def reason_display(self) -> str:
        """The reason in the active language."""
        return reason_render(code=self.reason_code, params=self.reason_params, fallback=self.reason)


class InstanceRunSegment(models.Model):
    """A period during which an instance was ``running``; ``ended_at`` null while it still is.

    Metering charges every minute that overlaps a segment (``instances.selectors.run_segments_overlapping``).
    """

    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="run_segments")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    # GPUs the instance held in this segment (its placement when it entered running; an elastic resume may hold
    # fewer than gpu_count); null for segments opened before this was recorded: the instance's gpu_count
    gpus_held = models.PositiveIntegerField(null=True, blank=True)
    # The last reconcile that saw the instance running in this segment (instances.attempt_watch): metering
    # charges an open segment up to here, never past it, so a tick that runs while reconciles are late cannot
    # charge a minute that a later-detected loss puts after the segment's end. Null: no sighting recorded
    # (a segment opened without a reconcile): charged up to the tick's instant.
    seen_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["instance"], condition=Q(ended_at__isnull=True), name="uniq_open_run_segment"
            ),
        ]
        indexes = [models.Index(fields=["started_at"]), models.Index(fields=["ended_at"])]

    def __str__(self) -> str:
        return f"{self.instance_id}: {self.started_at} – {self.ended_at or '…'}"


class TrainingJob(models.Model):
    """A training job on an instance: the runtime's config inputs and the job's resume bookkeeping.

    ``hyperparameters``: runtime config fields (seq_len, micro_batch, grad_accum, lr, warmup_steps,
    max_steps, seed, ...). ``dataset_version_ids``: dataset versions mounted through agreements.
    ``resume_step``: -1 = newest complete checkpoint; ≥ 0 = the next attempt rolls back to that step.
    ``crash_count`` counts crashes since the last successful progress (the crash budget);
    ``preempt_count`` counts preemptions (never limited by the crash budget).
    ``checkpoint_requested`` / ``stop_requested``: answered to the runtime once through the callback.
    """

    instance = models.OneToOneField(Instance, on_delete=models.CASCADE, related_name="job")
    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="jobs")
    name = models.CharField(_("name"), max_length=100)
    model_preset = models.CharField(max_length=20, choices=ModelPreset.choices, default=ModelPreset.TINY)
    engine = models.CharField(max_length=12, choices=Engine.choices, default=Engine.FSDP)
    hyperparameters = models.JSONField(default=dict, blank=True)
    dataset_version_ids = models.JSONField(default=list, blank=True)
    mounts = models.JSONField(default=list, blank=True)  # [{"version_id", "name", "shard_dir"}], from datasets
    checkpoint_every_minutes = models.PositiveIntegerField(default=30)
    checkpoint_every_steps = models.PositiveIntegerField(default=0)
    keep_last = models.PositiveIntegerField(default=3)
    checkpoint_uri = models.CharField(max_length=500, blank=True)
    resume_step = models.IntegerField(default=-1)
    outcome = models.CharField(max_length=10, choices=JobOutcome.choices, default=JobOutcome.NONE, blank=True)
    crash_count = models.PositiveIntegerField(default=0)
    preempt_count = models.PositiveIntegerField(default=0)
    next_resume_at = models.DateTimeField(null=True, blank=True)
    restart_after_stop = models.BooleanField(default=False)
    checkpoint_requested = models.BooleanField(default=False)
    stop_requested = models.BooleanField(default=False)
    last_step = models.PositiveIntegerField(default=0)
    tokens_seen = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-id"]
        verbose_name = _("training job")
        verbose_name_plural = _("training jobs")

    def __str__(self) -> str:
        return self.name

    @property
    def current_attempt(self) -> JobAttempt | None:
        """The newest attempt (or ``None`` before the first submit)."""
        return self.attempts.order_by("-number").first()


class JobAttempt(models.Model):
    """One run of a job (or of an interactive instance's command) on the backend.

    ``handle``: the backend's opaque handle ("" until submitted). ``token_sha256``: SHA-256 of the token
    the runtime sends as ``Authorization: Bearer``; ``token_salt``: the random input the token is derived
    from (``instances.services.attempt_token``; empty for attempts older than salts). ``resume_from_step``:
    the rollback step asked for (-1 = newest checkpoint).
    """

    # no index of its own: ``uniq_attempt_number`` (instance, number) serves every lookup by instance
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    job = models.ForeignKey(TrainingJob, null=True, blank=True, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    backend = models.CharField(max_length=20)
    handle = models.CharField(max_length=500, blank=True)
    token_sha256 = models.CharField(max_length=64, blank=True)  # indexed in Meta (equality only)
    token_salt = models.CharField(max_length=32, blank=True)  # the token's random input (attempt_token)
    state = models.CharField(max_length=10, choices=AttemptState.choices, default=AttemptState.PENDING)
    exit_code = models.IntegerField(null=True, blank=True)
    message = models.CharField(max_length=300, blank=True)  # English text of the outcome; code + params below
    message_code = models.CharField(max_length=64, blank=True)
    message_params = models.JSONField(default=dict, blank=True)
    resume_from_step = models.IntegerField(default=-1)
    started_step = models.IntegerField(null=True, blank=True)
    placement = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    submitted_at = models.DateTimeField(null=True, blank=True)
    first_step_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    # The last reconcile that saw the backend report this attempt running: a job lost without a trace (its
    # Kubernetes Job deleted behind the portal's back) is billed up to here, not up to when the loss is seen.
    last_seen_running_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["instance", "number"]
        constraints = [models.UniqueConstraint(fields=["instance", "number"], name="uniq_attempt_number")]
        # A scheduling pass inserts hundreds of attempts at once: no index that another one covers, and
        # the token hash (compared by equality) without the LIKE-pattern twin ``db_index=True`` adds.
        indexes = [models.Index(fields=["token_sha256"], name="instances_attempt_token_idx")]

    def __str__(self) -> str:
        return f"{self.instance_id}#{self.number}"

    @property
    def gpu_count(self) -> int:
        """GPUs this attempt ran on: the sum of its placement (an elastic resume may take fewer than the
        instance's ``gpu_count``); the instance's count for an attempt not placed yet."""
        return placement_gpus(self.placement) or self.instance.gpu_count

    @property
    def message_display(self) -> str:
        """The attempt's outcome in the active language."""
        return reason_render(code=self.message_code, params=self.message_params, fallback=self.message)


class Checkpoint(models.Model):
    """A checkpoint the runtime reported complete (the runtime reports only complete ones).

    ``rolled_back``: set aside by a rollback to an earlier step (kept on disk, not resumed from).
    ``deleted_at``: the runtime pruned it (keep-last-K; event ``checkpoint_pruned``): kept as history, offers no
    action. ``pinned``: the user pinned it (a ``PINNED`` marker in its folder): never pruned, not counted in K.
    """

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="checkpoints")
    attempt = models.ForeignKey(JobAttempt, null=True, blank=True, on_delete=models.SET_NULL)
    step = models.PositiveIntegerField()
    location = models.CharField(max_length=500)
    size_bytes = models.BigIntegerField(default=0)
    loss = models.FloatField(null=True, blank=True)
    complete = models.BooleanField(default=True)
    rolled_back = models.BooleanField(default=False)
    deleted_at = models.DateTimeField(null=True, blank=True)
    pinned = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-step"]
        constraints = [models.UniqueConstraint(fields=["job", "step"], name="uniq_checkpoint_step")]

    def __str__(self) -> str:
        return f"{self.job_id}@{self.step}"


class JobMetric(models.Model):
    """One progress report: loss, learning rate and throughput (tokens/s over all ranks) at ``step``."""

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="metrics")
    attempt = models.ForeignKey(JobAttempt, on_delete=models.CASCADE, related_name="metrics")
    step = models.PositiveIntegerField()
    loss = models.FloatField()
    lr = models.FloatField()
    tokens_per_s = models.FloatField()
    tokens_seen = models.BigIntegerField(default=0)
    reported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["step", "attempt_id"]
        constraints = [models.UniqueConstraint(fields=["attempt", "step"], name="uniq_metric_attempt_step")]

    def __str__(self) -> str:
        return f"{self.job_id}@{self.step}: {self.loss:.4f}"


class JobEvent(models.Model):
    """A runtime event as received, once per ``(job, attempt, seq)``."""

    job = models.ForeignKey(TrainingJob, on_delete=models.CASCADE, related_name="events")
    attempt = models.PositiveIntegerField()
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=20)
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["attempt", "seq"]
        constraints = [models.UniqueConstraint(fields=["job", "attempt", "seq"], name="uniq_job_event_seq")]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.attempt}/{self.seq} {self.type}"


class JobLogArchive(models.Model):
    """The last lines of one node rank's log of one attempt, copied from the backend before its pods go
    (Kubernetes deletes them with the Job), so a finished or failed job's log can still be read.

    ``rank``: the node rank (pod completion index). ``text``: at most ``INSTANCES_LOG_ARCHIVE_LINES`` lines.
    ``first_line``: the offset (0-based line number in the rank's whole log) of the first line kept, so a
    reader following by offset learns how many lines the archive no longer has (0 for copies made before
    offsets were kept: counted from the first line kept).
    """

    attempt = models.ForeignKey(JobAttempt, on_delete=models.CASCADE, related_name="log_archives")
    rank = models.PositiveIntegerField()
    text = models.TextField(blank=True)
    first_line = models.PositiveBigIntegerField(default=0)
    archived_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["attempt", "rank"]
        constraints = [models.UniqueConstraint(fields=["attempt", "rank"], name="uniq_log_archive_rank")]

    def __str__(self) -> str:
        return f"{self.attempt_id}/rank {self.rank}"


class VolumeQuota(models.Model):
    """An organization's volume quota (GB of live volumes, all together); no row = ``INSTANCES_VOLUME_QUOTA_GB``."""

    organization = models.OneToOneField("portal.Organization", on_delete=models.CASCADE, related_name="volume_quota")
    gb = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.organization}: {self.gb} GB of volumes"


class Volume(models.Model):
    """A persistent data volume of an organization: ``size_gb`` GB (10⁹ bytes), kept across stops and
    releases of the instances it is attached to, billed per GB-hour from ``created_at`` until ``deleted_at``
    (``billing.volume_metering``). Local backend: a folder ``<INSTANCES_VOLUMES_ROOT>/vol-<id>``; Kubernetes:
    the PersistentVolumeClaim ``gpu-portal-vol-<id>``. ``used_bytes`` / ``measured_at``: the last
    measurement of the folder (``instances.interactive.volumes.volumes_measure``). A deleted volume keeps its
    row (statements and audit refer to it); its name is free again."""

    organization = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="volumes")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    name = models.CharField(_("name"), max_length=40)
    size_gb = models.PositiveIntegerField(_("size (GB)"))
    used_bytes = models.BigIntegerField(default=0)
    measured_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"], condition=Q(deleted_at__isnull=True), name="uniq_live_volume_name"
            ),
            models.CheckConstraint(condition=Q(size_gb__gte=1), name="volume_size_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.size_gb} GB)"


class VolumeAttachment(models.Model):
    """Volume ``volume`` mounted read-write in ``instance`` (``<workspace>/volumes/<name>`` locally,
    ``/volumes/<name>`` in a pod). The instance holds the volume until it has truly ended (active, preempted,
    or resting with a resume due: ``instances.interactive.volumes.holding``); one holder at a time is
    enforced under the volume's row lock at launch, deletion and restart."""

    volume = models.ForeignKey(Volume, on_delete=models.PROTECT, related_name="attachments")
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="volume_attachments")
    attached_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["volume", "instance"], name="uniq_volume_instance")]

    def __str__(self) -> str:
        return f"{self.volume} → instance {self.instance_id}"


from instances.interactive.access_models import AccessShare  # noqa: E402,F401 - instance and volume shares
from instances.interactive.utilization_models import UtilizationSample  # noqa: E402,F401 - sampled utilization


def placement_gpus(placement: list[Any] | None) -> int:
    """GPUs of a placement (``[[node name, GPUs], …]``, as ``Instance.placement`` and ``JobAttempt.placement``
    store the scheduler's assignments); 0 for none."""
    return sum(int(gpus) for _, gpus in placement or ())
