"""The training loop: distributed setup, engines, checkpoint triggers, resume, exit codes.

Runs once per process under ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR``/``MASTER_PORT`` from its rendezvous). Backend: gloo on CPU, NCCL (plus gloo for CPU
tensors) on GPU. Three process groups: the default one for training collectives, ``ctrl`` (gloo)
for the per-step control flags, and ``ckpt`` (gloo) for DCP saves, so an async save running in a
background thread never interleaves collectives with training (with the default group the next
training step deadlocks — see ../shared/MACHINE-NOTES.md).

Control flow per iteration: agree on flags (SIGTERM, SIGUSR1, portal checkpoint / stop request,
time interval; one all-reduce MAX over ``ctrl``) -> act (final save and exit, or interval save) ->
one optimizer step. A checkpoint "at step N" holds the state after N optimizer steps.

The pieces live in their own modules: ``saving`` (``SavingMixin``: save, commit, keep-last-K),
``resume`` (``ResumeMixin``: pick, verify and load a checkpoint), ``loop`` (stateless helpers: signals,
LR schedule, RNG blobs, load-error classes), ``base`` (the attributes and helpers they share).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from instances.runtime import exitcodes
from instances.runtime.checkpoint import CheckpointStore
from instances.runtime.config import JobConfig, batch_layout
from instances.runtime.data import TokenSampler
from instances.runtime.loop import (  # noqa: F401 - stateless pieces of the loop, importable from here
    NoLoadableCheckpoint,
    ResumeRefused,
    Signals,
    _root_errors,
    classify_load_error,
    is_peer_loss,
    lr_lambda,
    restore_rng,
    rng_blob,
)
from instances.runtime.mfu import NOTE_UNKNOWN_DEVICE, mfu_basis
from instances.runtime.model import build_model, decoder_layers, materialize, parameter_count
from instances.runtime.reporting import Reporter
from instances.runtime.resume import SHAPE_FIELDS, ResumeMixin  # noqa: F401 - SHAPE_FIELDS importable from here
from instances.runtime.saving import PAUSE_BEFORE_COMMIT_ENV, SavingMixin  # noqa: F401 - importable from here

# Test hook (never set in production): every rank behaves as if SIGTERM arrived once ``step`` equals this
# value, so a test preempts a job at an exact step (and resumes it elsewhere) without racing the loop.
PREEMPT_AT_STEP_ENV = "RUNTIME_TEST_PREEMPT_AT_STEP"


def exit_log_line(reason: str, code: int, step: int, message: str) -> str:
    """The runtime's last log line. SIGTERM (exit ``EXIT_PREEMPTED``, 85) is how the portal stops an attempt
    (a user's stop, a rollback, a shutdown) as well as how a preemption begins; the runtime cannot tell them
    apart, so the line names the signal rather than calling every stop a preemption (the portal records which
    it was): ``exit on SIGTERM (85) at step 320: checkpoint saved at step 320``."""
    what = "on SIGTERM" if code == exitcodes.EXIT_PREEMPTED else reason
    return f"exit {what} ({code}) at step {step}: {message}"


FLAG_NAMES = ("term", "usr1", "portal_checkpoint", "portal_stop", "interval")


class Trainer(ResumeMixin, SavingMixin):
    """One rank's training job. ``run()`` returns the process exit code (``instances.runtime.exitcodes``)."""

    def __init__(self, cfg: JobConfig) -> None:
        self.cfg = cfg
        self.use_cuda = torch.cuda.is_available()
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if self.use_cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if not dist.is_initialized():
            dist.init_process_group(backend="cpu:gloo,cuda:nccl" if self.use_cuda else "gloo")
        self.ctrl_pg = dist.new_group(backend="gloo")
        self.ckpt_pg = dist.new_group(backend="gloo")
        self.reporter = None
        if self.rank == 0:
            self.reporter = Reporter(
                callback_url=cfg.callback_url,
                job_token=cfg.job_token,
                attempt=cfg.attempt,
                workdir=cfg.workdir_path,
                interval_s=cfg.report_interval_s,
            )
        self.store = CheckpointStore(cfg.checkpoint_dir)
        self.signals = Signals()
        self.signals.install(cfg.term_grace_s, self._grace_expired)
        self.step = 0
        self.tokens_seen = 0
        self.last_saved_step = -1
        self.last_save_time = time.monotonic()
        self.last_loss = None
        self._commit_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-commit")
        self._prune_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-prune")
        self._prune_future = None
        self._pending = None
        self._stager = None  # pinned staging buffers for async saves (GPU)
        self._manifests = {}  # step -> manifest written by this rank (coordinator)
        self.engine = None  # DeepSpeed engine when cfg.engine == "deepspeed"
        preempt_at = os.environ.get(PREEMPT_AT_STEP_ENV)
        self._preempt_at = int(preempt_at) if preempt_at else None

    def _grace_expired(self) -> None:
        # SIGTERM grace period over and the checkpoint is not complete: leave without claiming one.
        self.emit(
            "exit",
            reason="failed",
            exit_code=exitcodes.EXIT_FAILED,
            step=self.step,
            message=f"checkpoint not complete within term_grace_s={self.cfg.term_grace_s}s after SIGTERM",
        )
        if self.reporter is not None:
            self.reporter.close(timeout_s=1.0)
        os._exit(exitcodes.EXIT_FAILED)

    # ---- build ---------------------------------------------------------------------------------

    def build(self) -> None:
        """Sampler, model, engine wrapping, optimizer and LR schedule for this rank.

        With ``global_batch`` set the micro-batch and gradient-accumulation steps come from
        ``batch_layout(global_batch, world, micro_batch)`` (``ConfigError`` if the degree does not divide
        the global batch), so the optimizer step sees the same samples on any allowed degree."""
        cfg = self.cfg
        if cfg.global_batch:
            self.micro_batch, self.grad_accum = batch_layout(cfg.global_batch, self.world, cfg.micro_batch)
        else:
            self.micro_batch, self.grad_accum = cfg.micro_batch, cfg.grad_accum
        self.sampler = TokenSampler(
            cfg.data,
            seq_len=cfg.seq_len,
            micro_batch=self.micro_batch,
            dp_rank=self.rank,
            dp_size=self.world,
            seed=cfg.seed,
            global_batch=cfg.global_batch,
        )
        vocab = self.sampler.vocab_size
        if cfg.tokenizer:
            from tokenizers import Tokenizer

            tok_vocab = Tokenizer.from_file(cfg.tokenizer).get_vocab_size()
            if tok_vocab != vocab:
                raise ValueError(f"tokenizer {cfg.tokenizer} has {tok_vocab} ids, the shards say {vocab}")
        with torch.device("meta") if cfg.meta_init else contextlib.nullcontext():
            model = build_model(cfg.model, vocab_size=vocab, seq_len=cfg.seq_len, seed=cfg.seed,
                                attention=cfg.attention)  # fmt: skip
        self.vocab_size = model.config.vocab_size
        self.n_params = parameter_count(model)
        self.mfu = mfu_basis(model, seq_len=cfg.seq_len, devices=self.world, device=self.device)
        self.log(
            f"MFU basis: {self.mfu.flops_per_token / 1e9:.4f} GFLOP/token; "
            f"peak {self.mfu.peak_flops / 1e12 if self.mfu.peak_flops else 'n/a'} TFLOP/s; {self.mfu.note}"
        )
        if cfg.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.compile:
            for layer in decoder_layers(model):
                layer.compile()  # per block, before wrapping: FSDP2 / DDP hooks stay outside the graphs
        self.tokens_per_step = cfg.seq_len * self.micro_batch * self.grad_accum * self.world
        if cfg.max_steps:
            self.total_steps = cfg.max_steps
        else:
            self.total_steps = math.ceil(cfg.max_tokens / self.tokens_per_step)
        if cfg.max_tokens:
            self.total_steps = min(self.total_steps, math.ceil(cfg.max_tokens / self.tokens_per_step))
        amp = self.use_cuda and cfg.mixed_precision != "none"
        self.amp_dtype = torch.bfloat16 if cfg.mixed_precision == "bf16" else torch.float16
        self.autocast = amp and cfg.engine == "ddp"
        if not cfg.meta_init:
            model.to(self.device)
        decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
        no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
        groups = [
            {"params": decay, "weight_decay": cfg.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        if cfg.engine == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP

            self.model = DDP(model, device_ids=[self.local_rank] if self.use_cuda else None)
        elif cfg.engine == "fsdp":
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

            mesh = init_device_mesh(self.device.type, (self.world,))
            mp = MixedPrecisionPolicy(param_dtype=self.amp_dtype, reduce_dtype=torch.float32) if amp else None
            kw: dict[str, Any] = {"mesh": mesh}
            if mp is not None:
                kw["mp_policy"] = mp
            for layer in decoder_layers(model):
                fully_shard(layer, **kw)
            fully_shard(model, **kw)
            if cfg.meta_init:
                materialize(model, device=self.device, seed=cfg.seed)
            self.model = model
            # fully_shard replaced the parameters by DTensors: regroup after sharding
            decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
            no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
            groups = [
                {"params": decay, "weight_decay": cfg.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ]
        fused = cfg.fused_optimizer and self.use_cuda  # one kernel per parameter group on GPU
        self.optimizer = torch.optim.AdamW(
            groups, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, fused=fused or None, foreach=not fused
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(cfg, self.total_steps))
        if cfg.engine == "deepspeed":
            self._build_deepspeed(model, amp)

    def _build_deepspeed(self, model: torch.nn.Module, amp: bool) -> None:
        import deepspeed

        if not self.use_cuda:
            # DeepSpeed's CPU shared-memory all-reduce is a C++ op compiled at start-up (~100 s on 2 cores);
            # gloo does the job for CPU runs, so mark the op unavailable and skip the build.
            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        cfg = self.cfg
        ds_config: dict[str, Any] = {
            "train_micro_batch_size_per_gpu": cfg.micro_batch,
            "gradient_accumulation_steps": cfg.grad_accum,
            "zero_optimization": {"stage": cfg.zero_stage},
            "steps_per_print": 1 << 30,
            "zero_allow_untested_optimizer": True,
        }
        if cfg.grad_clip:
            ds_config["gradient_clipping"] = cfg.grad_clip
        if amp:
            ds_config["bf16" if cfg.mixed_precision == "bf16" else "fp16"] = {"enabled": True}
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model,
            optimizer=self.optimizer,
            lr_scheduler=self.scheduler,
            config=ds_config,
        )
        self.model = self.engine

    # ---- loop ----------------------------------------------------------------------------------

    def _flags(self) -> dict[str, bool]:
        """Agree on the control flags across ranks (all-reduce MAX over the gloo ``ctrl`` group)."""
        portal_ckpt = portal_stop = False
        if self.reporter is not None:
            portal_ckpt, portal_stop = self.reporter.requests()
        minutes = self.cfg.checkpoint_every_minutes
        interval = bool(minutes) and self.rank == 0 and time.monotonic() - self.last_save_time >= minutes * 60
        term = self.signals.term or (self._preempt_at is not None and self.step == self._preempt_at)
        local = [term, self.signals.usr1, portal_ckpt, portal_stop, interval]
        self.signals.usr1 = False
        t = torch.tensor([int(v) for v in local], dtype=torch.int64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.ctrl_pg)
        return {name: bool(v) for name, v in zip(FLAG_NAMES, t.tolist(), strict=True)}

    def _reduce_loss(self, local_loss: torch.Tensor) -> float:
        t = local_loss.detach().to(torch.float64).clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return float(t.item()) / self.world

    def train_step(self) -> torch.Tensor:
        """One optimizer step (``grad_accum`` micro-batches). Returns this rank's mean loss (tensor)."""
        cfg = self.cfg
        total = torch.zeros((), dtype=torch.float32, device=self.device)
        grad_accum = self.grad_accum
        if self.engine is not None:
            for _ in range(grad_accum):
                x, y = (t.to(self.device, non_blocking=True) for t in self.sampler.next_batch())
                logits = self.engine(input_ids=x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
                self.engine.backward(loss)
                self.engine.step()
                total += loss.detach()
            return total / grad_accum
        self.optimizer.zero_grad(set_to_none=True)
        for micro in range(grad_accum):
            last = micro == grad_accum - 1
            x, y = (t.to(self.device, non_blocking=True) for t in self.sampler.next_batch())
            if cfg.engine == "ddp":
                sync_ctx: Any = contextlib.nullcontext() if last else self.model.no_sync()
            else:
                self.model.set_requires_gradient_sync(last)
                sync_ctx = contextlib.nullcontext()
            amp_ctx: Any = torch.autocast("cuda", dtype=self.amp_dtype) if self.autocast else contextlib.nullcontext()
            with sync_ctx, amp_ctx:
                logits = self.model(input_ids=x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
                (loss / grad_accum).backward()
            total += loss.detach()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return total / grad_accum

    def run(self) -> int:
        """Build, resume, train until a limit / signal / request; return the exit code."""
        cfg = self.cfg
        self.build()
        self.resumed_from_degree = self.world
        resumed = self.resume()
        self.last_saved_step = resumed if resumed else -1
        self.last_save_time = time.monotonic()
        start = f"resumed from step {resumed}" if resumed else "started from step 0"  # a fresh start is no resume
        self.log(f"{self.n_params} parameters, world {self.world}, engine {cfg.engine}, {start}")
        self.emit("started", step=resumed, world_size=self.world, flops_per_token=self.mfu.flops_per_token,
                  peak_flops=self.mfu.peak_flops, device=self.mfu.device_name, micro_batch=self.micro_batch,
                  grad_accum=self.grad_accum, global_batch=self.micro_batch * self.grad_accum * self.world,
                  resumed_from_degree=self.resumed_from_degree)  # fmt: skip
        if resumed and self.rank == 0:
            # finish keep-last-K for a run killed between a commit and its prune (a lost node); without this,
            # each such kill leaves one more checkpoint behind. The loaded step is the newest complete one
            # (newer damaged ones were set aside, a rollback moved newer ones away), so it is kept. Its
            # checkpoint_pruned events follow `started`; the first save waits for it (wait_for_save).
            self._prune_future = self._prune_pool.submit(self._prune)
        pending_loss: torch.Tensor | None = None
        mark_t, mark_tokens = time.monotonic(), self.tokens_seen
        while True:
            flags = self._flags()
            done = self.step >= self.total_steps
            want_save = (
                flags["usr1"]
                or flags["portal_checkpoint"]
                or flags["interval"]
                or (cfg.checkpoint_every_steps and self.step % cfg.checkpoint_every_steps == 0)
            )
            final = done or flags["term"] or flags["portal_stop"]
            if (final or want_save) and self.step != self.last_saved_step and self.step > 0:
                if pending_loss is not None:
                    self.last_loss = self._reduce_loss(pending_loss)
                    pending_loss = None
                self.save(asynchronous=cfg.async_save and not final)
            if final:
                self.wait_for_save()
                if flags["term"]:
                    return self.finish("preempted", exitcodes.EXIT_PREEMPTED, f"checkpoint saved at step {self.step}")
                if flags["portal_stop"]:
                    return self.finish("stopped", exitcodes.EXIT_STOPPED, f"checkpoint saved at step {self.step}")
                return self.finish("finished", exitcodes.EXIT_FINISHED, f"reached step {self.step}")
            loss_t = self.train_step()
            self.step += 1
            if cfg.record_samples:
                self._record_samples()
            self.tokens_seen += self.tokens_per_step
            if self.step % cfg.log_every_steps == 0:
                self.last_loss = self._reduce_loss(loss_t)
                pending_loss = None
                now = time.monotonic()
                tps = (self.tokens_seen - mark_tokens) / max(now - mark_t, 1e-9)
                mark_t, mark_tokens = now, self.tokens_seen
                self.emit(
                    "progress",
                    step=self.step,
                    loss=self.last_loss,
                    lr=self.scheduler.get_last_lr()[0],
                    tokens_per_s=round(tps, 3),
                    tokens_seen=self.tokens_seen,
                    mfu=self.mfu.mfu(tps),
                    **({} if self.mfu.peak_flops else self._mfu_note()),
                )
            else:
                pending_loss = loss_t

    def _record_samples(self) -> None:
        """Append this step's samples (global position and id) to ``samples-rank<R>.jsonl`` (``record_samples``)."""
        taken = self.sampler.drain_taken()
        line = {
            "attempt": self.cfg.attempt,
            "step": self.step,
            "world": self.world,
            "epoch": [t[0] for t in taken],
            "position": [t[1] for t in taken],
            "id": [t[2] for t in taken],
        }
        path = self.cfg.workdir_path / f"samples-rank{self.rank}.jsonl"
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    def _mfu_note(self) -> dict[str, str]:
        """The progress event's fields saying why ``mfu`` is null (see ``instances.runtime.reporting``)."""
        note = {"mfu_note": self.mfu.note, "mfu_note_code": self.mfu.note_code}
        return {**note, "mfu_device": self.mfu.device_name} if self.mfu.note_code == NOTE_UNKNOWN_DEVICE else note

    def finish(self, reason: str, code: int, message: str) -> int:
        if self.signals.grace_timer is not None:
            self.signals.grace_timer.cancel()  # the checkpoint is complete: no deadline any more
        self.emit("exit", reason=reason, exit_code=code, step=self.step, message=message)
        if self.rank == 0:
            # torchrun reports any failing worker as its own exit status 1: the code is kept here too
            exit_file = self.cfg.workdir_path / "exit.json"
            exit_file.write_text(
                json.dumps(
                    {
                        "reason": reason,
                        "exit_code": code,
                        "step": self.step,
                        "message": message,
                        "attempt": self.cfg.attempt,
                    }
                )
            )
        self.log(exit_log_line(reason, code, self.step, message))
        return code

    def close(self) -> None:
        """Release threads, reporter and process groups (safe to call after errors)."""
        with contextlib.suppress(Exception):
            self.wait_for_save()
        self._commit_pool.shutdown(wait=True)
        with contextlib.suppress(Exception):
            self.wait_for_save()  # the pruning the last commit started
        self._prune_pool.shutdown(wait=True)
        if self.reporter is not None:
            self.reporter.close(timeout_s=10.0)
        if self.engine is not None:
            with contextlib.suppress(Exception):
                self.engine.destroy()
        if dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.barrier(group=self.ctrl_pg)
            dist.destroy_process_group()
