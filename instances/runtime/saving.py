"""Saving checkpoints: the ``Trainer``'s save path (collective), the commit, keep-last-K pruning.

A checkpoint "at step N" holds the state after N optimizer steps, in a fresh ``step-N`` folder of the
``CheckpointStore``: model and optimizer tensors plus the pickled runtime blob (``_runtime_state``)
through DCP over the gloo ``ckpt`` group (or DeepSpeed's own ``save_checkpoint``). DCP writes are
hashed as they are written and ``manifest.json`` lands before the commit marker (``.metadata``).
Async saves return once the state is staged; the commit runs in a one-thread pool when the write
completes, and pruning in another, so neither sits on the training step's path.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import time
from concurrent.futures import Future
from typing import Any, cast

import torch.distributed as dist

from instances.runtime.base import TrainerBase
from instances.runtime.checkpoint import (
    COMMIT_MARKER,
    METADATA_HASHES_ATTR,
    SIDECAR_PREFIX,
    CheckpointCorrupt,
    HashingFileSystem,
)
from instances.runtime.loop import rng_blob

# Test hook (never set in production): rank 0 pauses right before DCP writes ``.metadata`` of the
# save at this step and touches ``{workdir}/paused-before-commit``, so a test can SIGKILL mid-save.
PAUSE_BEFORE_COMMIT_ENV = "RUNTIME_TEST_PAUSE_BEFORE_COMMIT_AT_STEP"


class SavingMixin(TrainerBase):
    """The save half of ``Trainer``: ``save``, ``wait_for_save`` and their commit / prune steps."""

    def _runtime_state(self) -> bytes:
        """Everything that is not a tensor of the model or optimizer, identical on every rank (pickled)."""
        rngs: list[bytes | None] = [None] * self.world
        dist.all_gather_object(rngs, rng_blob(), group=self.ctrl_pg)
        state = {
            "step": self.step,
            "tokens_seen": self.tokens_seen,
            "world_size": self.world,
            "dp_degree": self.world,
            "global_batch": self.cfg.global_batch,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "engine": self.cfg.engine,
            "sampler": self.sampler.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rngs,
            "loss": self.last_loss,
            "config": self.cfg.to_dict(),
        }
        return pickle.dumps(state)

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
            fs: HashingFileSystem  # DCP's writer sets its filesystem; __init__ wraps it to hash what is written

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
        return Writer(
            self.store.step_url(step), thread_count=self.cfg.checkpoint_threads, sync_files=True, overwrite=False
        )

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
                # a Future, or (newer torch, with a stager) an AsyncSaveResponse holding the upload's Future
                upload = cast("Future[Any]", getattr(resp, "upload_completion", resp))
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
