"""Helpers for the runtime tests: a torchrun launcher, event readers and a local portal stand-in."""

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

from instances.backends.procfs import MARKER_ENV, ProcInfo, job_processes, signal_all

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan re-parented to a pid 1 that never reaps stays one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


class Job:
    """One ``torchrun`` launch of the runtime (own process session so the test can signal the group).

    torchrun starts each worker in a session of its own, so signalling torchrun's group misses the ranks;
    every process of the job carries ``GPU_PORTAL_JOB_MARKER=<unique>`` in its environment, which is how
    ``processes()`` and ``kill_all()`` find all of them, orphans included.
    """

    def __init__(self, cfg: dict[str, Any], workdir: Path, env: dict[str, str] | None = None, nproc: int = 2) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        cfg = {**cfg, "workdir": str(workdir)}
        self.workdir = workdir
        self.config_path = workdir / f"job-{time.monotonic_ns()}.json"
        self.config_path.write_text(json.dumps(cfg))
        self.log_path = workdir / f"torchrun-{time.monotonic_ns()}.log"
        self.marker = f"runtime-test-{os.getpid()}-{time.monotonic_ns()}"
        self._seen: set[int] = set()  # every pid processes() ever returned (kill_all waits for all of them)
        full_env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "OMP_NUM_THREADS": "1",
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            **(env or {}),
            MARKER_ENV: self.marker,
        }
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(nproc),
            "--standalone",
            "-m",
            "instances.runtime",
            "--config",
            str(self.config_path),
        ]
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=full_env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def signal_group(self, sig: int) -> None:
        """``sig`` to torchrun's process group (torchrun forwards SIGTERM to its workers itself)."""
        os.killpg(self.proc.pid, sig)

    def processes(self) -> list[ProcInfo]:
        """Every live process of the job: torchrun, its workers (in their own sessions), their children."""
        found = job_processes(self.marker, self.proc.pid)
        self._seen.update(p.pid for p in found)
        return found

    def rank_pids(self) -> list[int]:
        """pids of the torchrun workers (processes with ``LOCAL_RANK`` in their environment)."""
        return [p.pid for p in self.processes() if p.is_rank]

    def kill_all(self, timeout: float = 30) -> None:
        """SIGKILL every process of the job (torchrun and each worker) until none is left, and reap torchrun.
        Raises ``AssertionError`` if some process survives ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            procs = self.processes()
            # A process being killed may already hide its environment (so no longer look like the job's) while
            # it still exits: every pid ever seen must be gone too, not only those still carrying the marker.
            dying = [pid for pid in self._seen if alive(pid) and pid not in {p.pid for p in procs}]
            if not procs and not dying:
                break
            signal_all(procs, signal.SIGKILL)
            for pid in dying:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise AssertionError(f"processes {[p.pid for p in procs] + dying} survived SIGKILL")
            time.sleep(0.02)
            self.proc.poll()
        self.proc.wait()
        self._log.close()

    def wait(self, timeout: float = 240) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            raise AssertionError(f"torchrun did not finish in {timeout}s:\n{self.output()}") from None
        self._log.close()
        return rc

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_file(self, path: Path, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not path.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"job ended before {path} appeared:\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} did not appear within {timeout}s")
            time.sleep(0.05)


def read_events(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def losses(workdir: Path) -> dict[int, float]:
    """step -> loss from the progress events (the last one wins when a step was trained twice)."""
    return {e["step"]: e["loss"] for e in read_events(workdir) if e["type"] == "progress"}


class PortalStub:
    """A tiny local stand-in for the portal's ``/events`` endpoint (records every accepted batch).

    ``answer`` is the JSON returned; ``token`` the expected bearer token (401 otherwise).
    """

    def __init__(self, port: int = 0, token: str = "job-token") -> None:
        import http.server
        import threading

        stub = self
        self.token = token
        self.batches: list[dict[str, Any]] = []
        self.answer: dict[str, Any] = {"checkpoint_requested": False, "stop_requested": False}
        self.answer_once: dict[str, Any] | None = None

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/cb/events" or self.headers.get("Authorization") != f"Bearer {stub.token}":
                    self.send_response(401)
                    self.end_headers()
                    return
                stub.batches.append(json.loads(body))
                answer = stub.answer_once or stub.answer
                stub.answer_once = None
                out = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/cb"

    def events(self) -> list[dict[str, Any]]:
        """All received events, deduplicated on (attempt, seq) as the portal does, in seq order."""
        seen: dict[tuple[int, int], dict[str, Any]] = {}
        for batch in self.batches:
            for ev in batch["events"]:
                seen.setdefault((batch["attempt"], ev["seq"]), ev)
        return [seen[k] for k in sorted(seen)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TOL = 1e-6  # the bound for 'same per-step losses'


def wait_for_step(job: Job, step: int) -> None:
    deadline = time.monotonic() + 180
    while not any(e["type"] == "progress" and e["step"] >= step for e in read_events(job.workdir)):
        assert job.proc.poll() is None, job.output()
        assert time.monotonic() < deadline
        time.sleep(0.02)


def assert_same_losses(got: dict[int, float], want: dict[int, float], steps: range) -> None:
    for s in steps:
        assert abs(got[s] - want[s]) <= TOL, f"step {s}: {got[s]} vs uninterrupted {want[s]}"
