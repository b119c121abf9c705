"""Serializers of the instances API (instances, jobs, checkpoints, metrics, launch input)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from billing.choices import PriceTier, RentalMode
from instances.choices import Engine, InstanceKind, ModelPreset
from instances.interactive.api import SshAccessField
from instances.interactive.idle import MAX_IDLE_AUTOSTOP_MINUTES
from instances.interactive.jupyter_api import JupyterAccessField
from instances.limits import (
    HYPERPARAMETER_LIMITS,
    LAUNCH_LIMITS,
    MIXED_PRECISION_CHOICES,
    Bound,
    LimitError,
    hyperparameters_validate,
)
from instances.models import Checkpoint, Instance, JobAttempt, TrainingJob


def _bounded(bound: Bound, **kwargs: Any) -> serializers.Field:
    """A serializer field for one entry of the bounds table, so the OpenAPI schema shows its range."""
    help_text = kwargs.pop("help_text", bound.help)
    if bound.kind is bool:
        return serializers.BooleanField(help_text=help_text, **kwargs)
    if bound.kind is int:
        return serializers.IntegerField(
            min_value=int(bound.low), max_value=int(bound.high), help_text=help_text, **kwargs
        )
    return serializers.FloatField(min_value=bound.low, max_value=bound.high, help_text=help_text, **kwargs)


def _documented(bound: Bound) -> serializers.IntegerField:
    """An integer whose bounds the launch service enforces with its own error code (``invalid_gpu_count``);
    the bounds appear in the OpenAPI schema without the serializer's own validators."""
    schema = {"type": "integer", "minimum": int(bound.low), "maximum": int(bound.high), "description": bound.help}
    field_class = extend_schema_field(schema)(type("BoundedIntegerField", (serializers.IntegerField,), {}))
    return field_class(help_text=bound.help)


class HyperparametersSerializer(serializers.Serializer[Any]):
    """Hyperparameters of a training job; every one optional, bounds from ``instances.limits``.

    Unknown names are refused (not dropped), so a typo never trains with a silent default.
    """

    mixed_precision = serializers.ChoiceField(choices=list(MIXED_PRECISION_CHOICES), required=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name, bound in HYPERPARAMETER_LIMITS.items():
            fields[name] = _bounded(bound, required=False)
        return fields

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        try:  # unknown names and every bound, as the launch service checks them
            hyperparameters_validate(data)
        except LimitError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return dict(super().to_internal_value(data))


class InstanceSerializer(serializers.ModelSerializer[Instance]):
    gpu_type = serializers.CharField(source="gpu_type.code", read_only=True)
    image = serializers.CharField(source="image.name", read_only=True, default=None)
    job = serializers.SerializerMethodField()
    jupyter = JupyterAccessField(help_text="JupyterLab on the instance: state and the console link that opens it.")
    ssh = SshAccessField()

    class Meta:
        model = Instance
        fields = [
            "id",
            "name",
            "kind",
            "status",
            "status_reason",
            "status_reason_code",
            "status_reason_params",
            "queue_position",
            "gpu_type",
            "gpu_count",
            "mode",
            "image",
            "command",
            "placement",
            "gpu_count",
            "submitted_at",
            "created_at",
            "job",
            "jupyter",
            "ssh",
            "tier",
            "idle_autostop_minutes",
            "last_activity_at",
            "idle_warned_at",
            "autostopped_at",
        ]

    def get_job(self, obj: Instance) -> int | None:
        job = getattr(obj, "job", None)
        return job.pk if job is not None else None


class AttemptSerializer(serializers.ModelSerializer[JobAttempt]):
    gpu_count = serializers.IntegerField(
        read_only=True, help_text="GPUs this attempt ran on (an elastic resume may use fewer)"
    )

    class Meta:
        model = JobAttempt
        fields = [
            "number",
            "state",
            "exit_code",
            "message",
            "message_code",
            "message_params",
            "resume_from_step",
            "started_step",
            "placement",
            "gpu_count",
            "submitted_at",
            "first_step_at",
            "ended_at",
        ]


class JobSerializer(serializers.ModelSerializer[TrainingJob]):
    status = serializers.CharField(source="instance.status", read_only=True)
    status_reason = serializers.CharField(source="instance.status_reason", read_only=True)
    status_reason_code = serializers.CharField(source="instance.status_reason_code", read_only=True)
    status_reason_params = serializers.JSONField(source="instance.status_reason_params", read_only=True)
    queue_position = serializers.IntegerField(source="instance.queue_position", read_only=True)
    instance = serializers.IntegerField(source="instance_id", read_only=True)  # type: ignore[assignment]
    gpu_type = serializers.CharField(source="instance.gpu_type.code", read_only=True)
    gpu_count = serializers.IntegerField(source="instance.gpu_count", read_only=True)
    tier = serializers.CharField(source="instance.tier", read_only=True)
    elastic_min_gpus = serializers.IntegerField(source="instance.elastic_min_gpus", read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta:
        model = TrainingJob
        fields = [
            "id",
            "name",
            "instance",
            "status",
            "status_reason",
            "status_reason_code",
            "status_reason_params",
            "queue_position",
            "outcome",
            "gpu_type",
            "gpu_count",
            "elastic_min_gpus",
            "tier",
            "model_preset",
            "engine",
            "hyperparameters",
            "dataset_version_ids",
            "checkpoint_every_minutes",
            "checkpoint_every_steps",
            "keep_last",
            "last_step",
            "tokens_seen",
            "crash_count",
            "preempt_count",
            "next_resume_at",
            "created_at",
            "attempts",
        ]


class CheckpointSerializer(serializers.ModelSerializer[Checkpoint]):
    attempt = serializers.IntegerField(source="attempt.number", read_only=True, default=None)

    class Meta:
        model = Checkpoint
        fields = [
            "id",
            "step",
            "created_at",
            "size_bytes",
            "location",
            "loss",
            "complete",
            "rolled_back",
            "attempt",
            "pinned",
            "deleted_at",
        ]


class InstanceLaunchSerializer(serializers.Serializer[Any]):
    """Input of ``POST /instances``: an interactive instance (JupyterLab, SSH) running ``command`` if given."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    gpu_type = serializers.CharField(max_length=40)
    gpu_count = _documented(LAUNCH_LIMITS["gpu_count"])
    mode = serializers.ChoiceField(choices=RentalMode.choices, default=RentalMode.CONTAINER)
    image = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    command = serializers.ListField(
        child=serializers.CharField(max_length=2000),
        required=False,
        default=list,
        max_length=256,
        help_text="argv run in the image; omitted or []: none, JupyterLab and SSH keep the instance running until "
        "it is stopped or idle autostop stops it",
    )
    volumes = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=16,
        help_text="names of your organization's volumes to attach read-write (one active instance per volume)",
    )
    tier = serializers.ChoiceField(choices=PriceTier.choices, default=PriceTier.ON_DEMAND)
    idle_autostop_minutes = serializers.IntegerField(
        min_value=0,
        max_value=MAX_IDLE_AUTOSTOP_MINUTES,
        required=False,
        allow_null=True,
        default=None,
        help_text="stop after this many idle minutes (0 = off; omitted = the organization's default)",
    )


class JobLaunchSerializer(serializers.Serializer[Any]):
    """Input of ``POST /jobs`` (a training job on a new instance)."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    gpu_type = serializers.CharField(max_length=40)
    gpu_count = _documented(LAUNCH_LIMITS["gpu_count"])
    mode = serializers.ChoiceField(choices=RentalMode.choices, default=RentalMode.CONTAINER)
    image = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    dataset_version_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), min_length=1, max_length=64
    )
    model_preset = serializers.ChoiceField(choices=ModelPreset.choices, default=ModelPreset.TINY)
    engine = serializers.ChoiceField(choices=Engine.choices, default=Engine.FSDP)
    hyperparameters = HyperparametersSerializer(required=False, default=dict)
    # left out: the GPU type's default (instances.launch_defaults; a CPU slot checkpoints every minute)
    checkpoint_every_minutes = _bounded(
        LAUNCH_LIMITS["checkpoint_every_minutes"],
        required=False,
        help_text="minutes between checkpoints (0 = off; at most a week); default 30 on a GPU, 1 on a CPU slot",
    )
    checkpoint_every_steps = _bounded(
        LAUNCH_LIMITS["checkpoint_every_steps"],
        required=False,
        help_text="steps between checkpoints (0 = off); default 0 on a GPU, 100 on a CPU slot",
    )
    keep_last = _bounded(LAUNCH_LIMITS["keep_last"], required=False, help_text="complete checkpoints kept; default 3")
    elastic_min_gpus = _bounded(
        LAUNCH_LIMITS["elastic_min_gpus"],
        required=False,
        default=0,
        help_text="resume on at least this many GPUs after a preemption (0 = only on gpu_count)",
    )
    volumes = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=16,
        help_text="names of your organization's volumes to attach read-write (one active instance per volume)",
    )
    tier = serializers.ChoiceField(choices=PriceTier.choices, default=PriceTier.ON_DEMAND)


class InstanceCostsSerializer(serializers.Serializer[Any]):
    """Output of ``GET /instances/{id}/costs``: the tier, its preemptions and what they cost (nothing lost
    when every resume started at the checkpoint: ``steps_rerun`` = ``minutes_rerun`` = 0), the metered
    minutes and charges against the on-demand price (micro-CNY), and idle autostop's minutes saved."""

    tier = serializers.ChoiceField(choices=PriceTier.choices)
    preemptions = serializers.IntegerField()
    steps_rerun = serializers.IntegerField()
    minutes_rerun = serializers.IntegerField()
    minutes_billed = serializers.IntegerField()
    charged_micros = serializers.IntegerField()
    on_demand_micros = serializers.IntegerField()
    saved_micros = serializers.IntegerField()
    autostop_at = serializers.DateTimeField(allow_null=True)
    idle_minutes_saved = serializers.IntegerField()


class LogsQuerySerializer(serializers.Serializer[Any]):
    """Query of ``GET /jobs/{id}/logs``."""

    lines = serializers.IntegerField(min_value=1, max_value=2000, default=200, help_text="newest lines to return")
    rank = serializers.IntegerField(min_value=0, max_value=1023, default=0, help_text="node rank (pod index)")
    attempt = serializers.IntegerField(
        min_value=1, max_value=1_000_000, required=False, help_text="attempt number; default the newest"
    )
    after = serializers.IntegerField(
        min_value=0,
        max_value=2**63 - 1,
        required=False,
        help_text="a cursor from an earlier answer: up to `lines` lines from this offset on, oldest first",
    )


class JobLogSerializer(serializers.Serializer[Any]):
    """Answer of ``GET /jobs/{id}/logs``: one node rank's log lines with their offsets (0-based line numbers in
    that attempt's rank log). Follow a log by passing ``cursor`` back as ``after`` (with ``attempt``), never by
    comparing lines."""

    job = serializers.IntegerField()
    attempt = serializers.IntegerField(allow_null=True, help_text="attempt number; null before any submit")
    next_attempt = serializers.IntegerField(
        allow_null=True, help_text="the job's next submitted attempt after this one; null while this is the newest"
    )
    rank = serializers.IntegerField()
    ranks = serializers.IntegerField(help_text="node ranks of this attempt")
    source = serializers.ChoiceField(choices=["live", "archive", "none"])  # type: ignore[assignment]  # the metaclass pops declared fields; mypy sees Field.source
    lines = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False))
    first = serializers.IntegerField(help_text="offset of lines[0]")
    cursor = serializers.IntegerField(help_text="offset after the last line returned: pass it as `after`")
    dropped = serializers.IntegerField(
        allow_null=True,
        help_text="lines between `after` and `first` the portal no longer has; null: an unknown number "
        "(the cluster rotated the log or restarted its container)",
    )
    more = serializers.BooleanField(help_text="more lines after `cursor` are already there: ask again at once")


class RollbackSerializer(serializers.Serializer[Any]):
    checkpoint = serializers.IntegerField(min_value=1, max_value=2**63 - 1)


class PinSerializer(serializers.Serializer[Any]):
    """Input of ``POST /jobs/{id}/checkpoints/{checkpoint_id}/pin``: ``pinned`` false unpins."""

    pinned = serializers.BooleanField(default=True)


KIND_TRAINING = InstanceKind.TRAINING
