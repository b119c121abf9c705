"""The CPU slot's launch defaults (``instances.launch_defaults.CPU_DEFAULTS``) run for real under torchrun on the
legal corpus: a progress event for the first step and an interval checkpoint at step 100 before any stop, so a
short trial job has a checkpoint (issue 18: with 1024-token samples × 8 and 30 minutes it had none).

No timed assertion: the seconds to the first step and to the first checkpoint are printed (``-s`` shows them).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from runtime_support import read_events

from instances.launch_defaults import CPU_DEFAULTS


@pytest.mark.slow
def test_the_cpu_defaults_report_the_first_step_and_checkpoint_at_step_100(
    shard_dir: Path, run_job: Any, tmp_path: Path
) -> None:
    cfg = {
        "model": "tiny",
        "engine": "ddp",
        "data": [str(shard_dir)],
        "tokenizer": str(shard_dir / "tokenizer.json"),
        "checkpoint_dir": str(tmp_path / "ckpt"),
        **CPU_DEFAULTS.hyperparameters,
        "checkpoint_every_minutes": float(CPU_DEFAULTS.checkpoint_every_minutes),
        "checkpoint_every_steps": CPU_DEFAULTS.checkpoint_every_steps,
        "keep_last": CPU_DEFAULTS.keep_last,
    }
    started = time.monotonic()
    job = run_job(cfg, tmp_path / "work", nproc=1)
    first_step = first_checkpoint = None
    deadline = started + 600
    while first_checkpoint is None:
        assert job.proc.poll() is None, job.output()
        assert time.monotonic() < deadline, "no checkpoint within 10 minutes:\n" + job.output()
        events = read_events(tmp_path / "work")
        if first_step is None and any(e["type"] == "progress" and e["step"] == 1 for e in events):
            first_step = time.monotonic() - started
        checkpoints = [e for e in events if e["type"] == "checkpoint"]
        if checkpoints:
            first_checkpoint = time.monotonic() - started
        time.sleep(0.2)
    job.signal_group(signal.SIGTERM)
    job.wait()  # the runtime saves a final checkpoint and exits as preempted; torchrun's own code varies
    events = read_events(tmp_path / "work")
    progress_steps = [e["step"] for e in events if e["type"] == "progress"]
    assert progress_steps[:3] == [1, 2, 3]  # log_every_steps 1: every step is reported
    # the interval checkpoint (every 100 steps, or the 1-minute timer on a slow machine) came before the stop
    assert next(e["step"] for e in events if e["type"] == "checkpoint") in range(1, 101)
    print(
        f"\nCPU defaults: first step reported after {first_step:.1f} s, first checkpoint after {first_checkpoint:.1f} s"
    )
