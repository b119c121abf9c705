"""Twenty SIGKILLs of a whole job (torchrun and both workers, as a lost node would) at random moments —
during steps, staging, async writes and commits — each followed by a resume. After every resume the loss of
every step trained equals the uninterrupted run's, and no process of any run survives."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runtime_support import TOL, Job, losses, read_events

from instances.runtime.checkpoint import CheckpointStore

pytestmark = pytest.mark.slow
KILLS = 20
MAX_STEPS = 100


def test_twenty_random_sigkills_each_resume_trains_exactly_the_uninterrupted_losses(
    base_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    cfg = {**base_config, "max_steps": MAX_STEPS, "checkpoint_every_steps": 2, "keep_last": 1, "async_save": True}
    ref = run_job({**cfg, "checkpoint_dir": str(tmp_path / "ref-ckpt")}, tmp_path / "ref")
    assert ref.wait() == 0, ref.output()
    want = losses(tmp_path / "ref")
    assert sorted(want) == list(range(1, MAX_STEPS + 1))

    rng = random.Random(16)  # fixed seed: a failure can be replayed
    work, ckpt = tmp_path / "work", tmp_path / "ckpt"
    cfg = {**cfg, "checkpoint_dir": str(ckpt)}
    kills = 0
    while kills < KILLS:
        seen = len(read_events(work))
        job = run_job(cfg, work)
        # wait for 1-3 new steps of this run (saves of every second step are in flight around them), then
        # kill at a random moment of the next 0.3 s: each run moves the job on by a few steps at most
        steps_wanted = rng.randint(1, 3)
        deadline = time.monotonic() + 180
        while sum(e["type"] == "progress" for e in read_events(work)[seen:]) < steps_wanted:
            if job.proc.poll() is not None:
                break
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        if job.proc.poll() is not None:
            break  # finished before the kill: nothing left to interrupt
        job.kill_all()
        assert job.processes() == []
        kills += 1
        run = [e for e in read_events(work)[seen:] if e["type"] == "progress"]
        bad = [(e["step"], e["loss"], want[e["step"]]) for e in run if abs(e["loss"] - want[e["step"]]) > TOL]
        assert bad == [], f"kill {kills}: resumed losses differ from the uninterrupted run"
        complete = CheckpointStore(str(ckpt)).complete()
        assert len(complete) <= 2  # keep_last=1, plus at most the save that was being committed
    assert kills == KILLS, f"the job finished after {kills} kills; make MAX_STEPS larger"
    job = run_job(cfg, work)
    assert job.wait() == 0, job.output()
    events = read_events(work)
    got = [e for e in events if e["type"] == "progress"]
    assert max(e["step"] for e in got) == MAX_STEPS
    assert [(e["step"], e["loss"]) for e in got if abs(e["loss"] - want[e["step"]]) > TOL] == []
    starts = [e["step"] for e in events if e["type"] == "started"]
    assert len(starts) == KILLS + 1 and starts == sorted(starts)  # never back to an older step, never to 0 again
