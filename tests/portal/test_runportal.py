"""``manage.py runportal`` keeps serving when its Celery worker dies, and still stops cleanly on Ctrl-C / SIGTERM.

The real command runs on the embedded defaults (a fresh SQLite file and the filesystem broker under a temp
data dir): web server, Celery worker (prefork) and beat as child processes. The test kills the worker with
SIGKILL, as a crash would, and checks that runportal logs the exit code, starts a new worker that runs the
tasks beat sends, and that the web server answers throughout; then Ctrl-C (SIGINT to the process group) says
what it stops and leaves no process of the run behind.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.client import HTTPConnection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 180  # migrations on a fresh SQLite file, then three interpreters, on a shared 2-core machine


class Run:
    """A running ``runportal`` with its merged stdout/stderr collected line by line."""

    def __init__(self, proc: subprocess.Popen[str], port: int) -> None:
        self.proc = proc
        self.port = port
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, predicate: Callable[[], object], what: str, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"no {what}; output:\n" + "\n".join(self.lines[-60:]))
            time.sleep(0.2)

    def pids(self, name: str) -> list[int]:
        return [
            int(m.group(1)) for line in list(self.lines) if (m := re.fullmatch(rf"started {name} \(pid (\d+)\)", line))
        ]

    def web_status(self) -> int:
        """The status of ``GET /login/`` on the served address; 0 when nothing answers."""
        conn = HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", "/login/")
            return conn.getresponse().status
        except OSError:
            return 0
        finally:
            conn.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _start(tmp_path: Path, *extra: str) -> Run:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "CELERY_"))}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.base", PORTAL_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runportal", *extra, "--addr", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    return Run(proc, port)


def _take_down(run: Run) -> None:
    if run.proc.poll() is None:  # the test failed midway: take the whole group down
        os.killpg(run.proc.pid, signal.SIGKILL)
        run.proc.wait(30)


@pytest.fixture
def runportal(tmp_path: Path) -> Iterator[Run]:
    run = _start(tmp_path, "--no-seed")
    try:
        yield run
    finally:
        _take_down(run)


def test_a_killed_worker_is_restarted_while_the_web_server_keeps_answering(runportal: Run) -> None:
    run = runportal
    run.wait_for(
        lambda: run.web_status() == 200 and run.output().count(" ready.") == 2,
        "web server answering and both workers (control, bulk) ready",
    )
    [web] = run.pids("web")
    [worker] = run.pids("worker")

    os.kill(worker, signal.SIGKILL)
    run.wait_for(lambda: len(run.pids("worker")) == 2, "new worker", timeout=30)
    assert (
        f"worker exited with {-signal.SIGKILL}; restarting it (restart 1 of at most 5 within 10 minutes)" in run.lines
    )
    assert run.web_status() == 200  # while the new worker starts
    new_worker = run.pids("worker")[1]
    assert new_worker != worker and not _alive(worker)

    # The new worker consumes the broker: beat sends instances.tasks.reconcile every 10 s.
    restarted_at = len(run.lines)
    run.wait_for(
        lambda: any(
            re.search(r"Task instances\.tasks\.reconcile\[.*\] succeeded", line) for line in run.lines[restarted_at:]
        ),
        "task run by the new worker",
        timeout=90,
    )
    assert run.web_status() == 200
    assert run.pids("web") == [web] and _alive(web)
    assert "stopping the rest" not in run.output()

    # Ctrl-C in a terminal: SIGINT to the whole foreground group (runportal and its children alike)
    from portal.management.commands.runportal import descendants

    family = descendants(run.proc.pid)  # web, workers with their pool processes, beat
    assert {web, new_worker, *run.pids("bulk"), *run.pids("beat")} <= set(family)
    stopping_at = len(run.lines)
    began = time.monotonic()
    os.killpg(run.proc.pid, signal.SIGINT)
    assert run.proc.wait(60) == 0
    took = time.monotonic() - began  # measured, reported; not asserted
    run._reader.join(10)
    said = run.lines[stopping_at:]
    assert "stopping web, worker, bulk, beat (at most 3 s)…" in said, said
    assert [line for line in said if re.fullmatch(r"stopped in \d+\.\d s", line)], said
    print(f"runportal stopped {took:.1f} s after Ctrl-C; it said:", *said, sep="\n  ")
    assert run.web_status() == 0
    assert [pid for pid in family if _alive(pid)] == []


def test_the_restart_budget_allows_five_restarts_within_ten_minutes_per_child() -> None:
    from portal.management.commands.runportal import RestartBudget

    budget = RestartBudget()
    assert [budget.take("worker", t) for t in (0, 60, 120, 180, 240)] == [1, 2, 3, 4, 5]
    assert budget.take("worker", 599) is None  # a sixth within 10 minutes of the first
    assert budget.take("beat", 599) == 1  # counted per child
    assert budget.take("worker", 600.5) == 5  # the first restart left the window; the refused one never counted
    assert budget.take("worker", 601) is None


def test_a_worker_that_keeps_dying_stops_everything_after_five_restarts(
    monkeypatch: pytest.MonkeyPatch, transactional_db: None
) -> None:
    """The children are stand-ins (the command is run in this process, ``subprocess.Popen`` replaced): a web
    server and beat that sleep, and a worker that exits with 3 at once. Real children are started above."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from portal.management.commands import runportal as module

    real_popen = subprocess.Popen
    started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def popen(argv: list[str], **kwargs: object) -> subprocess.Popen[bytes]:
        name = "web" if "runserver" in argv else "bulk" if "bulk" in argv else argv[argv.index("portal") + 1]
        code = "raise SystemExit(3)" if name == "worker" else "import time; time.sleep(120)"
        proc = real_popen([sys.executable, "-c", code])
        started.append((name, proc))
        return proc

    monkeypatch.setattr(module.subprocess, "Popen", popen)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(CommandError) as failure:
            call_command("runportal", "--no-seed", "--addr", "127.0.0.1:1")
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert str(failure.value) == "worker exited with 3 after 5 restarts within 10 minutes; giving up, stopping the rest"
    assert [name for name, _ in started] == ["web", "worker", "bulk", "beat", *["worker"] * 5]
    assert [proc.poll() for _, proc in started] == [-signal.SIGTERM, 3, -signal.SIGTERM, -signal.SIGTERM, 3, 3, 3, 3, 3]


CORPORA = ROOT.parent / "shared" / "corpora"


@pytest.mark.slow
@pytest.mark.skipif(not CORPORA.is_dir(), reason="needs ../shared/corpora beside the checkout")
def test_the_control_queue_runs_while_corpus_imports_occupy_the_bulk_worker(tmp_path: Path) -> None:
    """With the seed on, runportal queues the corpus imports (minutes each) on "bulk"; the node registration
    and the reconcile / placement pass on "control" run meanwhile, and the console says so."""
    run = _start(tmp_path)
    try:

        def imports_done() -> int:
            return sum(
                bool(re.search(r"Task datasets\.tasks\.import_corpus\[.*\] succeeded", line)) for line in run.lines
            )

        run.wait_for(
            lambda: "compute node registered: launches can start now" in run.lines, "node registered while imports run"
        )
        run.wait_for(
            lambda: any(re.search(r"Task instances\.tasks\.reconcile\[.*\] succeeded", line) for line in run.lines),
            "a reconcile pass (it places waiting instances)",
            timeout=60,
        )
        queued = sum(bool(re.search(r"import_corpus\[.*\] received", line)) for line in run.lines)
        from datasets.pipeline import corpus_files

        assert queued >= 1 and imports_done() < len(corpus_files(CORPORA))  # imports still running
        assert any(line.startswith("  back office:  http://127.0.0.1:") for line in run.lines)
        run.proc.send_signal(signal.SIGTERM)
        assert run.proc.wait(90) == 0
    finally:
        _take_down(run)
