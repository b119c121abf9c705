"""Local backend: a job attempt runs as processes on this machine (the embedded default).

Layout of one attempt, ``<workspace_root>/<job_id>/attempt-<n>/``::

    job.json        the runtime's config (from JobSpec.config_json / config_path)
    data/<name>     symlink to each dataset's shard folder
    volumes/<name>  symlink to each attached persistent volume's folder (read-write, outlives the attempt)
    logs.txt        stdout + stderr of every process of the job
    backend.json    pid / pgid / start time / nproc / command: lets another process (a restarted Celery
                    worker) find, watch and stop the job
    exit_code       written atomically by the launcher when the job ends
    stop_requested  present once stop() was called (a death by signal is then a stop, not a crash)
    ranks/rank-<N>  each torchrun rank's exit code (see rank_shim)

The job is started as ``python -m instances.backends.local_launcher --workspace WS -- CMD`` in a new session
(``start_new_session=True``): the launcher is the process-group leader, waits for ``CMD`` and records its exit
code (see that module). ``CMD`` is ``python -m torch.distributed.run --standalone --nproc-per-node N -m
instances.backends.rank_shim … -m instances.runtime --config WS/job.json``, or the user's own command for an
interactive instance (none given: ``python -m instances.interactive.keepalive``, which waits for the stop while
JupyterLab and SSH serve).

Signals (checked against torch 2.13's torchrun source):

* **stop**: SIGTERM to the process group. torchrun handles SIGTERM by sending SIGTERM to its workers (which
  live in their own sessions, so a group signal alone would miss them), waiting, then SIGKILL. After
  ``grace_s`` every process still carrying the job's marker or in its group gets SIGKILL.
* **request_checkpoint**: torchrun does *not* forward SIGUSR1: by default it is not even handled, so SIGUSR1 to
  torchrun would kill it and orphan the workers; with ``--signals-to-handle SIGUSR1`` torchrun treats it as
  a death signal and stops the job. So SIGUSR1 goes straight to the workers, found as the job's processes
  whose environment has ``LOCAL_RANK`` (torchrun sets it per worker). A user's command without such
  processes gets nothing (its program is not the runtime).

Dataset folders are linked, not copied: a symlink cannot be made read-only, so read-only-ness comes from the
shard files' own permissions (bind mounts would need root). The job gets a small environment (PATH, HOME,
locale, the spec's ``env``), not the portal's, which holds secrets; PATH starts with the training Python's
folder (``training_bin``) and ``VIRTUAL_ENV`` names its virtual environment, so ``python`` in the command, a
JupyterLab terminal or kernel and an SSH session is the Python the portal trains with
(:mod:`instances.interactive.shell_env`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from instances.backends.base import (
    KEEPALIVE_MODULE,
    BackendError,
    ComputeBackend,
    JobSpec,
    JobStatus,
    UnknownHandle,
    state_for_exit_code,
)
from instances.backends.local_launcher import EXIT_CODE_FILE, RANKS_DIR, write_atomically
from instances.backends.procfs import MARKER_ENV, ProcInfo, job_processes, signal_all, start_ticks
from instances.interactive.shell_env import training_environment
from instances.reasons import reason
from instances.scheduler import NodeView

STATE_FILE = "backend.json"
STOP_FILE = "stop_requested"
LOG_FILE = "logs.txt"
CONFIG_FILE = "job.json"
HANDLE_PREFIX = "local"
PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the folder holding the `instances` package
_PASSED_ENV = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "HF_HUB_OFFLINE",
    "OMP_NUM_THREADS",
)
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")

# Popen objects of jobs started by this process, so finished launchers are reaped instead of lingering as
# zombies (a zombie is never counted as alive, but it holds a pid).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _volume_link(ws: Path, name: str, source: Path) -> None:
    """Link a volume's folder at ``<ws>/volumes/<name>``. Raises BackendError when the folder is missing."""
    if not source.is_dir():
        raise BackendError(f"volume {name!r}: {source} is not a folder")
    (ws / "volumes").mkdir(exist_ok=True)
    link = ws / "volumes" / _SAFE_NAME.sub("_", name)
    if not link.is_symlink():
        link.symlink_to(source.resolve(), target_is_directory=True)


def _reap_children() -> None:
    for pid, proc in list(_CHILDREN.items()):
        if proc.poll() is not None:
            _CHILDREN.pop(pid, None)  # two stops in threads may both see it exited


def _now() -> datetime:
    return datetime.now(UTC)


class LocalBackend(ComputeBackend):
    """Runs job attempts as local process groups.

    Options: ``workspace_root`` (folder for workspaces when a spec gives none), ``slots`` (CPU slots = the
    local node's "GPUs"; nproc is capped at it; default 2), ``node_name`` (default ``"local"``), ``gpu_type``
    (default ``"cpu-local"``), ``block`` (default ``"local"``), ``python`` (interpreter for the launcher and
    torchrun; default this one), ``training_bin`` (the folder put first on the job's PATH, so that ``python``
    in every shell of an instance is the training Python; default the folder of ``python``, not resolved: a
    virtual environment's ``bin``), ``kill_wait_s`` (how long to wait for SIGKILLed processes to vanish),
    ``runtime_module`` (the module torchrun runs; ``instances.runtime``, replaced only in tests).
    """

    name = "local"

    def __init__(
        self,
        *,
        workspace_root: str | os.PathLike[str] | None = None,
        slots: int = 2,
        node_name: str = "local",
        gpu_type: str = "cpu-local",
        block: str = "local",
        python: str = sys.executable,
        training_bin: str = "",
        kill_wait_s: float = 5.0,
        runtime_module: str = "instances.runtime",
    ) -> None:
        if slots < 1:
            raise BackendError(f"slots must be ≥ 1, not {slots}")
        self.workspace_root = Path(workspace_root) if workspace_root else None
        self.slots = slots
        self.node_name = node_name
        self.gpu_type = gpu_type
        self.block = block
        self.python = python
        exe = python if os.path.isabs(python) else shutil.which(python) or python
        self.training_bin = os.path.abspath(training_bin or os.path.dirname(os.path.abspath(exe)))
        self.kill_wait_s = kill_wait_s
        self.runtime_module = runtime_module

    # -- handles and workspaces -------------------------------------------------------------------------
    @staticmethod
    def make_handle(pgid: int, workspace: Path) -> str:
        """``local:<pgid>:<absolute workspace path>``."""
        return f"{HANDLE_PREFIX}:{pgid}:{workspace}"

    @staticmethod
    def parse_handle(handle: str) -> tuple[int, Path]:
        """(pgid, workspace) of a handle. Raises :class:`UnknownHandle` if malformed."""
        prefix, _, rest = handle.partition(":")
        pgid_s, _, ws = rest.partition(":")
        if prefix != HANDLE_PREFIX or not pgid_s.isdigit() or not ws.startswith("/"):
            raise UnknownHandle(f"not a local backend handle: {handle!r}")
        return int(pgid_s), Path(ws)

    def workspace_for(self, spec: JobSpec) -> Path:
        """``<workspace_root>/<job_id>/attempt-<n>`` (absolute). Raises BackendError without a root."""
        root = Path(spec.workspace_root) if spec.workspace_root else self.workspace_root
        if root is None:
            raise BackendError("no workspace root: set JobSpec.workspace_root or the backend's workspace_root")
        return root.resolve() / _SAFE_NAME.sub("_", spec.job_id) / f"attempt-{spec.attempt}"

    def _read_state(self, handle: str) -> tuple[int, Path, dict[str, Any]]:
        pgid, ws = self.parse_handle(handle)
        try:
            state = json.loads((ws / STATE_FILE).read_text())
        except (OSError, ValueError) as exc:
            raise UnknownHandle(f"no local job at {ws}: {exc}") from exc
        return pgid, ws, state

    def _processes(self, pgid: int, ws: Path) -> list[ProcInfo]:
        _reap_children()
        return job_processes(str(ws), pgid, exclude=os.getpid())

    # -- the interface ---------------------------------------------------------------------------------
    def command_for(self, spec: JobSpec, ws: Path, nproc: int) -> list[str]:
        """The launcher's full argv for ``spec`` in workspace ``ws`` with ``nproc`` processes (an empty
        ``spec.command``: the keep-alive, ``python -m instances.interactive.keepalive``)."""
        if spec.command is not None:
            inner = list(spec.command) or [self.python, "-m", KEEPALIVE_MODULE]
        else:
            inner = [
                self.python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                "--nproc-per-node", str(nproc), "--max-restarts", "0",
                "-m", "instances.backends.rank_shim", "--exit-dir", str(ws / RANKS_DIR),
                "-m", self.runtime_module, "--config", str(ws / CONFIG_FILE),
            ]  # fmt: skip
        return [self.python, "-m", "instances.backends.local_launcher", "--workspace", str(ws), "--", *inner]

    def _environment(self, spec: JobSpec, ws: Path, nproc: int) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
        env.update(spec.env)
        env.update(training_environment(self.training_bin, env.get("PATH")))
        pythonpath = [str(PROJECT_ROOT), *filter(None, spec.env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update(
            {
                MARKER_ENV: str(ws),
                "PYTHONPATH": os.pathsep.join(pythonpath),
                "PYTHONUNBUFFERED": "1",
                "GPU_PORTAL_JOB_ID": spec.job_id,
                "GPU_PORTAL_ATTEMPT": str(spec.attempt),
                "GPU_PORTAL_WORKSPACE": str(ws),
                "GPU_PORTAL_NPROC": str(nproc),
                "GPU_PORTAL_CHECKPOINT_URI": spec.checkpoint_uri,
                "GPU_PORTAL_VOLUMES": os.pathsep.join(str(ws / "volumes" / v.name) for v in spec.volume_mounts),
            }
        )
        return env

    def submit(self, spec: JobSpec) -> str:
        """Create the workspace and start the launcher; see the module docstring. Returns the handle.

        Idempotent per ``(job_id, attempt)``: a second call returns the first call's handle. Raises
        :class:`BackendError` for an invalid spec, a missing dataset folder or a failed start.
        """
        spec.validate()
        ws = self.workspace_for(spec)
        ws.mkdir(parents=True, exist_ok=True)
        existing = self._existing_handle(ws)
        if existing:
            return existing
        try:  # claim the workspace: two concurrent submits start one job
            os.close(os.open(ws / ".submit.lock", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            for _ in range(200):
                existing = self._existing_handle(ws)
                if existing:
                    return existing
                time.sleep(0.05)
            raise BackendError(f"another submit of {ws} is in progress or died half-way") from None

        if spec.config_json is not None:
            write_atomically(ws / CONFIG_FILE, spec.config_json)
        elif spec.config_path is not None:
            shutil.copyfile(spec.config_path, ws / CONFIG_FILE)
        data = ws / "data"
        data.mkdir(exist_ok=True)
        for mount in spec.dataset_mounts:
            src = Path(mount.source)
            if not src.is_dir():
                raise BackendError(f"dataset {mount.name!r}: {src} is not a folder")
            link = data / _SAFE_NAME.sub("_", mount.name)
            if not link.is_symlink():
                link.symlink_to(src.resolve(), target_is_directory=True)
        for volume in spec.volume_mounts:  # read-write, kept after the attempt (instances.interactive.volumes)
            _volume_link(ws, volume.name, Path(volume.source))

        nproc = min(spec.nproc_per_node, self.slots)
        argv = self.command_for(spec, ws, nproc)
        with open(ws / LOG_FILE, "ab") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=ws,
                    env=self._environment(spec, ws, nproc),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise BackendError(f"cannot start {argv[0]}: {exc}") from exc
        _CHILDREN[proc.pid] = proc
        state = {
            "pid": proc.pid,
            "pgid": proc.pid,  # session leader: pgid == sid == pid
            "start_ticks": start_ticks(proc.pid),
            "started_at": _now().isoformat(),
            "nproc": nproc,
            "command": argv,
            "job_id": spec.job_id,
            "attempt": spec.attempt,
        }
        write_atomically(ws / STATE_FILE, json.dumps(state, indent=2))
        return self.make_handle(proc.pid, ws)

    def _existing_handle(self, ws: Path) -> str | None:
        try:
            state = json.loads((ws / STATE_FILE).read_text())
        except (OSError, ValueError):
            return None
        return self.make_handle(int(state["pgid"]), ws)

    def status(self, handle: str) -> JobStatus:
        """From ``exit_code`` if written, else whether any process of the job is alive.

        A job whose processes are all gone without an exit code (launcher SIGKILLed, machine rebooted) is
        ``stopped`` if a stop was requested, else ``failed``.
        """
        pgid, ws, state = self._read_state(handle)
        started = datetime.fromisoformat(state["started_at"])
        stop_requested = (ws / STOP_FILE).exists()
        code_file = ws / EXIT_CODE_FILE
        if not code_file.exists():
            if self._processes(pgid, ws):
                return JobStatus("running", None, f"running, {state['nproc']} process(es)", started)
            if not code_file.exists():  # the launcher may have written it between the two looks
                msg = reason("processes_gone")
                return JobStatus("stopped" if stop_requested else "failed", None, msg, started)
        code = int(code_file.read_text().strip())
        finished = datetime.fromtimestamp(code_file.stat().st_mtime, UTC)
        job_state, message = state_for_exit_code(code, stop_requested=stop_requested)
        return JobStatus(job_state, code, message, started, finished)

    def request_checkpoint(self, handle: str) -> int:
        """SIGUSR1 to each torchrun worker of the job (processes with ``LOCAL_RANK``); returns how many."""
        pgid, ws, _ = self._read_state(handle)
        ranks = [p for p in self._processes(pgid, ws) if p.is_rank and p.pid != pgid]
        return signal_all(ranks, signal.SIGUSR1)

    def stop(self, handle: str, grace_s: float) -> JobStatus:
        """SIGTERM the group, wait up to ``grace_s`` s for every process to end, then SIGKILL the rest
        (group members and marked processes alike) until none is left. Returns the final status."""
        pgid, ws, _ = self._read_state(handle)
        if (ws / EXIT_CODE_FILE).exists() and not self._processes(pgid, ws):
            return self.status(handle)
        (ws / STOP_FILE).touch()
        procs = self._processes(pgid, ws)
        if any(p.pgid == pgid for p in procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        else:
            signal_all(procs, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while procs and time.monotonic() < deadline:
            time.sleep(0.05)
            procs = self._processes(pgid, ws)
        deadline = time.monotonic() + self.kill_wait_s
        while procs and time.monotonic() < deadline:
            signal_all(procs, signal.SIGKILL)
            time.sleep(0.02)
            procs = self._processes(pgid, ws)
        if procs:
            raise BackendError(f"processes {[p.pid for p in procs]} of {ws} survived SIGKILL")
        return self.status(handle)

    def running_handles(self) -> list[str]:
        """Handles of the attempts under ``workspace_root`` that still have live processes."""
        if self.workspace_root is None or not self.workspace_root.is_dir():
            return []
        handles = []
        for state_file in self.workspace_root.glob(f"*/attempt-*/{STATE_FILE}"):
            handle = self._existing_handle(state_file.parent.resolve())
            if handle and self.status(handle).state == "running":
                handles.append(handle)
        return handles

    def inventory(self) -> list[NodeView]:
        """One node of ``slots`` CPU slots; free = slots minus the processes of running jobs (when the
        backend has a ``workspace_root`` to look in)."""
        used = 0
        for handle in self.running_handles():
            _, _, state = self._read_state(handle)
            used += int(state["nproc"])
        free = max(0, self.slots - used)
        return [NodeView(self.node_name, self.gpu_type, self.slots, free, self.block, "ready")]
