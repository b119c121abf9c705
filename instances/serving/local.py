"""Local deployments: the model server as a process of this machine, in its own session (stopping signals
the whole process group, so nothing is orphaned)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from instances.serving.base import PROJECT_ROOT, SERVER_MODULE
from instances.serving.client import healthy

# Popen objects of servers started by this process, so stopped ones are reaped rather than left as zombies.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class LocalDeployments:
    """Model servers as local processes, one per deployment name, under ``root/<name>/``.

    A deployment dict (JSON-ready, stored by the caller) holds ``backend`` ("local"), ``name``, ``served_model``
    (the model's id in requests: the name), ``pid`` (= process group id: the server leads its own session),
    ``port``, ``url``, ``model_dir``, ``log`` and ``started_at`` (unix seconds). ``max_batch`` and
    ``min_step_ms`` go to the server (``python -m instances.serving.server serve --help``). A pid is only
    trusted while ``/proc/<pid>/cmdline`` still names this module and the deployment's model folder, so a
    reused pid is never signalled.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        python: str = sys.executable,
        host: str = "127.0.0.1",
        threads: int = 1,
        max_batch: int = 32,
        min_step_ms: float = 0.0,
    ) -> None:
        self.root = Path(root)
        self.python = python
        self.host = host
        self.threads = threads
        self.max_batch = max_batch
        self.min_step_ms = min_step_ms

    def alive(self, deployment: dict[str, Any]) -> bool:
        """Whether the deployment's server process still runs (a zombie counts as gone)."""
        pid = int(deployment.get("pid") or 0)
        if pid <= 0:
            return False
        proc = _CHILDREN.get(pid)
        if proc is not None and proc.poll() is not None:
            _CHILDREN.pop(pid, None)
            return False
        cmd = _cmdline(pid)
        if SERVER_MODULE not in cmd or str(deployment.get("model_dir")) not in cmd:
            return False
        try:
            status = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return status != "Z"

    def start(
        self,
        *,
        name: str,
        model_dir: str | os.PathLike[str],
        deployment: dict[str, Any] | None = None,
        ready_timeout_s: float = 120.0,
    ) -> dict[str, Any]:
        """Start (or find) the server of ``name`` for ``model_dir`` and wait until it answers ``/health``.

        Idempotent: a ``deployment`` whose process is alive and healthy is returned unchanged. Raises
        ``RuntimeError`` (with the end of the server's log) when the process exits or is not ready within
        ``ready_timeout_s``; the process is stopped first.
        """
        if deployment and self.alive(deployment) and healthy(deployment):
            return deployment
        if deployment and self.alive(deployment):
            self.stop(deployment)
        ws = self.root / name
        ws.mkdir(parents=True, exist_ok=True)
        ready, log = ws / "ready.json", ws / "server.log"
        ready.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")}
        env.update(
            {
                "PYTHONPATH": str(PROJECT_ROOT),
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                "TRANSFORMERS_VERBOSITY": "error",
                "OMP_NUM_THREADS": str(self.threads),
                "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1",
            }
        )
        cmd = [
            self.python,
            "-m",
            SERVER_MODULE,
            "serve",
            "--model-dir",
            str(Path(model_dir).resolve()),
            "--host",
            self.host,
            "--port",
            "0",
            "--ready-file",
            str(ready),
            "--served-model-name",
            name,
            "--max-batch",
            str(self.max_batch),
            "--min-step-ms",
            str(self.min_step_ms),
        ]
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                cmd,
                cwd=PROJECT_ROOT,
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _CHILDREN[proc.pid] = proc
        dep = {
            "backend": "local",
            "name": name,
            "served_model": name,
            "pid": proc.pid,
            "port": None,
            "url": "",
            "model_dir": str(Path(model_dir).resolve()),
            "log": str(log),
            "started_at": int(time.time()),
        }
        deadline = time.monotonic() + ready_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the model server exited with code {proc.returncode}: {self._tail(log)}")
            if ready.is_file():
                port = int(json.loads(ready.read_text())["port"])
                dep.update(port=port, url=f"http://{self.host}:{port}")
                if healthy(dep):
                    return dep
            if time.monotonic() > deadline:
                self.stop(dep)
                raise RuntimeError(f"the model server was not ready within {ready_timeout_s:g} s: {self._tail(log)}")
            time.sleep(0.1)

    def stop(self, deployment: dict[str, Any], grace_s: float = 10.0) -> bool:
        """SIGTERM the server's process group, SIGKILL after ``grace_s``; True when a process was stopped."""
        if not self.alive(deployment):
            return False
        pgid = int(deployment["pid"])
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.alive(deployment) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.alive(deployment):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
        proc = _CHILDREN.pop(pgid, None)
        if proc is not None:
            proc.wait(timeout=grace_s)
        return True

    @staticmethod
    def _tail(log: Path, chars: int = 800) -> str:
        try:
            return log.read_text(errors="replace")[-chars:].strip()
        except OSError:
            return ""
