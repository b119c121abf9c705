"""The state one rank's ``Trainer`` shares with its parts (``saving.SavingMixin``, ``resume.ResumeMixin``).

``TrainerBase`` declares the attributes ``Trainer.__init__`` / ``Trainer.build`` set (so each part is
typed on its own) and holds the helpers every part uses: ``emit`` (event to the portal, rank 0),
``log`` (stdout, rank 0) and ``_model_optim_state`` (the DCP view of model and optimizer, for saving
and loading alike).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from instances.runtime.checkpoint import CheckpointStore
from instances.runtime.config import JobConfig
from instances.runtime.data import TokenSampler
from instances.runtime.loop import Signals
from instances.runtime.reporting import Reporter


class TrainerBase:
    """Attribute declarations and shared helpers of ``Trainer`` (no ``__init__``: ``Trainer`` sets them)."""

    cfg: JobConfig
    use_cuda: bool
    rank: int
    world: int
    local_rank: int
    device: torch.device
    ctrl_pg: Any  # gloo group for the per-step control flags and small object collectives
    ckpt_pg: Any  # gloo group for DCP saves and loads
    reporter: Reporter | None  # rank 0 only
    store: CheckpointStore
    signals: Signals
    step: int
    tokens_seen: int
    last_saved_step: int
    last_save_time: float  # time.monotonic()
    last_loss: float | None
    blocked_s: float  # seconds the last save blocked training
    _commit_pool: ThreadPoolExecutor
    _prune_pool: ThreadPoolExecutor
    _prune_future: Future[None] | None
    _pending: Future[None] | None
    _stager: Any  # pinned staging buffers for async saves (GPU)
    _manifests: dict[int, dict[str, Any]]  # step -> manifest written by this rank (coordinator)
    engine: Any  # DeepSpeed engine when cfg.engine == "deepspeed"
    resumed_from_degree: int  # data-parallel degree of the checkpoint resumed from (this run's if none)
    _preempt_at: int | None  # test hook PREEMPT_AT_STEP_ENV
    # set by build()
    micro_batch: int  # samples per rank per forward pass on this degree
    grad_accum: int  # micro-batches per optimizer step on this degree
    sampler: TokenSampler
    model: Any  # DDP-wrapped module, FSDP2-sharded module, or the DeepSpeed engine
    optimizer: Any  # torch.optim.AdamW, or DeepSpeed's wrapper of it
    scheduler: Any  # LambdaLR, or DeepSpeed's wrapper of it

    def emit(self, type_: str, **fields: Any) -> None:
        if self.reporter is not None:
            self.reporter.emit(type_, **fields)

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[runtime] {msg}", flush=True)

    def _model_optim_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}
