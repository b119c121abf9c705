"""Documented upper and lower bounds of every launch value, in one table used by the console form, the API
serializers (and so the OpenAPI schema) and the launch service.

A value outside its bounds is refused before anything is written: a 400 ``invalid`` in the API naming the
field, a form error in the console. The bounds are what one job on this platform can sensibly use (a week
between checkpoints, 131,072-token sequences, 10 million steps), well inside what the database columns
and the runtime's own types hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from instances.runtime.config import MIXED_PRECISION

MAX_GPUS = 1024  # one gang; scheduler.MAX_GANG_GPUS


@dataclass(frozen=True)
class Bound:
    """Bounds of one value: its type (``int``, ``float`` or ``bool``) and the inclusive range."""

    kind: type
    low: float = 0
    high: float = 0
    help: str = ""

    def check(self, name: str, value: Any) -> str | None:
        """A sentence saying why ``value`` is not acceptable for ``name``, or None if it is."""
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{name} must be true or false."
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{name} must be a number."
        if self.kind is int and not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            return f"{name} must be a whole number."
        if isinstance(value, float) and not math.isfinite(value):
            return f"{name} must be a finite number."
        if not self.low <= value <= self.high:
            return f"{name} must be between {_fmt(self.low)} and {_fmt(self.high)}."
        return None


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) and not x.is_integer() else f"{int(x):d}"


#: Hyperparameters a user may set (the runtime config fields they map to) and their bounds.
HYPERPARAMETER_LIMITS: dict[str, Bound] = {
    "seq_len": Bound(int, 8, 131_072, "tokens per sample"),
    "micro_batch": Bound(int, 1, 4096, "samples per rank per forward pass"),
    "grad_accum": Bound(int, 1, 4096, "micro-batches per optimizer step"),
    "global_batch": Bound(
        int, 0, 2**22, "samples per optimizer step over all GPUs (0 = micro_batch x grad_accum x GPUs)"
    ),
    "max_steps": Bound(int, 0, 10_000_000, "optimizer steps (0 = no step limit)"),
    "max_tokens": Bound(int, 0, 10**15, "tokens over all ranks (0 = no token limit)"),
    "lr": Bound(float, 1e-9, 1.0, "peak learning rate"),
    "min_lr_ratio": Bound(float, 0, 1, "cosine decay floor as a fraction of lr"),
    "warmup_steps": Bound(int, 0, 10_000_000, "linear warm-up steps"),
    "weight_decay": Bound(float, 0, 10, "AdamW weight decay"),
    "seed": Bound(int, 0, 2**31 - 1, "random seed"),
    "grad_clip": Bound(float, 0, 1e6, "max global gradient norm (0 = off)"),
    "zero_stage": Bound(int, 0, 3, "DeepSpeed ZeRO stage"),
    "log_every_steps": Bound(int, 1, 1_000_000, "steps between progress events"),
    "report_interval_s": Bound(float, 0.1, 3600, "seconds between reports"),
    "term_grace_s": Bound(float, 1, 3600, "seconds to checkpoint after SIGTERM"),
    "async_save": Bound(bool),
}
#: ``mixed_precision`` is the one string hyperparameter (the runtime's own choices).
MIXED_PRECISION_CHOICES = tuple(MIXED_PRECISION)

#: Launch values outside the hyperparameters.
LAUNCH_LIMITS: dict[str, Bound] = {
    "gpu_count": Bound(int, 1, MAX_GPUS, "GPUs"),
    "checkpoint_every_minutes": Bound(int, 0, 10_080, "minutes between checkpoints (0 = off; at most a week)"),
    "checkpoint_every_steps": Bound(int, 0, 10_000_000, "steps between checkpoints (0 = off)"),
    "keep_last": Bound(int, 1, 100, "complete checkpoints kept"),
    "elastic_min_gpus": Bound(int, 0, MAX_GPUS, "resume on at least this many GPUs after preemption (0 = same count)"),
}

HYPERPARAMETER_FIELDS = frozenset(HYPERPARAMETER_LIMITS) | {"mixed_precision"}


class LimitError(ValueError):
    """A launch value outside its documented bounds: ``field`` names it, ``str(exc)`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def hyperparameters_validate(values: Any) -> dict[str, Any]:
    """Check a hyperparameter mapping against :data:`HYPERPARAMETER_LIMITS`; return it unchanged.

    Raises :class:`LimitError` (``field`` = ``"hyperparameters"``) for a non-object, an unknown name, a
    wrong type or a value out of bounds — the first one found, in name order, so the message is stable.
    """
    if not isinstance(values, dict):
        raise LimitError("hyperparameters", "hyperparameters must be an object of name: value.")
    for name in sorted(values, key=str):
        value = values[name]
        if name == "mixed_precision":
            if value not in MIXED_PRECISION_CHOICES:
                raise LimitError(
                    "hyperparameters", f"mixed_precision must be one of {', '.join(MIXED_PRECISION_CHOICES)}."
                )
            continue
        bound = HYPERPARAMETER_LIMITS.get(name)
        if bound is None:
            raise LimitError("hyperparameters", f"Unknown hyperparameter {str(name)[:40]}.")
        problem = bound.check(name, value)
        if problem:
            raise LimitError("hyperparameters", problem)
    return values


def launch_values_validate(values: dict[str, Any]) -> None:
    """Check the launch values of :data:`LAUNCH_LIMITS` present in ``values``; raises :class:`LimitError`."""
    for name, bound in LAUNCH_LIMITS.items():
        if name in values:
            problem = bound.check(name, values[name])
            if problem:
                raise LimitError(name, problem)
