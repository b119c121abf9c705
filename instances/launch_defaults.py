"""Defaults of a new training job, per kind of capacity: what a launch uses for every value the user left out.

A GPU trains a real model with the usual shapes (1024-token samples, 8 per rank, a checkpoint every 30
minutes). A CPU slot of the local backend (a GPU type with 0 GiB of GPU memory, ``cpu-local``) trains the
``tiny`` preset, where those shapes take ~2.3 s per step on one core and a first checkpoint half an hour
later: a newcomer's first job shows "Step 0" for minutes and a short trial job ends with no checkpoint. So
a CPU slot gets 256-token samples, 4 per rank (~0.2 s per step on one core), a progress event every step
reported every 2 s, and a checkpoint every 100 steps and every minute, whichever comes first — a step
within seconds of the start and a checkpoint within a minute (``benchmarks``-free figures: measured on
the 2-core development machine, tiny preset, one thread per rank).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the defaults themselves import no Django: the runtime's tests read them
    from instances.models import GpuType


@dataclass(frozen=True)
class LaunchDefaults:
    """``hyperparameters``: runtime config fields (units as in ``instances.limits``); checkpoint interval
    in minutes and in steps (0 = off); ``keep_last`` complete checkpoints."""

    hyperparameters: dict[str, Any] = field(default_factory=dict)
    checkpoint_every_minutes: int = 30
    checkpoint_every_steps: int = 0
    keep_last: int = 3


GPU_DEFAULTS = LaunchDefaults(
    hyperparameters={
        "seq_len": 1024,
        "micro_batch": 8,
        "grad_accum": 1,
        "max_steps": 1000,
        "lr": 3e-4,
        "warmup_steps": 100,
        "seed": 0,
    },
    checkpoint_every_minutes=30,
    checkpoint_every_steps=0,
)

CPU_DEFAULTS = LaunchDefaults(
    hyperparameters={
        "seq_len": 256,
        "micro_batch": 4,
        "grad_accum": 1,
        "max_steps": 1000,
        "lr": 3e-4,
        "warmup_steps": 20,
        "seed": 0,
        "log_every_steps": 1,
        "report_interval_s": 2.0,
    },
    checkpoint_every_minutes=1,
    checkpoint_every_steps=100,
)


def is_cpu_type(gpu_type: GpuType | None) -> bool:
    """A CPU slot: a GPU type with no GPU memory (the local backend's ``cpu-local``)."""
    return gpu_type is not None and gpu_type.memory_gib == 0


def launch_defaults(*, gpu_type: str) -> LaunchDefaults:
    """The defaults for a job on the GPU type with catalog code ``gpu_type`` (GPU defaults for an unknown
    code: the launch service refuses it anyway)."""
    from instances.models import GpuType

    return CPU_DEFAULTS if is_cpu_type(GpuType.objects.filter(code=gpu_type).first()) else GPU_DEFAULTS
