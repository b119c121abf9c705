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
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

from instances.runtime.checkpoint import is_transient_io_error
from instances.runtime.config import JobConfig


class ResumeRefused(RuntimeError):
    """A checkpoint exists but cannot be resumed exactly (different data-parallel degree, shapes or data
    layout). Nothing is touched; the message names both values."""


class NoLoadableCheckpoint(ResumeRefused):
    """Checkpoints existed but every one is damaged (each was set aside); a person must decide."""


PEER_LOST_PATTERNS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "connection refused",
    "socket timeout",
    "timed out",
    "ecconnreset",
    "econnreset",
    "epipe",
)


def is_peer_loss(exc: BaseException) -> bool:
    """True when ``exc`` is a collective failing because another rank vanished (gloo / NCCL transport
    errors, DCP's wrapper of them), not a bug of this rank."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, getattr(dist, "DistNetworkError", ())):
            return True
        if isinstance(e, RuntimeError | getattr(dist, "DistError", RuntimeError)):
            text = str(e).lower()
            if any(p in text for p in PEER_LOST_PATTERNS):
                return True
        if isinstance(e, CheckpointException):
            todo.extend(err for err, _tb in e.failures.values())
        for nxt in (e.__cause__, e.__context__):
            if nxt is not None:
                todo.append(nxt)
    return False


def _root_errors(exc: BaseException) -> list[BaseException]:
    """The original exceptions inside DCP's ``CheckpointException`` (or ``exc`` itself)."""
    if isinstance(exc, CheckpointException):
        return [err for err, _tb in exc.failures.values()] or [exc]
    return [exc]


def classify_load_error(exc: BaseException) -> str:
    """``"transient"`` (the store failed to answer), ``"incompatible"`` (the checkpoint's tensors do not fit
    this run's shapes) or ``"damage"`` (anything else: unreadable, truncated, missing shard)."""
    roots = _root_errors(exc)
    if any(is_transient_io_error(e) for e in roots):
        return "transient"
    text = " ".join(str(e).lower() for e in roots)
    if any(k in text for k in ("size mismatch", "shape mismatch", "mismatch between", "missing key", "unexpected key")):
        return "incompatible"
    return "damage"


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
