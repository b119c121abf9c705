"""Checkpoint folders: layout, completeness, manifest, verification, keep-last-K (any fsspec URL).

Layout under ``checkpoint_dir``::

    step-00000120/              one folder per save, always a fresh one
        __0_0.distcp ...        DCP shards, written by every rank (DeepSpeed: its own files)
        .metadata               written last by DCP: the commit marker
        manifest.json           written by rank 0 after the commit: step, time, bytes, loss, files
                                (name -> bytes, sha256), world_size, engine
        PINNED                  optional, put there by the portal: never deleted, not counted in K
    step-00000090.corrupt-1738300000   a checkpoint that failed verification, set aside
    rolled-back-1738300000/     checkpoints newer than a rollback target, set aside

A folder is *complete* when ``.metadata`` exists (DCP) or ``manifest.json`` exists (it is only
written after the commit; DeepSpeed checkpoints have no ``.metadata``). Anything else named
``step-N`` is *partial*: reported, ignored, and deleted once a newer complete checkpoint exists or
when a save needs that folder name. Keep-last-K counts complete, unpinned folders only, so a
newer partial folder never causes an older complete one to be deleted.
"""

from __future__ import annotations

import builtins  # the store's ``list`` method shadows the builtin in its annotations
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.core import url_to_fs

STEP_RE = re.compile(r"^step-(\d{8})$")
MANIFEST = "manifest.json"
COMMIT_MARKER = ".metadata"
PIN_MARKER = "PINNED"
MANIFEST_FORMAT = "gpu-portal-checkpoint/1"


class CheckpointCorrupt(RuntimeError):
    """A complete-looking checkpoint fails verification or loading. The message names the folder."""


@dataclass(frozen=True)
class StepFolder:
    """One ``step-N`` folder: ``step``, its ``path`` (fs path), and whether it is ``complete``."""

    step: int
    path: str
    complete: bool
    pinned: bool


class CheckpointStore:
    """The checkpoint root as seen through fsspec. Only rank 0 calls the mutating methods."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.fs: fsspec.AbstractFileSystem
        self.fs, self.root = url_to_fs(url)
        self.is_local = self.fs.protocol in ("file", "local") or "file" in (self.fs.protocol or ())

    def step_path(self, step: int) -> str:
        """fs path of the folder for ``step`` (``step-%08d``)."""
        return f"{self.root.rstrip('/')}/step-{step:08d}"

    def step_url(self, step: int) -> str:
        """What to report as the checkpoint's location: a local path, or the URL form."""
        return self.step_path(step) if self.is_local else self.fs.unstrip_protocol(self.step_path(step))

    def list(self) -> list[StepFolder]:
        """All ``step-N`` folders, oldest first."""
        if not self.fs.exists(self.root):
            return []
        out = []
        for entry in self.fs.ls(self.root, detail=True):
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            m = STEP_RE.match(name)
            if not m or entry.get("type") != "directory":
                continue
            path = entry["name"].rstrip("/")
            names = {p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(path, detail=False)}
            complete = COMMIT_MARKER in names or MANIFEST in names
            out.append(StepFolder(int(m.group(1)), path, complete, PIN_MARKER in names))
        return sorted(out, key=lambda f: f.step)

    def complete(self) -> builtins.list[StepFolder]:
        """Complete folders, oldest first."""
        return [f for f in self.list() if f.complete]

    def partial(self) -> builtins.list[StepFolder]:
        """Partial (uncommitted) folders, oldest first."""
        return [f for f in self.list() if not f.complete]

    # ---- writing (rank 0) -------------------------------------------------------------------------

    def prepare(self, step: int) -> str | None:
        """Make sure ``step-N`` does not exist before a save into it; return a note if something was removed.

        A partial folder is deleted (it is garbage from an interrupted save). A complete one is set
        aside as ``step-N.replaced-<unix time>`` — a save never writes into an existing folder, because
        an old ``.metadata`` would make a half-rewritten folder look complete.
        """
        self.fs.makedirs(self.root, exist_ok=True)
        path = self.step_path(step)
        if not self.fs.exists(path):
            return None
        found = [f for f in self.list() if f.step == step]
        if found and not found[0].complete:
            self.fs.rm(path, recursive=True)
            return f"deleted partial checkpoint folder {path} before saving step {step} again"
        aside = f"{path}.replaced-{int(time.time())}"
        self.fs.mv(path, aside, recursive=True)
        return f"moved existing checkpoint {path} aside to {aside} before saving step {step} again"

    def write_manifest(self, step: int, *, loss: float | None, extra: dict[str, Any], checksum: bool) -> dict[str, Any]:
        """Write ``manifest.json`` into the (committed) folder of ``step``. Returns the manifest.

        ``checksum``: also store each file's SHA-256 (reads the checkpoint back once).
        """
        path = self.step_path(step)
        files: dict[str, dict[str, Any]] = {}
        for info in self.fs.find(path, detail=True).values():
            rel = info["name"][len(path) + 1 :]
            if rel in (MANIFEST, MANIFEST + ".tmp", PIN_MARKER):
                continue
            entry: dict[str, Any] = {"bytes": int(info["size"])}
            if checksum:
                entry["sha256"] = self._sha256(info["name"])
            files[rel] = entry
        manifest = {
            "format": MANIFEST_FORMAT,
            "step": step,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "bytes": sum(f["bytes"] for f in files.values()),
            "loss": loss,
            "files": files,
            **extra,
        }
        tmp = f"{path}/{MANIFEST}.tmp"
        with self.fs.open(tmp, "w") as fh:
            fh.write(json.dumps(manifest, indent=1, sort_keys=True))
        self.fs.mv(tmp, f"{path}/{MANIFEST}")
        return manifest

    def _sha256(self, fs_path: str) -> str:
        h = hashlib.sha256()
        with self.fs.open(fs_path, "rb") as fh:
            while chunk := fh.read(8 << 20):
                h.update(chunk)
        return h.hexdigest()

    def read_manifest(self, step: int) -> dict[str, Any] | None:
        """The manifest of ``step``, or ``None`` when the folder has none (committed but not recorded)."""
        p = f"{self.step_path(step)}/{MANIFEST}"
        if not self.fs.exists(p):
            return None
        try:
            with self.fs.open(p, "r") as fh:
                return json.loads(fh.read())
        except json.JSONDecodeError as exc:
            raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: manifest.json is not valid JSON") from exc

    def verify(self, step: int, *, checksum: bool) -> None:
        """Check every file listed in the manifest exists with its size (and SHA-256 if ``checksum``).

        Raises ``CheckpointCorrupt`` naming the checkpoint and the first bad file. A folder without a
        manifest is accepted here (DCP's own metadata is then the only check).
        """
        manifest = self.read_manifest(step)
        if manifest is None:
            return
        base = self.step_path(step)
        for rel, want in sorted(manifest.get("files", {}).items()):
            p = f"{base}/{rel}"
            if not self.fs.exists(p):
                raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: file {rel} is missing")
            size = int(self.fs.size(p))
            if size != want["bytes"]:
                raise CheckpointCorrupt(
                    f"checkpoint {self.step_url(step)}: file {rel} has {size} bytes, manifest says {want['bytes']}"
                )
            if checksum and "sha256" in want and self._sha256(p) != want["sha256"]:
                raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: file {rel} fails its SHA-256 check")

    def set_aside(self, step: int, why: str) -> str:
        """Rename a bad checkpoint to ``step-N.<why>-<unix time>`` so it is never resumed or reused."""
        path = self.step_path(step)
        aside = f"{path}.{why}-{int(time.time())}"
        self.fs.mv(path, aside, recursive=True)
        return aside

    def roll_back(self, step: int) -> builtins.list[str]:
        """Move every ``step-N`` folder with N > ``step`` into ``rolled-back-<unix time>/``. Returns the moved paths."""
        newer = [f for f in self.list() if f.step > step]
        if not newer:
            return []
        dest = f"{self.root.rstrip('/')}/rolled-back-{int(time.time())}"
        self.fs.makedirs(dest, exist_ok=True)
        moved = []
        for f in newer:
            target = f"{dest}/{f.path.rsplit('/', 1)[-1]}"
            self.fs.mv(f.path, target, recursive=True)
            moved.append(target)
        return moved

    def prune(self, keep_last: int) -> builtins.list[str]:
        """Apply keep-last-K: delete complete unpinned folders beyond the newest ``keep_last``, and
        partial folders older than the newest complete one. Returns the deleted paths."""
        folders = self.list()
        complete = [f for f in folders if f.complete and not f.pinned]
        deleted = []
        for f in complete[:-keep_last]:
            self.fs.rm(f.path, recursive=True)
            deleted.append(f.path)
        newest = max((f.step for f in folders if f.complete), default=-1)
        for f in folders:
            if not f.complete and f.step < newest:
                self.fs.rm(f.path, recursive=True)
                deleted.append(f.path)
        return deleted
