"""Back office for the instances app: catalog (editable), nodes (cordon / drain / ready), instances (force
stop), jobs, checkpoints and quotas. Status fields are read-only: they change only through services."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from instances import services
from instances.choices import NodeState
from instances.models import (
    Checkpoint,
    GpuQuota,
    GpuType,
    Image,
    Instance,
    InstanceTransition,
    Node,
    TrainingJob,
    Volume,
    VolumeQuota,
)
from instances.reasons import Reason
from portal.lib.http import AuthedHttpRequest
from portal.models import User


@admin.register(GpuType)
class GpuTypeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["code", "name", "memory_gib", "interconnect", "gpus_per_node", "active"]
    list_editable = ["active"]


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "name",
        "reference",
        "pytorch_version",
        "cuda_version",
        "deepspeed_version",
        "megatron_version",
        "is_default",
    ]


def _set_state(state: str, label: Any) -> Any:
    def action(modeladmin: admin.ModelAdmin, request: AuthedHttpRequest, queryset: QuerySet[Node]) -> None:  # type: ignore[type-arg]
        for node in queryset:
            services.node_set_state(node=node, state=state, acting_user=request.user)
        modeladmin.message_user(request, _("%(n)d node(s) updated.") % {"n": queryset.count()}, messages.SUCCESS)

    action.short_description = label  # type: ignore[attr-defined]
    action.__name__ = f"make_{state}"
    return action


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "gpu_type", "gpus", "backend_free_gpus", "block", "state", "last_seen_at"]
    list_filter = ["state", "gpu_type", "block"]
    readonly_fields = ["state", "backend_free_gpus", "last_seen_at"]
    actions = [
        _set_state(NodeState.CORDONED, _("Cordon (no new work)")),
        _set_state(NodeState.DRAINING, _("Drain (no new work, let running work finish)")),
        _set_state(NodeState.READY, _("Make ready")),
    ]


class TransitionInline(admin.TabularInline):  # type: ignore[type-arg]
    model = InstanceTransition
    extra = 0
    can_delete = False
    readonly_fields = ["from_status", "to_status", "reason", "actor", "created_at"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.action(description=_("Force stop (final checkpoint first)"))
def force_stop(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet[Instance]) -> None:  # type: ignore[type-arg]
    for instance in queryset:
        services.instance_stop(
            instance=instance, reason=Reason("stopped_by_staff"), acting_user=cast(User, request.user), staff=True
        )
    modeladmin.message_user(request, _("%(n)d instance(s) stopping.") % {"n": queryset.count()}, messages.SUCCESS)


@admin.register(Instance)
class InstanceAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["id", "name", "organization", "kind", "gpu_type", "gpu_count", "mode", "status", "created_at"]
    list_filter = ["status", "kind", "gpu_type", "mode"]
    search_fields = ["name", "organization__name"]
    readonly_fields = ["status", "status_reason", "queue_position", "placement", "submitted_at", "idempotency_key"]
    inlines = [TransitionInline]
    actions = [force_stop]


@admin.register(TrainingJob)
class TrainingJobAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = [
        "id",
        "name",
        "organization",
        "engine",
        "model_preset",
        "last_step",
        "outcome",
        "preempt_count",
        "crash_count",
    ]
    list_filter = ["outcome", "engine"]
    readonly_fields = ["last_step", "tokens_seen", "crash_count", "preempt_count", "next_resume_at", "outcome"]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["job", "step", "size_bytes", "complete", "rolled_back", "created_at"]
    readonly_fields = [
        "job",
        "attempt",
        "step",
        "location",
        "size_bytes",
        "loss",
        "complete",
        "rolled_back",
        "created_at",
    ]


@admin.register(GpuQuota)
class GpuQuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["organization", "gpus"]


@admin.register(VolumeQuota)
class VolumeQuotaAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """An organization's volume quota in GB (overrides ``INSTANCES_VOLUME_QUOTA_GB``)."""

    list_display = ["organization", "gb"]


@admin.register(Volume)
class VolumeAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Volumes are created and deleted by their organizations (billing and audit follow the services)."""

    list_display = ["name", "organization", "size_gb", "used_bytes", "created_at", "deleted_at"]
    search_fields = ["name", "organization__slug"]
    readonly_fields = ["organization", "created_by", "name", "size_gb", "used_bytes", "measured_at", "created_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Volume | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Volume | None = None) -> bool:
        return False
