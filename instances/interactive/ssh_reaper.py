"""Ends the open ``sshd`` sessions of keys no longer authorized, inside an instance's container on Kubernetes
(standard library only; ``python -m instances.interactive.ssh_reaper --keys FILE``, started beside ``sshd`` by
:mod:`instances.interactive.ssh_k8s`).

OpenSSH reads ``authorized_keys`` at login only: a member removed while logged in keeps their shell. The portal
rewrites the pod's Secret (the kubelet refreshes the mounted file within its sync period, about a minute), and
this loop, every :data:`EVERY_S` seconds, compares each session's key with the file: ``sshd`` runs with
``ExposeAuthInfo yes`` (sshd_config(5)), so every session's processes carry ``SSH_USER_AUTH``, a file naming the
key the session logged in with (``publickey <algorithm> <base64>``). A session whose key left the file is ended:
SIGTERM to its ``sshd`` process (the shell's parent: the connection closes) and SIGHUP then SIGKILL to the
shell's process group. The local backend's server does the same by itself (:mod:`instances.interactive.ssh_server`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterable
from pathlib import Path

EVERY_S = 5.0
GRACE_S = 1.0
AUTH_ENV = b"SSH_USER_AUTH="


def key_blobs(text: str) -> set[str]:
    """The base64 key blobs of an ``authorized_keys`` text or an ``SSH_USER_AUTH`` file (``publickey`` lines),
    the second field of each line that has one."""
    found = set()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and not line.startswith("#"):
            found.add(fields[-1] if fields[0] == "publickey" else fields[1])
    return found


def sessions(pids: Iterable[int] | None = None, proc: Path = Path("/proc")) -> dict[int, str]:
    """``{pid: SSH_USER_AUTH path}`` of the processes that carry one (``pids``: only these)."""
    found = {}
    candidates = pids if pids is not None else (int(p.name) for p in proc.iterdir() if p.name.isdigit())
    for pid in candidates:
        try:
            environ = (proc / str(pid) / "environ").read_bytes()
        except OSError:
            continue
        for entry in environ.split(b"\0"):
            if entry.startswith(AUTH_ENV):
                found[pid] = entry[len(AUTH_ENV) :].decode(errors="replace")
    return found


def _parent(pid: int, proc: Path) -> int | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def reap_once(keys_file: Path, *, pids: Iterable[int] | None = None, proc: Path = Path("/proc")) -> list[int]:
    """End the sessions whose key is not in ``keys_file`` (a missing file authorizes nobody); returns the
    session processes signalled."""
    try:
        allowed = key_blobs(keys_file.read_text())
    except OSError:
        allowed = set()
    ended = []
    for pid, auth in sessions(pids, proc).items():
        try:
            used = key_blobs(Path(auth).read_text())
        except OSError:
            continue  # the session is ending (sshd removes the file)
        if used and not used & allowed:
            ended.append(pid)
            parent = _parent(pid, proc)
            if parent and parent > 1:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(parent, signal.SIGTERM)  # its sshd: the connection closes
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGHUP)
    if ended:
        time.sleep(GRACE_S)
        for pid in ended:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        print(f"ssh_reaper: ended {len(ended)} session process(es) of keys no longer authorized", file=sys.stderr)
    return ended


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instances.interactive.ssh_reaper")
    parser.add_argument("--keys", required=True, type=Path)
    parser.add_argument("--every", type=float, default=EVERY_S)
    args = parser.parse_args(argv)
    while True:
        reap_once(args.keys)
        time.sleep(args.every)


if __name__ == "__main__":
    sys.exit(main())
