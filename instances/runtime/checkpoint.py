"""Checkpoint folders: layout, completeness, manifest, verification, keep-last-K (any fsspec URL).

Layout under ``checkpoint_dir``::

    step-00000120/              one folder per save, always a fresh one
        __0_0.distcp ...        DCP shards, written by every rank (DeepSpeed: its own files)
        manifest.json           step, time, bytes, loss, files (name -> bytes, sha256), world_size, engine;
                                DCP saves: written by rank 0 *before* the commit marker, ``"commit": ".metadata"``
        .metadata               written last by DCP: the commit marker (it also carries the file hashes)
        PINNED                  optional, put there by the portal: never deleted, not counted in K
    step-00000090.corrupt-1738300000   a damaged checkpoint (hash mismatch, truncated, missing shard), set aside
    rolled-back-1738300000/     checkpoints newer than a rollback target (or all, on a fresh start), set aside

A DCP folder is *complete* when ``.metadata`` exists. The SHA-256 of every shard is computed while the
shard is written (``HashingFileSystem``, in DCP's writer threads, so it is parallel and costs no read-back),
gathered by rank 0 and written into ``manifest.json`` and into ``.metadata`` itself before ``.metadata`` is
renamed into place: every complete checkpoint is verifiable. A folder whose manifest is lost is verified
against the hashes in ``.metadata`` and its manifest rebuilt; an older folder with neither is reported
*unverifiable* (DCP's own checks then apply). DeepSpeed checkpoints have no ``.metadata``: their manifest,
written after the save, is the commit marker. Anything else named ``step-N`` is *partial*: reported,
ignored, and deleted once a newer complete checkpoint exists or when a save needs that folder name.
Keep-last-K counts complete, unpinned folders only, so a newer partial folder never causes an older complete
one to be deleted.

Load failures are told apart (``CheckpointCorrupt`` = damage to this checkpoint, set it aside;
``CheckpointStoreError`` = the store failed to answer, retry later, touch nothing).
"""

from __future__ import annotations

import builtins  # the store's ``list`` method shadows the builtin in its annotations
import contextlib
import errno
import hashlib
import io
import json
import os
import pickle
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.core import url_to_fs

STEP_RE = re.compile(r"^step-(\d{8})$")
MANIFEST = "manifest.json"
COMMIT_MARKER = ".metadata"
PIN_MARKER = "PINNED"
MANIFEST_FORMAT = "gpu-portal-checkpoint/1"
SIDECAR_PREFIX = ".sha256-rank"  # per-rank file hashes, gathered into the manifest before the commit
METADATA_HASHES_ATTR = "gpu_portal_files"  # attribute of DCP's Metadata carrying the manifest's file table
HASH_THREADS = 8  # parallel readers when verifying

# errno values that mean the store (disk, NFS, object store gateway) failed to answer, not that data is bad
TRANSIENT_ERRNOS = frozenset(
    {
        errno.EIO,
        errno.EAGAIN,
        errno.ETIMEDOUT,
        errno.ECONNRESET,
        errno.ECONNREFUSED,
        errno.ECONNABORTED,
        errno.ENETUNREACH,
        errno.EHOSTUNREACH,
        errno.ENETDOWN,
        errno.ESTALE,
        errno.EBUSY,
        errno.EINTR,
    }
)


class CheckpointCorrupt(RuntimeError):
    """A complete-looking checkpoint is damaged (hash mismatch, truncated or unreadable file, missing
    shard). The message names the folder and the file. Such a checkpoint is set aside."""


class CheckpointStoreError(RuntimeError):
    """The checkpoint store failed to answer (a transient I/O error). Nothing is set aside; retried."""


def is_transient_io_error(exc: BaseException) -> bool:
    """True for I/O errors that say the store did not answer (timeouts, resets, EIO, connection errors),
    False for those that describe the data (missing file, permission, not a directory)."""
    if isinstance(exc, CheckpointStoreError | TimeoutError | ConnectionError):
        return True
    if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError | PermissionError):
        return False
    return isinstance(exc, OSError) and exc.errno in TRANSIENT_ERRNOS


def sha256_file(fs: Any, path: str) -> str:
    """SHA-256 (hex) of one file read through fsspec ``fs`` in 8 MiB chunks (hashlib releases the GIL)."""
    h = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        while chunk := fh.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


class _HashingStream(io.RawIOBase):
    """A write-only stream that records the size and SHA-256 of what passes through it into ``owner``.

    Local files (``local_path`` set) are hashed by reading the file back from the page cache in a helper
    thread that starts when DCP asks for ``fileno()`` to fsync it, so hashing runs while the disk flushes
    instead of before; close() waits for it. Other streams (fsspec) are hashed inline as they are written.
    """

    def __init__(self, raw: Any, name: str, owner: HashingFileSystem, local_path: str | None) -> None:
        super().__init__()
        self.raw, self.name_, self.owner, self.local_path = raw, name, owner, local_path
        self.h = hashlib.sha256() if owner.digest and local_path is None else None
        self.n = 0
        self._hasher: threading.Thread | None = None
        self._digest: str | None = None
        self._error: BaseException | None = None

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        n = self.raw.write(b)
        view = memoryview(b).cast("B")
        if self.h is not None:
            self.h.update(view if n is None or n == len(view) else view[:n])
        self.n += len(view) if n is None else n
        return len(view) if n is None else n

    def tell(self) -> int:
        return int(self.raw.tell())

    def _start_hasher(self) -> None:
        if self._hasher is not None or not self.owner.digest or self.local_path is None:
            return
        self.raw.flush()  # everything written reaches the OS (and the fsync that follows) first
        path = self.local_path

        def run() -> None:
            try:
                with open(path, "rb") as fh:
                    self._digest = hashlib.file_digest(fh, "sha256").hexdigest()  # readinto, no copies
            except BaseException as exc:  # re-raised by close() in the writer thread
                self._error = exc

        self._hasher = threading.Thread(target=run, name="ckpt-hash", daemon=True)
        self._hasher.start()

    def fileno(self) -> int:
        self._start_hasher()  # DCP fsyncs next: hash from the page cache meanwhile
        return int(self.raw.fileno())

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        if not self.closed:
            self.raw.flush()
            digest: str | None = None
            if self.h is not None:
                digest = self.h.hexdigest()
            elif self.owner.digest and self.local_path is not None:
                self._start_hasher()
                assert self._hasher is not None
                self._hasher.join()
                if self._error is not None:
                    raise self._error
                digest = self._digest
            self.owner.record(self.name_, self.n, digest)
        super().close()


class HashingFileSystem:
    """Wraps a DCP ``FileSystem`` (local or fsspec): every file it creates for writing is hashed as it is
    written, in the writing thread. ``hashes``: relative name -> ``{"bytes", "sha256"}`` (sizes only when
    ``digest`` is false)."""

    def __init__(self, inner: Any, *, digest: bool = True) -> None:
        self.inner = inner
        self.digest = digest
        self.hashes: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def record(self, name: str, size: int, digest: str | None) -> None:
        with self._lock:
            self.hashes[name] = {"bytes": size, "sha256": digest} if digest else {"bytes": size}

    @contextlib.contextmanager
    def create_stream(self, path: Any, mode: str) -> Iterator[Any]:
        with self.inner.create_stream(path, mode) as stream:
            name = os.fspath(path).replace("\\", "/").rsplit("/", 1)[-1]
            if "w" not in mode or name.startswith("."):
                yield stream
                return
            local = os.fspath(path) if isinstance(path, os.PathLike) or os.path.isabs(str(path)) else None
            wrapped = _HashingStream(stream, name, self, local if local and os.path.exists(local) else None)
            try:
                yield wrapped
            finally:
                wrapped.close()


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
            complete = COMMIT_MARKER in names or (MANIFEST in names and self._manifest_is_commit(path))
            out.append(StepFolder(int(m.group(1)), path, complete, PIN_MARKER in names))
        return sorted(out, key=lambda f: f.step)

    def _manifest_is_commit(self, path: str) -> bool:
        """A manifest commits its folder unless it names another commit marker (DCP: ``.metadata``)."""
        try:
            with self.fs.open(f"{path}/{MANIFEST}", "r") as fh:
                return not json.loads(fh.read()).get("commit")
        except (OSError, ValueError):
            return False

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

    def build_manifest(
        self, step: int, files: dict[str, dict[str, Any]], *, loss: float | None, extra: dict[str, Any]
    ) -> dict[str, Any]:
        """The manifest dict for ``step`` from a file table (name -> ``{"bytes", "sha256"?}``)."""
        return {
            "format": MANIFEST_FORMAT,
            "step": step,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "bytes": sum(f["bytes"] for f in files.values()),
            "loss": loss,
            "files": dict(sorted(files.items())),
            **extra,
        }

    def put_manifest(self, step: int, manifest: dict[str, Any]) -> None:
        """Write ``manifest.json`` of ``step`` atomically (temp name, then rename)."""
        path = self.step_path(step)
        tmp = f"{path}/{MANIFEST}.tmp"
        with self.fs.open(tmp, "w") as fh:
            fh.write(json.dumps(manifest, indent=1, sort_keys=True))
        self.fs.mv(tmp, f"{path}/{MANIFEST}")

    def write_manifest(self, step: int, *, loss: float | None, extra: dict[str, Any], checksum: bool) -> dict[str, Any]:
        """Write ``manifest.json`` into the (saved) folder of ``step`` by reading its files back (DeepSpeed
        saves; DCP saves get their manifest from ``HashingFileSystem`` without a read-back). Returns it.

        ``checksum``: also store each file's SHA-256 (files hashed in parallel).
        """
        path = self.step_path(step)
        infos = {
            info["name"][len(path) + 1 :]: info
            for info in self.fs.find(path, detail=True).values()
            if info["name"][len(path) + 1 :] not in (MANIFEST, MANIFEST + ".tmp", PIN_MARKER)
        }
        files: dict[str, dict[str, Any]] = {rel: {"bytes": int(info["size"])} for rel, info in infos.items()}
        if checksum:
            for rel, digest in zip(infos, self._hash_many([i["name"] for i in infos.values()]), strict=True):
                files[rel]["sha256"] = digest
        manifest = self.build_manifest(step, files, loss=loss, extra=extra)
        self.put_manifest(step, manifest)
        return manifest

    def _hash_many(self, paths: builtins.list[str]) -> builtins.list[str]:
        if len(paths) <= 1:
            return [sha256_file(self.fs, p) for p in paths]
        with ThreadPoolExecutor(max_workers=min(HASH_THREADS, len(paths)), thread_name_prefix="ckpt-hash") as pool:
            return list(pool.map(lambda p: sha256_file(self.fs, p), paths))

    def _sha256(self, fs_path: str) -> str:
        return sha256_file(self.fs, fs_path)

    def read_manifest(self, step: int) -> dict[str, Any] | None:
        """The manifest of ``step``, or ``None`` when the folder has none. Raises ``CheckpointCorrupt`` for
        a manifest that is not a JSON object with a ``files`` table."""
        p = f"{self.step_path(step)}/{MANIFEST}"
        if not self.fs.exists(p):
            return None
        try:
            with self.fs.open(p, "r") as fh:
                manifest = json.loads(fh.read())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: manifest.json is not valid JSON") from exc
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: manifest.json has no file table")
        return manifest

    def read_dcp_metadata(self, step: int) -> Any | None:
        """DCP's ``Metadata`` object from ``.metadata`` (``None`` when the folder has none). Raises
        ``CheckpointCorrupt`` when it cannot be unpickled (truncated or overwritten)."""
        p = f"{self.step_path(step)}/{COMMIT_MARKER}"
        if not self.fs.exists(p):
            return None
        with self.fs.open(p, "rb") as fh:
            raw = fh.read()
        try:
            return pickle.loads(raw)  # noqa: S301 - DCP's own format, as DCP itself reads it
        except Exception as exc:
            raise CheckpointCorrupt(
                f"checkpoint {self.step_url(step)}: {COMMIT_MARKER} cannot be read ({type(exc).__name__}: {exc})"
            ) from exc

    def verify(self, step: int, *, checksum: bool) -> builtins.list[str]:
        """Check the files of ``step`` against its manifest: each exists with its size, and (``checksum``)
        its SHA-256, hashed in parallel. Returns notes worth a ``warning`` event (manifest rebuilt from
        ``.metadata``; checkpoint unverifiable; extra files).

        A folder without ``manifest.json`` is checked against the file table DCP's ``.metadata`` carries
        (and the manifest rebuilt from it); an older folder without either is checked for the files and
        byte ranges ``.metadata`` names and reported unverifiable. Raises ``CheckpointCorrupt`` naming
        the checkpoint and the first bad file; ``CheckpointStoreError`` when the store fails to answer.
        """
        try:
            return self._verify(step, checksum=checksum)
        except CheckpointCorrupt:
            raise
        except Exception as exc:
            if is_transient_io_error(exc):
                raise CheckpointStoreError(
                    f"checkpoint {self.step_url(step)}: store error while verifying: {type(exc).__name__}: {exc}"
                ) from exc
            if isinstance(exc, OSError):
                raise CheckpointCorrupt(
                    f"checkpoint {self.step_url(step)}: unreadable ({type(exc).__name__}: {exc})"
                ) from exc
            raise

    def _verify(self, step: int, *, checksum: bool) -> builtins.list[str]:
        url = self.step_url(step)
        notes: builtins.list[str] = []
        manifest = self.read_manifest(step)
        meta = self.read_dcp_metadata(step)
        if manifest is None:
            files = getattr(meta, METADATA_HASHES_ATTR, None) if meta is not None else None
            if files:
                extra = getattr(meta, METADATA_HASHES_ATTR + "_extra", None) or {}
                manifest = self.build_manifest(step, files, loss=extra.get("loss"), extra=extra.get("extra", {}))
                manifest["commit"] = COMMIT_MARKER
                manifest["rebuilt"] = True
                notes.append(f"checkpoint {url}: manifest.json was missing; rebuilt from the hashes in {COMMIT_MARKER}")
            elif meta is not None:
                self._check_storage_ranges(step, meta)
                notes.append(
                    f"checkpoint {url} is unverifiable: no manifest.json and no file hashes in {COMMIT_MARKER} "
                    "(written by an older runtime); only its file list and sizes were checked"
                )
                return notes
            else:
                return notes  # DeepSpeed folder committed by its manifest: cannot be here without one
        base = self.step_path(step)
        listed = sorted(manifest["files"].items())
        present = {
            info["name"][len(base) + 1 :]: int(info["size"]) for info in self.fs.find(base, detail=True).values()
        }
        for rel, want in listed:
            if rel not in present:
                raise CheckpointCorrupt(f"checkpoint {url}: file {rel} is missing")
            if present[rel] != want["bytes"]:
                raise CheckpointCorrupt(
                    f"checkpoint {url}: file {rel} has {present[rel]} bytes, manifest says {want['bytes']}"
                )
        if meta is not None:
            self._check_storage_ranges(step, meta)
        if checksum:
            hashed = [(rel, want) for rel, want in listed if "sha256" in want]
            digests = self._hash_many([f"{base}/{rel}" for rel, _ in hashed])
            for (rel, want), got in zip(hashed, digests, strict=True):
                if got != want["sha256"]:
                    raise CheckpointCorrupt(f"checkpoint {url}: file {rel} fails its SHA-256 check")
        ignored = {MANIFEST, MANIFEST + ".tmp", PIN_MARKER, COMMIT_MARKER}
        extra_files = sorted(r for r in present if r not in manifest["files"] and r not in ignored)
        if extra_files:
            notes.append(f"checkpoint {url}: files not in its manifest (ignored): {', '.join(extra_files)}")
        if manifest.get("rebuilt"):
            manifest.pop("rebuilt")
            self.put_manifest(step, manifest)
        return notes

    def _check_storage_ranges(self, step: int, meta: Any) -> None:
        """Every file DCP's ``.metadata`` points into exists and is long enough for its byte ranges."""
        base = self.step_path(step)
        need: dict[str, int] = {}
        for info in (getattr(meta, "storage_data", None) or {}).values():
            rel = getattr(info, "relative_path", None)
            if rel is not None:
                need[rel] = max(need.get(rel, 0), int(info.offset) + int(info.length))
        for rel, size in sorted(need.items()):
            p = f"{base}/{rel}"
            if not self.fs.exists(p):
                raise CheckpointCorrupt(f"checkpoint {self.step_url(step)}: shard {rel} is missing")
            have = int(self.fs.size(p))
            if have < size:
                raise CheckpointCorrupt(
                    f"checkpoint {self.step_url(step)}: shard {rel} is truncated ({have} bytes, needs {size})"
                )

    def set_aside(self, step: int, why: str) -> str:
        """Rename a bad checkpoint to ``step-N.<why>-<unix time>`` so it is never resumed or reused."""
        path = self.step_path(step)
        aside = f"{path}.{why}-{int(time.time())}"
        self.fs.mv(path, aside, recursive=True)
        return aside

    def roll_back(self, step: int, *, label: str = "rolled-back") -> builtins.list[str]:
        """Move every ``step-N`` folder with N > ``step`` into ``<label>-<unix time>/`` (``.1``, ``.2`` … appended
        when that folder exists: a rollback repeated within the second) (``step=-1``: all of them, for a fresh
        start). Returns the moved paths."""
        newer = [f for f in self.list() if f.step > step]
        if not newer:
            return []
        dest = base = f"{self.root.rstrip('/')}/{label}-{int(time.time())}"
        n = 1
        while self.fs.exists(dest):  # two rollbacks within one second: never merge their folders
            dest, n = f"{base}.{n}", n + 1
        self.fs.makedirs(dest, exist_ok=True)
        moved = []
        for f in newer:
            target = f"{dest}/{f.path.rsplit('/', 1)[-1]}"
            self.fs.mv(f.path, target, recursive=True)
            moved.append(target)
        return moved

    def prune(self, keep_last: int) -> builtins.list[StepFolder]:
        """Apply keep-last-K: delete complete unpinned folders beyond the newest ``keep_last``, and
        partial folders older than the newest complete one. Returns the deleted folders (``complete``
        tells a pruned checkpoint from removed garbage)."""
        folders = self.list()
        complete = [f for f in folders if f.complete and not f.pinned]
        deleted = []
        for f in complete[:-keep_last]:
            self.fs.rm(f.path, recursive=True)
            deleted.append(f)
        newest = max((f.step for f in folders if f.complete), default=-1)
        for f in folders:
            if not f.complete and f.step < newest:
                self.fs.rm(f.path, recursive=True)
                deleted.append(f)
        return deleted
