"""Process-group leader of a local job: ``python -m instances.backends.local_launcher --workspace WS -- CMD…``.

Started by :class:`instances.backends.local.LocalBackend` in its own session. It

1. makes itself a *child subreaper* (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``), so descendants orphaned by a
   dying ``torchrun`` are re-parented to it and reaped here;
2. survives the signals the backend sends to the whole group (SIGTERM, SIGINT, SIGHUP, SIGUSR1 get a no-op
   handler; handlers, unlike ignored signals, are reset in the child at exec) and waits for ``CMD``;
3. when ``CMD`` has exited, terminates what is left of the job (SIGTERM, a short grace, SIGKILL);
4. writes the job's exit code to ``WS/exit_code`` atomically (temp file + rename), so the code survives the
   death of whoever started the job, and exits with it.

The exit code is ``CMD``'s, except when ``CMD`` is torchrun and failed: torchrun then exits 1 whatever its
workers returned, so the per-rank codes written by :mod:`instances.backends.rank_shim` into ``WS/ranks/``
are combined by :func:`combine_exit_codes`. A rank that started (``started-<N>``) but wrote no code died by a
signal it could not handle (SIGKILL, OOM killer): it counts as ``EXIT_RANK_LOST`` — a node failure, which the
portal resumes like a preemption — unless another rank crashed on its own (a crash still wins).

In a Kubernetes pod the same launcher is the container's first process (``--forward-signals``: the kubelet
signals only that process, so SIGTERM / SIGINT are passed on to ``CMD``, and torchrun passes them to its
workers) and ``--termination-log /dev/termination-log`` writes ``{"exit_code": N, "ranks": [...]}`` there:
the container's termination message, which the backend reads beside the container's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from instances.backends.procfs import MARKER_ENV, job_processes, signal_all
from instances.interactive.sidecar import sidecars_start
from instances.runtime.exitcodes import (
    EXIT_CONFIG_ERROR,
    EXIT_FINISHED,
    EXIT_PREEMPTED,
    EXIT_RANK_LOST,
    EXIT_STOPPED,
    EXIT_STORE_UNAVAILABLE,
)

EXIT_CODE_FILE = "exit_code"
RANKS_DIR = "ranks"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
LEFTOVER_GRACE_S = 5.0


_ORDER = {
    EXIT_STOPPED: 4,
    EXIT_RANK_LOST: 3,
    EXIT_STORE_UNAVAILABLE: 2,
    EXIT_PREEMPTED: 1,
    EXIT_FINISHED: 0,
}


def combine_exit_codes(rank_codes: list[int]) -> int:
    """One job exit code from its ranks' codes: the most telling wins. A config error beats a crash (it
    must not be retried); a crash beats everything else (a crashing rank makes torchrun SIGTERM the others,
    which then exit ``EXIT_PREEMPTED``, or ``EXIT_RANK_LOST`` when their collectives break first); then a
    stop, a lost rank, an unavailable checkpoint store, a preemption; all finished is finished."""

    def rank(code: int) -> int:
        if code == EXIT_CONFIG_ERROR:
            return 6
        return _ORDER.get(code, 5)

    return max(rank_codes, key=rank) if rank_codes else EXIT_FINISHED


def read_rank_codes(ranks_dir: Path) -> list[int]:
    """Exit codes of the ranks (files ``rank-<N>`` written by the shims), in rank order, plus
    ``EXIT_RANK_LOST`` for each rank that started (``started-<N>``) without writing one. Unreadable files
    are skipped."""
    codes: list[int] = []
    if not ranks_dir.is_dir():
        return codes
    done: set[str] = set()
    for path in sorted(ranks_dir.glob("rank-*")):
        try:
            codes.append(int(path.read_text().strip()))
            done.add(path.name.removeprefix("rank-"))
        except (OSError, ValueError):
            continue
    for path in sorted(ranks_dir.glob("started-*")):
        if path.name.removeprefix("started-") not in done:
            codes.append(EXIT_RANK_LOST)
    return codes


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _become_subreaper() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: orphans go to init instead; the marker still finds them
        pass


def _reap_nohang() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _kill_leftovers(marker: str, grace_s: float) -> None:
    me = os.getpid()
    left = job_processes(marker, me, exclude=me)
    if not left:
        return
    signal_all(left, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap_nohang()
        left = job_processes(marker, me, exclude=me)
        if not left:
            return
        time.sleep(0.05)
    for _ in range(100):
        left = job_processes(marker, me, exclude=me)
        if not left:
            break
        signal_all(left, signal.SIGKILL)
        time.sleep(0.02)
        _reap_nohang()


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; returns (and exits with) the job's exit code."""
    parser = argparse.ArgumentParser(prog="python -m instances.backends.local_launcher")
    parser.add_argument("--workspace", required=True, type=Path)
    parser.add_argument("--leftover-grace-s", type=float, default=LEFTOVER_GRACE_S)
    parser.add_argument("--termination-log", type=Path, default=None)
    parser.add_argument("--forward-signals", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    workspace: Path = args.workspace
    marker = os.environ.get(MARKER_ENV, str(workspace))

    workspace.mkdir(parents=True, exist_ok=True)
    _become_subreaper()
    started: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, frame: object) -> None:
        if args.forward_signals and started and signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(OSError):
                started[0].send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(sig, on_signal)

    sidecars_start(workspace)  # JupyterLab, the SSH server: children in the job's group, when the portal asked
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"local_launcher: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        write_atomically(workspace / EXIT_CODE_FILE, "127\n")
        _termination_log(args.termination_log, 127, [])
        return 127
    started.append(child)
    status = 0
    while True:  # reap re-parented orphans too, until the direct child is done
        try:
            pid, wstatus = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == child.pid:
            status = os.waitstatus_to_exitcode(wstatus)
            break
    child.returncode = status  # reaped by hand above; keep Popen from waiting again

    _kill_leftovers(marker, args.leftover_grace_s)
    _reap_nohang()  # children that died during the sweep (the Jupyter server) must not outlive us as zombies
    code = status
    ranks = read_rank_codes(workspace / RANKS_DIR)
    if status != 0 and ranks:
        code = combine_exit_codes(ranks)
    write_atomically(workspace / EXIT_CODE_FILE, f"{code}\n")
    _termination_log(args.termination_log, code, ranks)
    return code


def _termination_log(path: Path | None, code: int, ranks: list[int]) -> None:
    """Write ``{"exit_code", "ranks"}`` as the container's termination message (Kubernetes reads at most
    4096 bytes of it: the rank list is cut to fit)."""
    if path is None:
        return
    text = json.dumps({"exit_code": code, "ranks": ranks[:256]})
    try:
        path.write_text(text[:4096])
    except OSError as exc:
        print(f"local_launcher: cannot write {path}: {exc}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    _code = main()
    sys.exit(128 - _code if _code < 0 else min(_code, 255))  # death by signal N -> 128 + N, as shells do
