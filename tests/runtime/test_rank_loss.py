"""Losing one rank (SIGKILL of rank 1 only, as the OOM killer would) under the real local backend: the
launcher reports the job as lost (exit 88 → ``preempted``), no process of the job survives, and the next
attempt resumes from the newest complete checkpoint. The portal side (crash budget untouched) is in
tests/instances/test_rank_loss.py."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_support import alive, read_events

from instances.backends.base import JobSpec
from instances.backends.local import LocalBackend
from instances.backends.local_launcher import combine_exit_codes, read_rank_codes
from instances.backends.procfs import job_processes
from instances.runtime.exitcodes import (
    EXIT_CONFIG_ERROR,
    EXIT_FAILED,
    EXIT_PREEMPTED,
    EXIT_RANK_LOST,
    EXIT_STOPPED,
    EXIT_STORE_UNAVAILABLE,
)


def wait_for(predicate: Any, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_rank_without_an_exit_code_counts_as_lost_unless_another_rank_crashed(tmp_path: Path) -> None:
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in (0, 1):
        (ranks / f"started-{r}").write_text("123\n")
    (ranks / "rank-0").write_text(f"{EXIT_PREEMPTED}\n")
    assert read_rank_codes(ranks) == [EXIT_PREEMPTED, EXIT_RANK_LOST]
    assert combine_exit_codes(read_rank_codes(ranks)) == EXIT_RANK_LOST
    assert combine_exit_codes([EXIT_FAILED, EXIT_RANK_LOST]) == EXIT_FAILED  # a real crash still counts
    assert combine_exit_codes([EXIT_CONFIG_ERROR, EXIT_RANK_LOST]) == EXIT_CONFIG_ERROR
    assert combine_exit_codes([EXIT_STOPPED, EXIT_RANK_LOST]) == EXIT_STOPPED
    assert combine_exit_codes([EXIT_STORE_UNAVAILABLE, EXIT_PREEMPTED]) == EXIT_STORE_UNAVAILABLE
    assert combine_exit_codes([EXIT_RANK_LOST, EXIT_STORE_UNAVAILABLE]) == EXIT_RANK_LOST


@pytest.mark.slow
def test_sigkill_of_rank_1_only_is_a_lost_rank_and_the_next_attempt_resumes(
    base_config: dict[str, Any], tmp_path: Path
) -> None:
    backend = LocalBackend(workspace_root=tmp_path / "ws", slots=2)
    work = tmp_path / "work"
    cfg = {**base_config, "max_steps": 400, "checkpoint_every_steps": 2, "checkpoint_dir": str(tmp_path / "ckpt"),
           "workdir": str(work)}  # fmt: skip

    def submit(attempt: int) -> tuple[str, int, Path]:
        handle = backend.submit(JobSpec(
            job_id="rank-loss", attempt=attempt, image="local", placement=(("local", 2),), nproc_per_node=2,
            config_json=json.dumps({**cfg, "attempt": attempt}), env={"OMP_NUM_THREADS": "1"}))  # fmt: skip
        pgid, ws = LocalBackend.parse_handle(handle)
        return handle, pgid, ws

    handle, pgid, ws = submit(1)
    try:
        wait_for(lambda: any(e["type"] == "checkpoint" for e in read_events(work)), "a first checkpoint")
        pids = [int((ws / "ranks" / f"started-{r}").read_text()) for r in (0, 1)]
        os.kill(pids[1], signal.SIGKILL)  # rank 1 only: no handler runs, no exit code is written
        wait_for(lambda: backend.status(handle).terminal, "the job to end")
        status = backend.status(handle)
        assert (status.state, status.exit_code) == ("preempted", EXIT_RANK_LOST), (ws / "logs.txt").read_text()
        assert status.message.startswith("rank lost")
        assert not (ws / "ranks" / "rank-1").exists()
        assert int((ws / "ranks" / "rank-0").read_text()) in (EXIT_RANK_LOST, EXIT_PREEMPTED)
        wait_for(lambda: not job_processes(str(ws), pgid), "every process of the job to end", timeout=30)
        assert [pid for pid in [pgid, *pids] if alive(pid)] == []
        saved = max(e["step"] for e in read_events(work) if e["type"] == "checkpoint")

        handle, pgid, ws = submit(2)  # what the portal does with a preempted attempt
        wait_for(lambda: any(e["type"] == "progress" and e["attempt"] == 2 for e in read_events(work)),
                 "the first resumed step")  # fmt: skip
        started = [e["step"] for e in read_events(work) if e["type"] == "started"]
        assert started[0] == 0 and started[-1] >= saved > 0
    finally:
        backend.stop(handle, grace_s=1)
    assert job_processes(str(ws), pgid) == []
