"""Pieces of the training loop that hold no trainer state: the refusals of a resume, the signal flags the
loop reads once per iteration, the learning-rate schedule and each rank's RNG state (saved in every
checkpoint). Torch only, never Django (as all of ``instances.runtime``)."""

from __future__ import annotations

import io
import math
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from instances.runtime.config import JobConfig


class ResumeRefused(RuntimeError):
    """A checkpoint exists but cannot be resumed exactly (different data-parallel degree or data layout)."""


class NoLoadableCheckpoint(RuntimeError):
    """Every complete checkpoint failed to load; nothing to fall back to."""


@dataclass
class Signals:
    """Flags set by signal handlers (read by the loop once per iteration)."""

    term: bool = False
    usr1: bool = False
    term_at: float = 0.0
    handlers: dict[int, Any] = field(default_factory=dict)
    grace_timer: threading.Timer | None = None

    def install(self, grace_s: float, on_grace_expired: Any) -> None:
        def on_term(signum: int, frame: Any) -> None:
            if not self.term:
                self.term = True
                self.term_at = time.monotonic()
                self.grace_timer = threading.Timer(grace_s, on_grace_expired)
                self.grace_timer.daemon = True
                self.grace_timer.start()

        def on_usr1(signum: int, frame: Any) -> None:
            self.usr1 = True

        self.handlers[signal.SIGTERM] = signal.signal(signal.SIGTERM, on_term)
        self.handlers[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, on_usr1)


def lr_lambda(cfg: JobConfig, total_steps: int) -> Any:
    """Multiplier of ``cfg.lr`` at a step: linear warm-up over ``warmup_steps`` from 1/warmup, then cosine
    from 1 to ``min_lr_ratio`` at ``total_steps`` (held there afterwards)."""

    def f(step: int) -> float:
        if cfg.warmup_steps and step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        span = max(1, total_steps - cfg.warmup_steps)
        progress = min(1.0, (step - cfg.warmup_steps) / span)
        return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


def rng_blob() -> bytes:
    """This rank's RNG states (Python, NumPy global, torch CPU and CUDA) as bytes."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def restore_rng(blob: bytes) -> None:
    """Inverse of ``rng_blob``."""
    state = torch.load(io.BytesIO(blob), weights_only=False)
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
