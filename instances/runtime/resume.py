"""Resuming: pick, verify and load a checkpoint into the ``Trainer``, classifying every failure.

Rank 0 lists the store (rollback and fresh-start markers handled there) and verifies a candidate
against its manifest; the verdict is broadcast over the gloo ``ctrl`` group, every rank loads, and the
outcomes are gathered so all ranks return the same verdict: loaded, **damage** (set aside, the
previous checkpoint is tried), **incompatible** (``ResumeRefused``) or **transient** (retried with
back-off, then ``CheckpointStoreError``). See ``ResumeMixin.resume``.
"""

from __future__ import annotations

import json
import pickle
import time
from typing import Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.api import CheckpointException  # a BaseException, not an Exception

from instances.runtime.base import TrainerBase
from instances.runtime.checkpoint import CheckpointCorrupt, CheckpointStoreError
from instances.runtime.loop import NoLoadableCheckpoint, ResumeRefused, classify_load_error, restore_rng

# Fields of the config whose change makes a checkpoint unloadable or its resume inexact: the model's
# shapes (model, seq_len via the data layout), the sampler's layout (micro_batch, seq_len, seed), the engine.
# For an elastic job (global_batch set before and now) micro_batch is only a memory bound and may change;
# the global batch may not (ELASTIC_SHAPE_FIELDS).
SHAPE_FIELDS = ("model", "seq_len", "micro_batch", "seed")
ELASTIC_SHAPE_FIELDS = ("model", "seq_len", "global_batch", "seed")


class ResumeMixin(TrainerBase):
    """The load half of ``Trainer``: ``resume`` and the collective verify / load steps behind it."""

    def resume(self) -> int:
        """Load the newest complete checkpoint (or the rollback target); return the step resumed from (0 = fresh).

        Partial folders are reported and ignored. Each candidate, newest first, is verified and loaded and
        the failure, if any, classified:

        * **damage** (hash mismatch, truncated or unreadable file, missing shard): reported naming the
          checkpoint and the file, set aside as ``step-N.corrupt-<time>``, and the previous one is tried;
        * **incompatible** (model, ``seq_len``, seed or tensor shapes; ``micro_batch`` or the data-parallel
          degree unless the job is elastic, ``global_batch`` if it is): ``ResumeRefused`` naming both
          values; nothing is touched. An elastic job (``global_batch`` set when the checkpoint was written
          and now) resumes on any degree that divides the global batch: DCP reshards model and optimizer,
          the sampler continues at the next sample of the global order, LR schedule and step continue;
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
        saved = state.get("config") or {}
        elastic = bool(self.cfg.global_batch) and bool(saved.get("global_batch"))
        if state["dp_degree"] != self.world and not elastic:
            return (
                f"checkpoint {url} was written with data-parallel degree {state['dp_degree']}, this run has "
                f"{self.world}; refusing to resume (the job has no global_batch, so its batch and data position "
                "belong to that degree). Restart with the same number of processes, set global_batch (elastic "
                "jobs), or roll back."
            )
        if state["engine"] != self.cfg.engine and "deepspeed" in (state["engine"], self.cfg.engine):
            return f"checkpoint {url} was written by engine {state['engine']}, this run uses {self.cfg.engine}"
        for name in ELASTIC_SHAPE_FIELDS if elastic else SHAPE_FIELDS:
            if name in saved and saved[name] != getattr(self.cfg, name):
                return (
                    f"checkpoint {url} was written with {name}={saved[name]!r}, this run has "
                    f"{name}={getattr(self.cfg, name)!r}; refusing to resume (the model's or the data "
                    f"sampler's shapes differ). Restart with {name}={saved[name]!r}, or set fresh_start."
                )
        sampler = state.get("sampler") or {}
        for key in self.sampler.layout_keys(sampler):
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
        # the RNG streams are per rank; on another degree rank r takes rank r mod N's (the presets draw no
        # random numbers after initialisation — no dropout — so the losses do not depend on it)
        rngs = state["rng"]
        restore_rng(rngs[self.rank % len(rngs)])
        if state["dp_degree"] != self.world:
            note = (
                f"elastic resume: checkpoint of step {state['step']} written at data-parallel degree "
                f"{state['dp_degree']}, resumed at {self.world} (global batch {self.cfg.global_batch}: "
                f"micro-batch {self.micro_batch} x {self.grad_accum} accumulation steps per rank)"
            )
            self.log(note)
            self.resumed_from_degree = int(state["dp_degree"])
