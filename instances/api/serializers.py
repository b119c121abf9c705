"""Serializers of the instances API (instances, jobs, checkpoints, metrics, launch input)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from billing.choices import RentalMode
from instances.choices import Engine, InstanceKind, ModelPreset
from instances.models import Checkpoint, Instance, JobAttempt, TrainingJob


class InstanceSerializer(serializers.ModelSerializer[Instance]):
    gpu_type = serializers.CharField(source="gpu_type.code", read_only=True)
    image = serializers.CharField(source="image.name", read_only=True, default=None)
    job = serializers.SerializerMethodField()

    class Meta:
        model = Instance
        fields = ["id", "name", "kind", "status", "status_reason", "queue_position", "gpu_type", "gpu_count", "mode",
                  "image", "command", "placement", "submitted_at", "created_at", "job"]

    def get_job(self, obj: Instance) -> int | None:
        job = getattr(obj, "job", None)
        return job.pk if job is not None else None


class AttemptSerializer(serializers.ModelSerializer[JobAttempt]):
    class Meta:
        model = JobAttempt
        fields = ["number", "state", "exit_code", "message", "resume_from_step", "started_step", "placement",
                  "submitted_at", "first_step_at", "ended_at"]


class JobSerializer(serializers.ModelSerializer[TrainingJob]):
    status = serializers.CharField(source="instance.status", read_only=True)
    status_reason = serializers.CharField(source="instance.status_reason", read_only=True)
    queue_position = serializers.IntegerField(source="instance.queue_position", read_only=True)
    instance = serializers.IntegerField(source="instance_id", read_only=True)  # type: ignore[assignment]
    gpu_type = serializers.CharField(source="instance.gpu_type.code", read_only=True)
    gpu_count = serializers.IntegerField(source="instance.gpu_count", read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta:
        model = TrainingJob
        fields = ["id", "name", "instance", "status", "status_reason", "queue_position", "outcome", "gpu_type",
                  "gpu_count", "model_preset", "engine", "hyperparameters", "dataset_version_ids",
                  "checkpoint_every_minutes", "checkpoint_every_steps", "keep_last", "last_step", "tokens_seen",
                  "crash_count", "preempt_count", "next_resume_at", "created_at", "attempts"]


class CheckpointSerializer(serializers.ModelSerializer[Checkpoint]):
    attempt = serializers.IntegerField(source="attempt.number", read_only=True, default=None)

    class Meta:
        model = Checkpoint
        fields = ["id", "step", "created_at", "size_bytes", "location", "loss", "complete", "rolled_back", "attempt",
                  "pinned", "deleted_at"]


class InstanceLaunchSerializer(serializers.Serializer[Any]):
    """Input of ``POST /instances`` (an interactive instance running ``command``)."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    gpu_type = serializers.CharField(max_length=40)
    gpu_count = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=RentalMode.choices, default=RentalMode.CONTAINER)
    image = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    command = serializers.ListField(child=serializers.CharField(), min_length=1)


class JobLaunchSerializer(serializers.Serializer[Any]):
    """Input of ``POST /jobs`` (a training job on a new instance)."""

    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    gpu_type = serializers.CharField(max_length=40)
    gpu_count = serializers.IntegerField()
    mode = serializers.ChoiceField(choices=RentalMode.choices, default=RentalMode.CONTAINER)
    image = serializers.CharField(max_length=120, required=False, allow_blank=True, default="")
    dataset_version_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), min_length=1, max_length=64)
    model_preset = serializers.ChoiceField(choices=ModelPreset.choices, default=ModelPreset.TINY)
    engine = serializers.ChoiceField(choices=Engine.choices, default=Engine.FSDP)
    hyperparameters = serializers.DictField(required=False, default=dict)
    checkpoint_every_minutes = serializers.IntegerField(min_value=0, default=30)
    checkpoint_every_steps = serializers.IntegerField(min_value=0, default=0)
    keep_last = serializers.IntegerField(min_value=1, max_value=100, default=3)


class RollbackSerializer(serializers.Serializer[Any]):
    checkpoint = serializers.IntegerField()


class PinSerializer(serializers.Serializer[Any]):
    """Input of ``POST /jobs/{id}/checkpoints/{checkpoint_id}/pin``: ``pinned`` false unpins."""

    pinned = serializers.BooleanField(default=True)


KIND_TRAINING = InstanceKind.TRAINING
