"""The one compute-backend interface (DESIGN.md §2: submit, status, request checkpoint, stop, inventory).

Two implementations: :mod:`instances.backends.local` (processes on this machine, the embedded default) and
:mod:`instances.backends.kubernetes` (Indexed Jobs on a cluster). The portal's services and Celery tasks
build a :class:`JobSpec` from a job attempt and the scheduler's placement, keep the string handle returned
by :meth:`ComputeBackend.submit`, and poll :meth:`ComputeBackend.status`. No Django here: backends are
plain objects configured from keyword options (``get_backend(name, **options)``), which the portal reads
from its settings.

Every method is safe to call twice: ``submit`` of the same ``(job_id, attempt)`` returns the first handle,
``stop`` of a stopped job does nothing.
"""

from __future__ import annotations

import abc
import signal
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from instances.reasons import reason
from instances.runtime.exitcodes import (
    EXIT_CONFIG_ERROR,
    EXIT_FINISHED,
    EXIT_PREEMPTED,
    EXIT_RANK_LOST,
    EXIT_STOPPED,
    EXIT_STORE_UNAVAILABLE,
)
from instances.scheduler import NodeView

JobState = Literal["pending", "running", "succeeded", "failed", "preempted", "stopped", "unknown"]
JOB_STATES: tuple[str, ...] = ("pending", "running", "succeeded", "failed", "preempted", "stopped", "unknown")
TERMINAL_JOB_STATES = frozenset({"succeeded", "failed", "preempted", "stopped"})
# What an interactive instance launched without a command runs (``python -m KEEPALIVE_MODULE``): it waits for
# the stop while JupyterLab and SSH serve (instances/interactive/keepalive.py).
KEEPALIVE_MODULE = "instances.interactive.keepalive"


class BackendError(Exception):
    """A backend could not do what was asked (bad spec, unreachable cluster, …)."""


class UnknownHandle(BackendError):
    """The handle does not name anything this backend knows (malformed, or its workspace is gone)."""


@dataclass(frozen=True, slots=True)
class DatasetMount:
    """A dataset's token shards made visible to the job, read-only.

    ``source``: a folder on this machine (local backend, Kubernetes hostPath) or a PersistentVolumeClaim
    name (Kubernetes, ``dataset_volume="pvc"``). ``mount_path``: where the job sees it (Kubernetes; the
    local backend links it at ``<workspace>/data/<name>`` and ignores ``mount_path``).
    """

    name: str
    source: str
    mount_path: str


@dataclass(frozen=True, slots=True)
class VolumeMount:
    """A persistent data volume mounted read-write (``instances.interactive.volumes``).

    ``source``: the volume's folder on this machine (local backend: linked at ``<workspace>/volumes/<name>``)
    or its PersistentVolumeClaim name (Kubernetes: mounted at ``mount_path``, the claim created with a
    storage request of ``size_gb`` GB if it does not exist yet, see ``instances.backends.k8s_volumes``).
    """

    name: str
    source: str
    mount_path: str
    size_gb: int


@dataclass(frozen=True, slots=True)
class JobSpec:
    """Everything a backend needs to start one attempt of a job.

    ``config_json`` (the runtime's config as JSON text, built by the portal) or ``config_path`` (a file
    holding it) is handed to ``python -m instances.runtime --config``; ``command`` replaces the runtime
    (an interactive instance runs the user's own command; an empty one keeps the instance alive for its
    JupyterLab and SSH until it is stopped: each backend runs :data:`KEEPALIVE_MODULE`). ``placement``:
    ``((node_name, gpus), …)`` from the scheduler; ``nproc_per_node``: processes per node (one per GPU, or
    per CPU slot locally).
    ``checkpoint_uri``: folder or fsspec URL the runtime writes checkpoints to. ``workspace_root``: where
    the local backend creates ``<job_id>/attempt-<n>/``. ``termination_grace_s``: seconds a process gets
    between SIGTERM and SIGKILL; must cover the final checkpoint.
    """

    job_id: str
    attempt: int
    image: str
    placement: tuple[tuple[str, int], ...]
    nproc_per_node: int
    config_json: str | None = None
    config_path: str | None = None
    command: tuple[str, ...] | list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    dataset_mounts: tuple[DatasetMount, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    checkpoint_uri: str = ""
    workspace_root: str = ""
    termination_grace_s: int = 120

    @property
    def nnodes(self) -> int:
        """Number of nodes in the placement (at least 1)."""
        return max(1, len(self.placement))

    def validate(self) -> None:
        """Raise :class:`BackendError` for a spec no backend can run."""
        if not self.job_id:
            raise BackendError("job_id is empty")
        if self.attempt < 1:
            raise BackendError(f"attempt must be ≥ 1, not {self.attempt}")
        if self.nproc_per_node < 1:
            raise BackendError(f"nproc_per_node must be ≥ 1, not {self.nproc_per_node}")
        if self.command is None and self.config_json is None and self.config_path is None:
            raise BackendError("a job runs either the runtime (config_json / config_path) or a command")
        if self.termination_grace_s < 0:
            raise BackendError("termination_grace_s must be ≥ 0")


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What a backend knows about a submitted attempt. Times are timezone-aware UTC or ``None``.

    ``reason``: a machine-readable cause when the backend knows one (``unschedulable``, ``image_pull``,
    ``oom_killed``, ``evicted``, ``node_lost``, ``deleted``; see ``instances.k8s_reasons``), with
    ``details`` (JSON-able values) for the sentence the portal shows in the user's language; "" otherwise.
    """

    state: JobState
    exit_code: int | None = None
    message: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        """True once the attempt will not change state again."""
        return self.state in TERMINAL_JOB_STATES


def _death_signal(exit_code: int) -> tuple[int | None, str]:
    """``(N, name)`` when ``exit_code`` reports a death by signal N (``-N`` as Python's ``subprocess`` reports it,
    ``128 + N`` as a shell does), else ``(None, "")``; the name is ``SIGTERM``-style, ``signal N`` when unknown."""
    signum = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 128 + 65 else None
    if signum is None:
        return None, ""
    try:
        return signum, signal.Signals(signum).name
    except ValueError:
        return signum, f"signal {signum}"


def state_for_exit_code(exit_code: int, *, stop_requested: bool = False) -> tuple[JobState, str]:
    """Map a process exit status to a job state and message (rules of ``instances/runtime/exitcodes.py``).

    ``exit_code``: the runtime's code, or a negative number ``-N`` / ``128 + N`` for death by signal N.
    ``stop_requested``: the portal asked for this attempt to stop, so a death by SIGTERM / SIGKILL is a
    stop, not a crash. Returns ``(state, message)``.
    """
    if exit_code == EXIT_FINISHED:
        return "succeeded", reason("finished")
    if exit_code == EXIT_PREEMPTED:  # the runtime's answer to SIGTERM, which is also how a stop begins
        if stop_requested:
            return "stopped", reason("stopped_checkpoint")
        return "preempted", reason("preempted_checkpoint")
    if exit_code == EXIT_STOPPED:
        return "stopped", reason("stopped_on_request")
    if exit_code in (EXIT_RANK_LOST, EXIT_STORE_UNAVAILABLE):  # not the job's fault: no crash budget, no back-off
        if stop_requested:
            return "stopped", reason("stopped_exit", exit_code=exit_code)
        if exit_code == EXIT_RANK_LOST:
            return "preempted", reason("rank_lost")
        return "preempted", reason("store_unavailable")
    if exit_code == EXIT_CONFIG_ERROR:
        return "failed", reason("config_error")
    signum, name = _death_signal(exit_code)
    if signum is not None:
        if stop_requested and signum in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT):
            return "stopped", reason("stopped_signal", signal=name)
        return "failed", reason("killed_signal", signal=name)
    if stop_requested:
        return "stopped", reason("stopped_exit", exit_code=exit_code)
    return "failed", reason("crashed", exit_code=exit_code)


def command_state_for_exit_code(exit_code: int, *, stop_requested: bool = False) -> tuple[JobState, str]:
    """Map the exit status of a user's own command (an interactive instance) to a job state and message.

    Unlike :func:`state_for_exit_code` the training runtime's codes (85 preempted, 86 stopped, …) mean nothing
    here: the command is the user's program. After a stop request every ending is a stop (``command_stopped``:
    the exit status of a program the portal ended says nothing more); otherwise 0 is ``succeeded``
    (``finished``), a death by signal (``command_killed``) or any other code (``command_exited``) ``failed``.
    ``exit_code`` as in :func:`state_for_exit_code`. Returns ``(state, message)``."""
    if stop_requested:
        return "stopped", reason("command_stopped")
    if exit_code == 0:
        return "succeeded", reason("finished")
    signum, name = _death_signal(exit_code)
    if signum is not None:
        return "failed", reason("command_killed", signal=name)
    return "failed", reason("command_exited", exit_code=exit_code)


class ComputeBackend(abc.ABC):
    """The interface every backend implements. Handles are opaque strings, stable across processes."""

    name: str = ""

    @abc.abstractmethod
    def submit(self, spec: JobSpec) -> str:
        """Start ``spec``; return its handle. Submitting the same ``(job_id, attempt)`` again returns the
        same handle and starts nothing. Raises :class:`BackendError` for an invalid spec."""

    @abc.abstractmethod
    def status(self, handle: str) -> JobStatus:
        """Current state of the attempt. Raises :class:`UnknownHandle` for a malformed handle."""

    @abc.abstractmethod
    def request_checkpoint(self, handle: str) -> int:
        """Ask the running job to write a checkpoint now. Returns how many processes / objects were
        notified (0 when nothing is running). Best effort: the runtime also polls the portal."""

    @abc.abstractmethod
    def stop(self, handle: str, grace_s: float) -> JobStatus:
        """SIGTERM (runtime: checkpoint and exit), wait up to ``grace_s`` seconds, then kill what is left.
        Returns the status after stopping. Stopping a finished attempt changes nothing."""

    @abc.abstractmethod
    def inventory(self) -> list[NodeView]:
        """Nodes this backend can run on, with free GPUs, for the scheduler."""

    def logs(self, handle: str, *, rank: int = 0, lines: int | None = 200) -> list[str] | None:
        """The last ``lines`` lines of node-rank ``rank``'s log (``None``: all the backend still has, from its
        first line), or ``None`` when that rank does not exist (or no longer does). Backends that cannot read
        logs return ``None``."""
        return None


def split_log_lines(text: str) -> list[str]:
    """The lines of a log's ``text``, split at ``\\n`` only (a ``\\r\\n`` ending loses its ``\\r``; a lone ``\\r``
    of a progress bar stays inside its line), without the empty string after a final ``\\n``: line ``n`` is
    the same line however the text was read, which offsets into a log (``instances.joblogs``) rely on."""
    found = text.split("\n")
    if found and found[-1] == "":
        found.pop()
    return [line[:-1] if line.endswith("\r") else line for line in found]


def get_backend(name: str, **options: Any) -> ComputeBackend:
    """Build the backend called ``name`` (``"local"`` or ``"kubernetes"``) with its keyword ``options``
    (see each class). Raises :class:`BackendError` for an unknown name. The Kubernetes client is imported
    only when that backend is asked for."""
    if name == "local":
        from instances.backends.local import LocalBackend

        return LocalBackend(**options)
    if name == "kubernetes":
        from instances.backends.kubernetes import KubernetesBackend

        return KubernetesBackend(**options)
    raise BackendError(f"unknown compute backend {name!r}; expected 'local' or 'kubernetes'")
