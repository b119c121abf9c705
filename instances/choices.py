"""Enumerations of the instances app and the one transition table of an instance's status.

The table ``INSTANCE_TRANSITIONS`` is enforced in exactly one place,
``instances.transitions.instances_transition`` (behind ``instances.services.instance_transition`` and the
scheduling pass), which raises :class:`IllegalTransition` for anything else.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class IllegalTransition(Exception):
    """An instance was asked to move between two statuses the transition table does not connect."""

    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"illegal instance transition {current} -> {target}")
        self.current = current
        self.target = target


class InstanceStatus(models.TextChoices):
    """Lifecycle of rented capacity (DESIGN.md §1 row 4)."""

    PENDING = "pending", _("Pending")
    SCHEDULING = "scheduling", _("Scheduling")
    PROVISIONING = "provisioning", _("Provisioning")
    RUNNING = "running", _("Running")
    STOPPING = "stopping", _("Stopping")
    STOPPED = "stopped", _("Stopped")
    FAILED = "failed", _("Failed")
    PREEMPTED = "preempted", _("Preempted")


S = InstanceStatus
# current -> statuses it may move to. "stopped", "failed" and "preempted" may go back to "scheduling":
# that is a restart, a rollback, or an automatic resume on new capacity.
INSTANCE_TRANSITIONS: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.SCHEDULING, S.STOPPED, S.FAILED}),
    S.SCHEDULING: frozenset({S.PROVISIONING, S.STOPPED, S.FAILED}),
    S.PROVISIONING: frozenset({S.RUNNING, S.STOPPING, S.STOPPED, S.FAILED, S.PREEMPTED}),
    S.RUNNING: frozenset({S.STOPPING, S.STOPPED, S.FAILED, S.PREEMPTED}),
    S.STOPPING: frozenset({S.STOPPED, S.FAILED}),
    S.STOPPED: frozenset({S.SCHEDULING}),
    S.FAILED: frozenset({S.SCHEDULING, S.STOPPED}),
    S.PREEMPTED: frozenset({S.SCHEDULING, S.STOPPED, S.FAILED}),
}
# Statuses that hold capacity on a node (their placement counts as used by the scheduler).
HOLDS_CAPACITY = frozenset({S.PROVISIONING, S.RUNNING, S.STOPPING})
# Statuses with a backend attempt to watch.
WATCHED = frozenset({S.PROVISIONING, S.RUNNING, S.STOPPING})
# Statuses from which nothing happens by itself (a user or an auto-resume must act).
RESTING = frozenset({S.STOPPED, S.FAILED, S.PREEMPTED})
ACTIVE = frozenset({S.PENDING, S.SCHEDULING, S.PROVISIONING, S.RUNNING, S.STOPPING})


class InstanceKind(models.TextChoices):
    """What runs on the instance: the training runtime, or the user's own command in the image."""

    TRAINING = "training", _("Training job")
    INTERACTIVE = "interactive", _("Interactive")


class NodeState(models.TextChoices):
    """Scheduling state of a node; only ``ready`` nodes receive new work."""

    READY = "ready", _("Ready")
    CORDONED = "cordoned", _("Cordoned")
    DRAINING = "draining", _("Draining")


class Engine(models.TextChoices):
    """Distributed training engine of the runtime (``instances.runtime.config.ENGINES``)."""

    FSDP = "fsdp", _("FSDP")
    DDP = "ddp", _("DDP")
    DEEPSPEED = "deepspeed", _("DeepSpeed ZeRO")


class ModelPreset(models.TextChoices):
    """Model presets of the runtime (``instances.runtime.config.PRESET_NAMES``)."""

    TINY = "tiny", _("tiny (a few million parameters, CPU)")
    GPT2_SMALL = "gpt2-small", _("GPT-2 small size")
    B1 = "1b", _("1B")
    B7 = "7b", _("7B")


class JobOutcome(models.TextChoices):
    """How a training job ended, once it has ("" while it may still run)."""

    NONE = "", _("Not finished")
    FINISHED = "finished", _("Finished")
    STOPPED = "stopped", _("Stopped")
    FAILED = "failed", _("Failed")


class AttemptState(models.TextChoices):
    """State of one backend attempt (``instances.backends.base.JOB_STATES``)."""

    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")
    PREEMPTED = "preempted", _("Preempted")
    STOPPED = "stopped", _("Stopped")
    UNKNOWN = "unknown", _("Unknown")


ATTEMPT_TERMINAL = frozenset(
    {AttemptState.SUCCEEDED, AttemptState.FAILED, AttemptState.PREEMPTED, AttemptState.STOPPED}
)
