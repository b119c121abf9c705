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
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

from instances.runtime import exitcodes
from instances.runtime.checkpoint import (
    COMMIT_MARKER,
    METADATA_HASHES_ATTR,
    SIDECAR_PREFIX,
    CheckpointCorrupt,
    CheckpointStore,
    CheckpointStoreError,
    HashingFileSystem,
)
from instances.runtime.config import JobConfig
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
from instances.runtime.mfu import mfu_basis
from instances.runtime.model import build_model, decoder_layers, materialize, parameter_count
from instances.runtime.reporting import Reporter

# Test hook (never set in production): rank 0 pauses right before DCP writes ``.metadata`` of the
# save at this step and touches ``{workdir}/paused-before-commit``, so a test can SIGKILL mid-save.
PAUSE_BEFORE_COMMIT_ENV = "RUNTIME_TEST_PAUSE_BEFORE_COMMIT_AT_STEP"
FLAG_NAMES = ("term", "usr1", "portal_checkpoint", "portal_stop", "interval")


# Fields of the config whose change makes a checkpoint unloadable or its resume inexact: the model's
# shapes (model, seq_len via the data layout), the sampler's layout (micro_batch, seq_len, seed), the engine.
SHAPE_FIELDS = ("model", "seq_len", "micro_batch", "seed")




class Trainer:
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
        self.reporter: Reporter | None = None
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
        self.last_loss: float | None = None
        self._commit_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-commit")
        self._prune_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ckpt-prune")
        self._prune_future: Future[None] | None = None
        self._pending: Future[None] | None = None
        self._stager: Any = None  # pinned staging buffers for async saves (GPU)
        self._manifests: dict[int, dict[str, Any]] = {}  # step -> manifest written by this rank (coordinator)
        self.engine: Any = None  # DeepSpeed engine when cfg.engine == "deepspeed"

    # ---- reporting helpers ---------------------------------------------------------------------

    def emit(self, type_: str, **fields: Any) -> None:
        if self.reporter is not None:
            self.reporter.emit(type_, **fields)

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(f"[runtime] {msg}", flush=True)

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
        cfg = self.cfg
        self.sampler = TokenSampler(
            cfg.data,
            seq_len=cfg.seq_len,
            micro_batch=cfg.micro_batch,
            dp_rank=self.rank,
            dp_size=self.world,
            seed=cfg.seed,
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
        self.log(f"MFU basis: {self.mfu.flops_per_token / 1e9:.4f} GFLOP/token; "
                 f"peak {self.mfu.peak_flops / 1e12 if self.mfu.peak_flops else 'n/a'} TFLOP/s; {self.mfu.note}")
        if cfg.activation_checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if cfg.compile:
            for layer in decoder_layers(model):
                layer.compile()  # per block, before wrapping: FSDP2 / DDP hooks stay outside the graphs
        self.tokens_per_step = cfg.seq_len * cfg.micro_batch * cfg.grad_accum * self.world
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

    # ---- checkpoints ---------------------------------------------------------------------------

    def _runtime_state(self) -> bytes:
        """Everything that is not a tensor of the model or optimizer, identical on every rank (pickled)."""
        rngs: list[bytes | None] = [None] * self.world
        dist.all_gather_object(rngs, rng_blob(), group=self.ctrl_pg)
        state = {
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "world_size": self.world,
            "dp_degree": self.world,
            "engine": self.cfg.engine,
            "sampler": self.sampler.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rngs,
            "loss": self.last_loss,
            "config": self.cfg.to_dict(),
        }
        return pickle.dumps(state)

    def _model_optim_state(self) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}

    def _writer(self, step: int, loss: float | None, extra: dict[str, Any]) -> Any:
        """DCP writer for ``step``: every shard is hashed while it is written (``HashingFileSystem``, in
        DCP's writer threads); each rank leaves its table in ``.sha256-rank<R>.json``; the coordinator
        merges them into ``manifest.json`` and into ``.metadata`` *before* ``.metadata`` (the commit
        marker) is written, so every complete checkpoint carries its hashes."""
        from torch.distributed.checkpoint import FileSystemWriter
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

        base: Any = FileSystemWriter if self.store.is_local else FsspecWriter
        pause_at = os.environ.get(PAUSE_BEFORE_COMMIT_ENV)
        workdir = self.cfg.workdir_path
        store, rank, trainer = self.store, self.rank, self
        checksum = self.cfg.verify_checkpoints

        class Writer(base):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.fs = HashingFileSystem(self.fs, digest=checksum)

            def _sidecar(self, r: int) -> Any:
                return self.fs.concat_path(self.path, f"{SIDECAR_PREFIX}{r}.json")

            def write_data(self, plan: Any, planner: Any) -> Any:
                fut = super().write_data(plan, planner)
                fut.wait()  # FileSystemWriter writes synchronously; the table is complete now
                with self.fs.create_stream(self._sidecar(rank), "wb") as fh:
                    fh.write(json.dumps(self.fs.hashes).encode())
                return fut

            def finish(self, metadata: Any, results: Any) -> Any:
                files: dict[str, dict[str, Any]] = {}
                for r in range(len(results)):
                    with self.fs.create_stream(self._sidecar(r), "rb") as fh:
                        files.update(json.loads(fh.read()))
                written = {wr.storage_data.relative_path for wrs in results for wr in wrs}
                if written - files.keys():
                    raise CheckpointCorrupt(f"shards without a hash: {sorted(written - files.keys())}")
                manifest = store.build_manifest(step, files, loss=loss, extra=extra)
                manifest["commit"] = COMMIT_MARKER
                setattr(metadata, METADATA_HASHES_ATTR, files)
                setattr(metadata, METADATA_HASHES_ATTR + "_extra", {"loss": loss, "extra": extra})
                store.put_manifest(step, manifest)
                for r in range(len(results)):
                    with contextlib.suppress(OSError):
                        self.fs.rm_file(self._sidecar(r))
                trainer._manifests[step] = manifest
                if pause_at is not None and int(pause_at) == step:
                    (workdir / "paused-before-commit").write_text(str(step))
                    time.sleep(600)
                return super().finish(metadata, results)

        # a URL for remote stores: the fs path alone would be read as a local path by DCP's fsspec writer
        return Writer(self.store.step_url(step), thread_count=self.cfg.checkpoint_threads, sync_files=True,
                      overwrite=False)

    def save(self, *, asynchronous: bool) -> None:
        """Save the state after ``self.step`` steps into a fresh ``step-N`` folder (collective).

        Async: returns once the state is staged; the commit (manifest, report, keep-last-K) runs
        when the write completes. Sync: returns after the commit.
        """
        self.wait_for_save()
        step, loss = self.step, self.last_loss
        if self.rank == 0:
            note = self.store.prepare(step)
            if note:
                self.log(note)
                self.emit("warning", message=note)
        dist.barrier(group=self.ctrl_pg)
        blob = self._runtime_state()
        t0 = time.monotonic()
        if self.engine is not None:
            self.engine.save_checkpoint(self.store.step_path(step), tag="ds", client_state={"runtime": blob})
            dist.barrier(group=self.ctrl_pg)
            self._commit(step, loss)
        else:
            import torch.distributed.checkpoint as dcp

            state = {**self._model_optim_state(), "runtime": blob}
            writer = self._writer(step, loss, self._manifest_extra(step))
            if asynchronous:
                stager: Any = None
                if self.use_cuda and self.cfg.pinned_staging:
                    from torch.distributed.checkpoint.staging import BlockingAsyncStager

                    if self._stager is None:  # one pinned host copy of the state, reused by every save
                        self._stager = BlockingAsyncStager(cache_staged_state_dict=True)
                    stager = self._stager
                resp = dcp.async_save(state, storage_writer=writer, process_group=self.ckpt_pg, async_stager=stager)
                upload: Future[Any] = getattr(resp, "upload_completion", resp)
                self._pending = self._commit_pool.submit(self._commit_after, upload, step, loss)
            else:
                dcp.save(state, storage_writer=writer, process_group=self.ckpt_pg)
                self._commit(step, loss)
        self.blocked_s = time.monotonic() - t0
        self.last_saved_step = step
        self.last_save_time = time.monotonic()

    def _commit_after(self, upload: Future[Any], step: int, loss: float | None) -> None:
        upload.result()
        self._commit(step, loss)

    def _manifest_extra(self, step: int) -> dict[str, Any]:
        return {
            "world_size": self.world,
            "dp_degree": self.world,
            "engine": self.cfg.engine,
            "tokens_seen": self.tokens_seen if step == self.step else None,
        }

    def _commit(self, step: int, loss: float | None) -> None:
        """Rank 0, once the checkpoint of ``step`` is complete: manifest (DeepSpeed only; DCP's is written
        before its commit marker), ``checkpoint`` event, keep-last-K with a ``checkpoint_pruned`` event
        per checkpoint deleted."""
        if self.rank != 0:
            return
        manifest = self._manifests.pop(step, None)
        if manifest is None:
            manifest = self.store.write_manifest(
                step, loss=loss, checksum=self.cfg.verify_checkpoints, extra=self._manifest_extra(step)
            )
        self.emit("checkpoint", step=step, path=self.store.step_url(step), bytes=manifest["bytes"], loss=loss)
        # deleting old checkpoints is off the save's path; the next save (or close) waits for it
        self._prune_future = self._prune_pool.submit(self._prune)

    def _prune(self) -> None:
        for folder in self.store.prune(self.cfg.keep_last):
            self.log(f"keep_last={self.cfg.keep_last}: deleted {folder.path}")
            if folder.complete:
                self.emit("checkpoint_pruned", step=folder.step, path=self.store.step_url(folder.step))

    def wait_for_save(self) -> None:
        """Block until a pending async save is written and committed, and its keep-last-K pruning done
        (re-raises their errors)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()
        if self._prune_future is not None:
            pruning, self._prune_future = self._prune_future, None
            pruning.result()

    def resume(self) -> int:
        """Load the newest complete checkpoint (or the rollback target); return the step resumed from (0 = fresh).

        Partial folders are reported and ignored. Each candidate, newest first, is verified and loaded and
        the failure, if any, classified:

        * **damage** (hash mismatch, truncated or unreadable file, missing shard): reported naming the
          checkpoint and the file, set aside as ``step-N.corrupt-<time>``, and the previous one is tried;
        * **incompatible** (other data-parallel degree, model, ``seq_len``, ``micro_batch``, seed or tensor
          shapes): ``ResumeRefused`` naming both values; nothing is touched;
        * **transient** (the store fails to answer): tried ``store_retries`` times with back-off from
          ``store_backoff_s`` (doubling), then ``CheckpointStoreError`` (exit 75); nothing is touched.

        A run never starts from step 0 while a complete checkpoint exists, nor when every checkpoint has
        been set aside as damaged (``NoLoadableCheckpoint``), unless ``fresh_start`` is set: then every
        ``step-N`` folder is moved to ``fresh-start-<time>/`` (once per attempt) and training starts over.
        """
        cfg = self.cfg
        listing: list[Any] = [None]
        if self.rank == 0:
            listing[0] = self._resume_listing()
        dist.broadcast_object_list(listing, src=0, group=self.ctrl_pg)
        if isinstance(listing[0], str):
            raise ResumeRefused(listing[0])
        if isinstance(listing[0], tuple):
            raise NoLoadableCheckpoint(listing[0][0])
        steps: list[int] = listing[0]
        if not steps:
            return 0
        for step in reversed(steps):
            error = self._try_load_with_retries(step)
            if error is None:
                return step
            if isinstance(error, ResumeRefused | CheckpointStoreError):
                raise error
            self.log(str(error))
            self.emit("warning", message=str(error))
            if self.rank == 0:
                aside = self.store.set_aside(step, "corrupt")
                self.emit("warning", message=f"set aside damaged checkpoint {self.store.step_url(step)} as {aside}")
            dist.barrier(group=self.ctrl_pg)
        raise NoLoadableCheckpoint(
            f"none of the {len(steps)} complete checkpoints in {cfg.checkpoint_dir} loads (each is damaged and was "
            "set aside); not starting from step 0: set fresh_start to train from scratch"
        )

    def _resume_listing(self) -> list[int] | str | tuple[str]:
        """Rank 0: steps of the complete checkpoints to try, a refusal message, or ``(message,)`` when only
        damaged checkpoints are left. Handles rollback and fresh start markers."""
        cfg = self.cfg
        fs, root = self.store.fs, self.store.root.rstrip("/")
        folders = self.store.list()
        if cfg.fresh_start:
            marker = f"{root}/fresh-start-attempt-{cfg.attempt}.json"
            if not fs.exists(marker):
                moved = self.store.roll_back(-1, label="fresh-start")
                fs.makedirs(root, exist_ok=True)
                with fs.open(marker, "w") as fh:
                    fh.write(json.dumps({"moved": moved}))
                if moved:
                    self.emit("warning", message=f"fresh_start: set aside {len(moved)} checkpoint folder(s): {moved}")
                return []
        for f in folders:
            if not f.complete:
                msg = f"ignoring partial checkpoint {f.path} (no commit marker)"
                self.log(msg)
                self.emit("warning", message=msg)
        if cfg.resume_step >= 0:
            marker = f"{root}/rollback-attempt-{cfg.attempt}.json"
            if not fs.exists(marker):
                if not any(f.complete and f.step == cfg.resume_step for f in folders):
                    return f"resume_step {cfg.resume_step}: no complete checkpoint at that step"
                moved = self.store.roll_back(cfg.resume_step)
                with fs.open(marker, "w") as fh:
                    fh.write(f'{{"resume_step": {cfg.resume_step}, "moved": {len(moved)}}}')
                if moved:
                    self.emit("warning", message=f"rolled back to step {cfg.resume_step}; set aside {moved}")
        steps = [f.step for f in self.store.complete()]
        if not steps and not cfg.fresh_start and fs.exists(root):
            damaged = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(root, detail=False) if ".corrupt-" in p)
            if damaged:
                return (
                    f"no complete checkpoint in {cfg.checkpoint_dir}, only damaged ones set aside earlier "
                    f"({', '.join(damaged)}); not starting from step 0: set fresh_start to train from scratch",
                )
        return steps

    def _try_load_with_retries(self, step: int) -> Exception | None:
        """``_try_load`` with transient store errors retried with exponential back-off (same on every rank)."""
        tries, wait = self.cfg.store_retries, self.cfg.store_backoff_s
        error: Exception | None = None
        for attempt in range(1, tries + 1):
            error = self._try_load(step)
            if not isinstance(error, CheckpointStoreError):
                return error
            msg = f"{error} (attempt {attempt} of {tries})"
            self.log(msg)
            self.emit("warning", message=msg)
            if attempt < tries:
                time.sleep(wait)
                wait *= 2
        return CheckpointStoreError(
            f"checkpoint store {self.cfg.checkpoint_dir} kept failing after {tries} attempts: {error}"
        )

    def _incompatibility(self, url: str, state: dict[str, Any]) -> str | None:
        """Why the checkpoint cannot be resumed exactly by this run (naming both values), or ``None``."""
        if state["dp_degree"] != self.world:
            return (
                f"checkpoint {url} was written with data-parallel degree {state['dp_degree']}, this run has "
                f"{self.world}; refusing to resume (resharding sampler, RNG and optimizer is not proven exact). "
                "Restart with the same number of processes, or roll back."
            )
        if state["engine"] != self.cfg.engine and "deepspeed" in (state["engine"], self.cfg.engine):
            return f"checkpoint {url} was written by engine {state['engine']}, this run uses {self.cfg.engine}"
        saved = state.get("config") or {}
        for name in SHAPE_FIELDS:
            if name in saved and saved[name] != getattr(self.cfg, name):
                return (
                    f"checkpoint {url} was written with {name}={saved[name]!r}, this run has "
                    f"{name}={getattr(self.cfg, name)!r}; refusing to resume (the model's or the data "
                    f"sampler's shapes differ). Restart with {name}={saved[name]!r}, or set fresh_start."
                )
        sampler = state.get("sampler") or {}
        for key in ("num_samples", "per_step", "seq_len", "seed"):
            if key in sampler and int(sampler[key]) != getattr(self.sampler, key):
                return (
                    f"checkpoint {url} was written with data layout {key}={sampler[key]}, this run has "
                    f"{key}={getattr(self.sampler, key)} (other data or batch shape); refusing to resume"
                )
        return None

    def _try_load(self, step: int) -> Exception | None:
        """Collective: verify and load ``step`` on every rank; all ranks return the same verdict:
        ``None`` (loaded), ``ResumeRefused``, ``CheckpointStoreError`` or ``CheckpointCorrupt``."""
        url = self.store.step_url(step)
        verdict: list[Any] = [None]
        if self.rank == 0:
            try:
                for note in self.store.verify(step, checksum=self.cfg.verify_checkpoints):
                    self.log(note)
                    self.emit("warning", message=note)
            except CheckpointCorrupt as exc:
                verdict[0] = ("damage", str(exc))
            except CheckpointStoreError as exc:
                verdict[0] = ("transient", str(exc))
        dist.broadcast_object_list(verdict, src=0, group=self.ctrl_pg)
        if verdict[0] is not None:
            kind, msg = verdict[0]
            return CheckpointStoreError(msg) if kind == "transient" else CheckpointCorrupt(msg)
        outcome: tuple[str, str] | None = None
        try:
            state = self._load_runtime(step)
            refusal = self._incompatibility(url, state)
            if refusal:
                outcome = ("incompatible", refusal)
            else:
                self._load_tensors(step, state)
        except (Exception, CheckpointException) as exc:
            kind = classify_load_error(exc)
            detail = f"{type(exc).__name__}: {exc}"
            if kind == "incompatible":
                outcome = (kind, f"checkpoint {url} does not fit this run's model: {detail}")
            elif kind == "transient":
                outcome = (kind, f"checkpoint {url}: store error while loading: {detail}")
            else:
                outcome = (kind, f"checkpoint {url} cannot be loaded: {detail}")
        outcomes: list[Any] = [None] * self.world
        dist.all_gather_object(outcomes, outcome, group=self.ctrl_pg)
        for wanted, cls in (("incompatible", ResumeRefused), ("transient", CheckpointStoreError),
                            ("damage", CheckpointCorrupt)):  # fmt: skip
            for o in outcomes:
                if o is not None and o[0] == wanted:
                    return cls(o[1])
        return None

    def _load_runtime(self, step: int) -> dict[str, Any]:
        path = self.store.step_path(step)
        if self.engine is not None:
            # DeepSpeed keeps the runtime blob in its client state; read it from rank 0's model file.
            from deepspeed.runtime.engine import DeepSpeedEngine  # noqa: F401

            files = [p for p in self.store.fs.ls(f"{path}/ds", detail=False) if p.endswith("model_states.pt")]
            if not files:
                raise CheckpointCorrupt(f"checkpoint {self.store.step_url(step)} has no model_states.pt")
            with self.store.fs.open(sorted(files)[0], "rb") as fh:
                client = torch.load(fh, weights_only=False, map_location="cpu")
            return pickle.loads(client["runtime"])  # noqa: S301 - our own checkpoint
        import torch.distributed.checkpoint as dcp

        holder: dict[str, Any] = {"runtime": b""}
        dcp.load(holder, storage_reader=self._reader(step), process_group=self.ckpt_pg)
        return pickle.loads(holder["runtime"])  # noqa: S301 - our own checkpoint

    def _reader(self, step: int) -> Any:
        from torch.distributed.checkpoint import FileSystemReader
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

        base: Any = FileSystemReader if self.store.is_local else FsspecReader
        return base(self.store.step_url(step))

    def _load_tensors(self, step: int, state: dict[str, Any]) -> None:
        self.sampler.load_state_dict(state["sampler"])
        if self.engine is not None:
            path, _client = self.engine.load_checkpoint(
                self.store.step_path(step),
                tag="ds",
                load_optimizer_states=True,
                load_lr_scheduler_states=True,
            )
            if path is None:
                raise CheckpointCorrupt(f"DeepSpeed could not load {self.store.step_url(step)}")
        else:
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import set_state_dict

            sd = self._model_optim_state()
            dcp.load(sd, storage_reader=self._reader(step), process_group=self.ckpt_pg)
            set_state_dict(self.model, self.optimizer, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
            self.scheduler.load_state_dict(state["scheduler"])
        self.step = int(state["step"])
        self.tokens_seen = int(state["tokens_seen"])
        self.last_loss = state.get("loss")
        restore_rng(state["rng"][self.rank])

    # ---- loop ----------------------------------------------------------------------------------

    def _flags(self) -> dict[str, bool]:
        """Agree on the control flags across ranks (all-reduce MAX over the gloo ``ctrl`` group)."""
        portal_ckpt = portal_stop = False
        if self.reporter is not None:
            portal_ckpt, portal_stop = self.reporter.requests()
        minutes = self.cfg.checkpoint_every_minutes
        interval = bool(minutes) and self.rank == 0 and time.monotonic() - self.last_save_time >= minutes * 60
        local = [self.signals.term, self.signals.usr1, portal_ckpt, portal_stop, interval]
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
        if self.engine is not None:
            for _ in range(cfg.grad_accum):
                x, y = (t.to(self.device, non_blocking=True) for t in self.sampler.next_batch())
                logits = self.engine(input_ids=x).logits
                loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
                self.engine.backward(loss)
                self.engine.step()
                total += loss.detach()
            return total / cfg.grad_accum
        self.optimizer.zero_grad(set_to_none=True)
        for micro in range(cfg.grad_accum):
            last = micro == cfg.grad_accum - 1
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
                (loss / cfg.grad_accum).backward()
            total += loss.detach()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        return total / cfg.grad_accum

    def run(self) -> int:
        """Build, resume, train until a limit / signal / request; return the exit code."""
        cfg = self.cfg
        self.build()
        resumed = self.resume()
        self.last_saved_step = resumed if resumed else -1
        self.last_save_time = time.monotonic()
        self.log(f"{self.n_params} parameters, world {self.world}, engine {cfg.engine}, resumed from step {resumed}")
        self.emit("started", step=resumed, world_size=self.world, flops_per_token=self.mfu.flops_per_token,
                  peak_flops=self.mfu.peak_flops, device=self.mfu.device_name)  # fmt: skip
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
                    **({} if self.mfu.peak_flops else {"mfu_note": self.mfu.note}),
                )
            else:
                pending_loss = loss_t

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
        self.log(f"exit {reason} ({code}) at step {self.step}: {message}")
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
