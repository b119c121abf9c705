"""Finding a local job's processes through Linux ``/proc`` (used by the local backend and its launcher).

A job's processes are found two ways, because neither alone is enough:

* by **process group**: the launcher starts in its own session (``start_new_session=True``), so it and
  every child that does not move away share ``pgid == sid == launcher pid``;
* by an **environment marker** (``GPU_PORTAL_JOB_MARKER=<workspace>``) every descendant inherits:
  ``torchrun`` starts each worker with ``start_new_session=True`` (torch/distributed/elastic/multiprocessing/
  subprocess_handler/subprocess_handler.py), so workers leave the group, and after ``torchrun`` dies they
  are re-parented away from the launcher. Only the marker still finds them.

A process that both leaves the group and clears its environment escapes; a real isolation boundary
(cgroups, containers) is the Kubernetes backend's job. Zombies are never counted as alive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MARKER_ENV = "GPU_PORTAL_JOB_MARKER"
PROC = "/proc"


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """One live (non-zombie) process: ``pid``, process group, session, and whether its environment
    carries ``LOCAL_RANK`` (set by torchrun for each worker)."""

    pid: int
    pgid: int
    sid: int
    is_rank: bool


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, pgrp, session) from /proc/<pid>/stat, or None if the process is gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # comm may contain spaces or parentheses: fields start after the last ')'
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[2]), int(fields[3])


def _environ(pid: int) -> dict[bytes, bytes] | None:
    try:
        with open(f"{PROC}/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:  # gone, or another user's process
        return None
    env: dict[bytes, bytes] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key] = value
    return env


def job_processes(marker: str, pgid: int | None = None, *, exclude: int | None = None) -> list[ProcInfo]:
    """Live processes of a job: those whose environment has ``MARKER_ENV=marker``, plus (when ``pgid`` is
    given) those in process group and session ``pgid``. ``exclude``: a pid to leave out (the caller).
    Sorted by pid. Linux only (reads /proc)."""
    want = marker.encode()
    found: list[ProcInfo] = []
    try:
        pids = [int(p) for p in os.listdir(PROC) if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == exclude:
            continue
        st = _stat(pid)
        if st is None or st[0] in ("Z", "X"):
            continue
        _state, pgrp, sid = st
        env = _environ(pid)
        marked = env is not None and env.get(MARKER_ENV.encode()) == want
        in_group = pgid is not None and pgrp == pgid and sid == pgid
        if marked or in_group:
            is_rank = env is not None and b"LOCAL_RANK" in env
            found.append(ProcInfo(pid, pgrp, sid, is_rank))
    return sorted(found, key=lambda p: p.pid)


def signal_all(procs: list[ProcInfo], sig: int) -> int:
    """Send ``sig`` to each process; return how many were signalled (gone ones are skipped)."""
    sent = 0
    for p in procs:
        try:
            os.kill(p.pid, sig)
            sent += 1
        except ProcessLookupError:
            pass
        except PermissionError:
            pass
    return sent


def start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (/proc/<pid>/stat field 22), to tell a pid from a
    later process that reused it; None if gone."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return int(data[data.rfind(b")") + 2 :].split()[19])
