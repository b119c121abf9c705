"""Local backend (instances/backends/local.py) with small fake commands instead of the real runtime.

The fake programs write their pid and the signals they receive into the workspace, so each test can check
that every process was reached and none survived (``os.kill(pid, 0)``). Waits poll for a state with a
generous deadline; nothing asserts on elapsed time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from instances.backends import BackendError, DatasetMount, JobSpec, UnknownHandle, get_backend
from instances.backends.base import state_for_exit_code
from instances.backends.local import LocalBackend
from instances.backends.local_launcher import combine_exit_codes
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_FAILED, EXIT_PREEMPTED, EXIT_STOPPED

PY = sys.executable

# A job "tree": the main process starts a child in its group and a child in its own session (as torchrun
# starts its workers), forwards SIGTERM to the escaped one (as torchrun does) and exits 85 after SIGTERM
# (as the runtime does). Each process records its pid in pids/ and the SIGTERM it got in term/.
TREE = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    ws = os.environ["GPU_PORTAL_WORKSPACE"]
    role = sys.argv[1] if len(sys.argv) > 1 else "main"
    os.makedirs(ws + "/pids", exist_ok=True); os.makedirs(ws + "/term", exist_ok=True)
    kids = []
    def on_term(signum, frame):
        open(f"{ws}/term/{os.getpid()}", "w").write(role)
        for k in kids:
            try: k.send_signal(signal.SIGTERM)
            except ProcessLookupError: pass
        for k in kids: k.wait()
        sys.exit(85)
    signal.signal(signal.SIGTERM, on_term)
    if role == "main":
        kids.append(subprocess.Popen([sys.executable, __file__, "in-group"]))
        kids.append(subprocess.Popen([sys.executable, __file__, "own-session"], start_new_session=True))
    open(f"{ws}/pids/{os.getpid()}", "w").write(role)
    print(f"{role} up", flush=True)
    while True:
        time.sleep(0.05)
    """
)

# Ignores SIGTERM everywhere; its child escapes into its own session: only SIGKILL by marker ends it.
STUBBORN = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    ws = os.environ["GPU_PORTAL_WORKSPACE"]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    os.makedirs(ws + "/pids", exist_ok=True)
    if len(sys.argv) == 1:
        subprocess.Popen([sys.executable, __file__, "child"], start_new_session=True)
    open(f"{ws}/pids/{os.getpid()}", "w").write("x")
    while True:
        time.sleep(0.05)
    """
)


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    """True when ``pid`` is a live process (a zombie counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def pids_in(folder: Path) -> dict[int, str]:
    return {int(p.name): p.read_text() for p in folder.iterdir()} if folder.is_dir() else {}


@pytest.fixture
def backend(tmp_path: Path) -> LocalBackend:
    return LocalBackend(workspace_root=tmp_path / "ws", slots=2)


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    return str(path)


def spec(command: list[str] | None, *, job_id: str = "job-1", attempt: int = 1, **kw: object) -> JobSpec:
    return JobSpec(
        job_id=job_id,
        attempt=attempt,
        image="local",
        placement=(("local", 2),),
        nproc_per_node=kw.pop("nproc_per_node", 2),  # type: ignore[arg-type]
        command=command,
        **kw,  # type: ignore[arg-type]
    )


def test_stop_reaches_every_process_and_leaves_no_orphan(backend: LocalBackend, tmp_path: Path) -> None:
    handle = backend.submit(spec([PY, script(tmp_path, "tree.py", TREE)]))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: len(pids_in(ws / "pids")) == 3, "three processes up")
    pids = pids_in(ws / "pids")
    assert sorted(pids.values()) == ["in-group", "main", "own-session"]
    assert backend.status(handle).state == "running"

    status = backend.stop(handle, grace_s=10)

    assert sorted(pids_in(ws / "term").values()) == ["in-group", "main", "own-session"]  # all got SIGTERM
    assert [pid for pid in pids if alive(pid)] == []
    assert status.state == "stopped"  # 85 after a stop request is a stop, not a preemption
    assert status.exit_code == EXIT_PREEMPTED
    assert status.message == "stopped, checkpoint saved"
    assert status.finished_at is not None and status.started_at is not None


def test_processes_that_ignore_sigterm_are_killed_after_the_grace(backend: LocalBackend, tmp_path: Path) -> None:
    handle = backend.submit(spec([PY, script(tmp_path, "stubborn.py", STUBBORN)]))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: len(pids_in(ws / "pids")) == 2, "two processes up")
    pids = list(pids_in(ws / "pids"))

    status = backend.stop(handle, grace_s=0.3)

    assert [pid for pid in pids if alive(pid)] == []
    assert not alive(int(json.loads((ws / "backend.json").read_text())["pgid"]))
    assert status.state == "stopped"
    assert status.exit_code is None  # the launcher itself was SIGKILLed: no exit code, but a requested stop
    assert status.message == "processes gone without an exit code (killed)"


@pytest.mark.parametrize(
    ("code", "state", "message"),
    [
        (0, "succeeded", "finished"),
        (EXIT_PREEMPTED, "preempted", "preempted: checkpoint saved, safe to resume"),
        (EXIT_STOPPED, "stopped", "stopped on request, checkpoint saved"),
        (EXIT_CONFIG_ERROR, "failed", "invalid runtime config: nothing trained (not retried)"),
        (EXIT_FAILED, "failed", "crashed (exit code 1)"),
        (3, "failed", "crashed (exit code 3)"),
    ],
)
def test_exit_codes_map_to_states(backend: LocalBackend, code: int, state: str, message: str) -> None:
    handle = backend.submit(spec([PY, "-c", f"import sys; sys.exit({code})"], job_id=f"exit-{code}"))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: (ws / "exit_code").exists(), "exit code file")

    status = backend.status(handle)

    assert (status.state, status.exit_code, status.message) == (state, code, message)
    assert (ws / "exit_code").read_text() == f"{code}\n"


def test_a_job_killed_by_a_signal_is_a_crash_unless_a_stop_was_asked() -> None:
    assert state_for_exit_code(-9) == ("failed", "killed by SIGKILL")
    assert state_for_exit_code(137) == ("failed", "killed by SIGKILL")
    assert state_for_exit_code(-15, stop_requested=True) == ("stopped", "stopped (SIGTERM)")


def test_status_and_stop_work_from_another_process(backend: LocalBackend, tmp_path: Path) -> None:
    handle = backend.submit(spec([PY, script(tmp_path, "tree.py", TREE)]))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: len(pids_in(ws / "pids")) == 3, "three processes up")
    other = textwrap.dedent(
        f"""
        from instances.backends.local import LocalBackend
        b = LocalBackend()  # a fresh backend, as in a restarted Celery worker
        print(b.status({handle!r}).state)
        print(b.stop({handle!r}, grace_s=10).state)
        print(b.status({handle!r}).state)
        """
    )

    out = subprocess.run([PY, "-c", other], capture_output=True, text=True, check=True, timeout=60).stdout

    assert out.split() == ["running", "stopped", "stopped"]
    assert [pid for pid in pids_in(ws / "pids") if alive(pid)] == []
    assert backend.status(handle).state == "stopped"


def test_logs_capture_stdout_and_stderr(backend: LocalBackend) -> None:
    code = "import sys; print('to stdout', flush=True); print('to stderr', file=sys.stderr, flush=True)"
    handle = backend.submit(spec([PY, "-c", code]))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: backend.status(handle).terminal, "job end")

    assert (ws / "logs.txt").read_text().splitlines() == ["to stdout", "to stderr"]


def test_request_checkpoint_signals_only_the_rank_processes(backend: LocalBackend, tmp_path: Path) -> None:
    worker = textwrap.dedent(
        """
        import os, signal, sys, time
        ws = os.environ["GPU_PORTAL_WORKSPACE"]
        def on_usr1(signum, frame):
            open(ws + "/checkpoint-requested", "a").write(os.environ["LOCAL_RANK"] + "\\n")
        signal.signal(signal.SIGUSR1, on_usr1)
        open(ws + "/ready", "w").write("ok")
        while True:
            time.sleep(0.05)
        """
    )
    # LOCAL_RANK in the environment makes the process look like a torchrun worker
    handle = backend.submit(spec([PY, script(tmp_path, "w.py", worker)], env={"LOCAL_RANK": "0"}))
    _, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: (ws / "ready").exists(), "worker ready")

    sent = backend.request_checkpoint(handle)

    assert sent == 1  # the worker, not the launcher (which shares the environment)
    seen = ws / "checkpoint-requested"  # created by open() before the handler's write lands: wait for the line
    wait_for(lambda: seen.exists() and seen.read_text().endswith("\n"), "checkpoint request seen")
    assert seen.read_text() == "0\n"
    assert backend.status(handle).state == "running"
    backend.stop(handle, grace_s=0.2)


def test_submit_is_idempotent_and_builds_the_workspace(backend: LocalBackend, tmp_path: Path) -> None:
    shards = tmp_path / "shards" / "legal"
    shards.mkdir(parents=True)
    (shards / "shard-00000.bin").write_bytes(b"\0" * 8)
    job = spec(
        [PY, "-c", "import os; print(sorted(os.listdir('data/legal')), os.environ['GPU_PORTAL_NPROC'])"],
        job_id="job/../7",
        attempt=3,
        nproc_per_node=8,
        dataset_mounts=(DatasetMount("legal", str(shards), "/data/legal"),),
        config_json='{"max_steps": 5}',
    )

    first = backend.submit(job)
    second = backend.submit(job)

    assert first == second
    _, ws = LocalBackend.parse_handle(first)
    assert ws == (tmp_path / "ws" / "job_.._7" / "attempt-3").resolve()
    wait_for(lambda: backend.status(first).terminal, "job end")
    assert (ws / "logs.txt").read_text() == "['shard-00000.bin'] 2\n"  # nproc capped at the 2 slots
    assert (ws / "data" / "legal").resolve() == shards.resolve()
    assert json.loads((ws / "job.json").read_text()) == {"max_steps": 5}
    assert json.loads((ws / "backend.json").read_text())["nproc"] == 2


def test_the_torchrun_command_line_is_built_from_the_spec(backend: LocalBackend, tmp_path: Path) -> None:
    ws = tmp_path / "w"
    argv = backend.command_for(spec(None, config_json="{}"), ws, 2)

    assert argv == [
        PY, "-m", "instances.backends.local_launcher", "--workspace", str(ws), "--",
        PY, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "2",
        "--max-restarts", "0", "-m", "instances.backends.rank_shim", "--exit-dir", str(ws / "ranks"),
        "-m", "instances.runtime", "--config", str(ws / "job.json"),
    ]  # fmt: skip


def test_bad_input_is_refused(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="is not a folder"):
        backend.submit(spec([PY, "-c", "pass"], dataset_mounts=(DatasetMount("x", str(tmp_path / "nope"), "/d"),)))
    with pytest.raises(BackendError, match="either the runtime"):
        backend.submit(spec(None))
    with pytest.raises(UnknownHandle):
        backend.status("k8s:whatever")
    with pytest.raises(UnknownHandle):
        backend.status(f"local:1:{tmp_path}/missing")
    with pytest.raises(BackendError, match="unknown compute backend"):
        get_backend("slurm")


def test_inventory_is_one_node_with_free_slots(backend: LocalBackend, tmp_path: Path) -> None:
    assert [(n.name, n.gpu_type, n.gpus_total, n.gpus_free, n.state) for n in backend.inventory()] == [
        ("local", "cpu-local", 2, 2, "ready")
    ]
    handle = backend.submit(spec([PY, script(tmp_path, "stubborn.py", STUBBORN)], nproc_per_node=1))
    assert backend.inventory()[0].gpus_free == 1
    backend.stop(handle, grace_s=0.1)
    assert backend.inventory()[0].gpus_free == 2
    assert isinstance(get_backend("local", slots=4, gpu_type="cpu"), LocalBackend)


def test_rank_codes_combine_to_the_most_telling_one() -> None:
    assert combine_exit_codes([85, 85]) == 85
    assert combine_exit_codes([1, 85]) == 1
    assert combine_exit_codes([85, 64, 1]) == 64
    assert combine_exit_codes([0, 86]) == 86
    assert combine_exit_codes([0, 0]) == 0


FAKE_RUNTIME = textwrap.dedent(
    """
    import os, signal, sys, time
    ws = os.environ["GPU_PORTAL_WORKSPACE"]
    rank = os.environ["RANK"]
    assert sys.argv[1:] == ["--config", ws + "/job.json"], sys.argv
    def on_usr1(signum, frame):
        open(f"{ws}/usr1-{rank}", "w").write("1")
    def on_term(signum, frame):
        open(f"{ws}/term-{rank}", "w").write("1")
        sys.exit(85)  # EXIT_PREEMPTED, as the runtime does after its SIGTERM checkpoint
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGTERM, on_term)
    open(f"{ws}/pid-{rank}", "w").write(str(os.getpid()))
    while True:
        time.sleep(0.05)
    """
)


@pytest.mark.slow
def test_under_torchrun_checkpoint_requests_reach_workers_and_a_preemption_keeps_code_85(
    tmp_path: Path,
) -> None:
    """Real torchrun (2 workers, gloo-free fake runtime): SIGUSR1 goes to both workers and not to torchrun;
    SIGTERM to every process, as a preemption would, yields exit code 85 although torchrun itself exits 1."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / "fake_runtime.py").write_text(FAKE_RUNTIME)
    backend = LocalBackend(workspace_root=tmp_path / "ws", slots=2, runtime_module="fake_runtime")
    handle = backend.submit(spec(None, config_json="{}", env={"PYTHONPATH": str(mod_dir)}))
    pgid, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: (ws / "pid-0").exists() and (ws / "pid-1").exists(), "two torchrun workers", timeout=60)
    workers = [int((ws / f"pid-{r}").read_text()) for r in (0, 1)]

    assert backend.request_checkpoint(handle) == 2
    wait_for(lambda: (ws / "usr1-0").exists() and (ws / "usr1-1").exists(), "SIGUSR1 in both workers")
    assert backend.status(handle).state == "running"  # torchrun did not die of SIGUSR1

    from instances.backends.procfs import job_processes

    everything = job_processes(str(ws), pgid)
    for p in everything:  # a preemption: every process gets SIGTERM
        os.kill(p.pid, signal.SIGTERM)
    wait_for(lambda: backend.status(handle).terminal, "job end", timeout=60)
    status = backend.status(handle)

    assert (status.state, status.exit_code) == ("preempted", 85)
    assert sorted(p.name for p in (ws / "ranks").glob("rank-*")) == ["rank-0", "rank-1"]
    # the launcher writes the exit code last, then exits: wait for it, then nothing may be left
    wait_for(lambda: not alive(pgid), "launcher exit")
    assert [pid for pid in [*workers, *(p.pid for p in everything)] if alive(pid)] == []


@pytest.mark.slow
def test_when_torchrun_is_killed_its_orphaned_workers_do_not_survive(tmp_path: Path) -> None:
    """torchrun starts workers in their own sessions; SIGKILL to torchrun alone (OOM killer, kill -9) would
    orphan them. The launcher, a child subreaper, terminates them (SIGTERM: the runtime checkpoints and
    exits 85) and records their code."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    (mod_dir / "fake_runtime.py").write_text(FAKE_RUNTIME)
    backend = LocalBackend(workspace_root=tmp_path / "ws", slots=2, runtime_module="fake_runtime")
    handle = backend.submit(spec(None, config_json="{}", env={"PYTHONPATH": str(mod_dir)}))
    pgid, ws = LocalBackend.parse_handle(handle)
    wait_for(lambda: (ws / "pid-0").exists() and (ws / "pid-1").exists(), "two torchrun workers", timeout=60)
    workers = [int((ws / f"pid-{r}").read_text()) for r in (0, 1)]
    from instances.backends.procfs import job_processes

    (torchrun,) = [p.pid for p in job_processes(str(ws), pgid) if p.pid != pgid and not p.is_rank]

    os.kill(torchrun, signal.SIGKILL)
    wait_for(lambda: backend.status(handle).terminal, "job end", timeout=60)
    wait_for(lambda: not alive(pgid), "launcher exit")

    assert [pid for pid in workers if alive(pid)] == []
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith("term-")) == ["term-0", "term-1"]
    assert (backend.status(handle).state, backend.status(handle).exit_code) == ("preempted", 85)
