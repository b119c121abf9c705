"""DeepSpeed ZeRO on CPU under torchrun: ZeRO-2 resumes exactly, ZeRO-3 trains and exits cleanly.

Skipped (with the reason) when DeepSpeed is not importable: it is the optional ``deepspeed`` extra.
"""

from __future__ import annotations

import importlib.util
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runtime_support import Job, assert_same_losses, losses, read_events, wait_for_step

from instances.runtime.exitcodes import EXIT_FINISHED, EXIT_PREEMPTED

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("deepspeed") is None,
        reason="deepspeed is not installed (optional extra: DS_BUILD_OPS=0 pip install '.[deepspeed]')",
    ),
]
MAX_STEPS = 8


def test_zero2_sigterm_then_resume_is_exact(
    base_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    cfg = {
        **base_config,
        "engine": "deepspeed",
        "zero_stage": 2,
        "max_steps": MAX_STEPS,
        "checkpoint_dir": str(tmp_path / "ckpt"),
    }
    ref = run_job({**cfg, "checkpoint_dir": str(tmp_path / "ref-ckpt")}, tmp_path / "ref")
    assert ref.wait() == 0, ref.output()
    want = losses(tmp_path / "ref")
    assert sorted(want) == list(range(1, MAX_STEPS + 1))

    job = run_job(cfg, tmp_path / "work")
    wait_for_step(job, 3)
    job.signal_group(signal.SIGTERM)
    job.wait()
    exit_event = read_events(tmp_path / "work")[-1]
    assert (exit_event["reason"], exit_event["exit_code"]) == ("preempted", EXIT_PREEMPTED)
    stopped_at = exit_event["step"]
    assert 3 <= stopped_at < MAX_STEPS
    assert (tmp_path / "ckpt" / f"step-{stopped_at:08d}" / "manifest.json").exists()

    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    assert [e["step"] for e in events if e["type"] == "started"] == [0, stopped_at]
    assert_same_losses(losses(tmp_path / "work"), want, range(stopped_at + 1, MAX_STEPS + 1))


def test_zero3_trains_and_exits_cleanly(
    base_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    cfg = {
        **base_config,
        "engine": "deepspeed",
        "zero_stage": 3,
        "max_steps": 4,
        "checkpoint_dir": str(tmp_path / "c"),
    }
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    assert sorted(losses(tmp_path / "work")) == [1, 2, 3, 4]
    assert (events[-1]["type"], events[-1]["reason"], events[-1]["exit_code"]) == (
        "exit",
        "finished",
        EXIT_FINISHED,
    )
    assert [e["step"] for e in events if e["type"] == "checkpoint"] == [3, 4]
