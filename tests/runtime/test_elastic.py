"""Elastic resume: a job written at one data-parallel degree resumes on another with the same global batch,
the same global sample order (asserted by sample id) and the same losses.

The torchrun scenario is real (gloo on CPU, FSDP2, real legal text): an uninterrupted dp=4 run is the
reference; the elastic run trains at dp=4, is preempted at step 3, resumes at dp=2, is preempted at step 6,
and finishes at dp=3 (global batch 12 divides over 4, 2 and 3). Nothing is replaced.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runtime_support import Job, losses, read_events

from instances.runtime.config import ConfigError, JobConfig, allowed_degrees, batch_layout
from instances.runtime.data import TokenSampler
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_FINISHED, EXIT_PREEMPTED
from instances.runtime.shards import ShardWriter
from instances.runtime.train import PREEMPT_AT_STEP_ENV

# fp32 on CPU: the same samples per step, but summed in another order (3 micro-batches of 1 on 4 ranks vs
# 3 of 2 on 2 ranks vs 2 of 2 on 3 ranks) — the losses agree to float32 rounding, not bit for bit. Measured:
# at most 3.6e-7 apart (steps before the first resume: 0.0); the bound is 4 float32 ulps at a loss of ~6.5.
ELASTIC_TOL = 2e-6
GLOBAL = 12
STEPS = 9


# ---- the rule -------------------------------------------------------------------------------------


def test_batch_layout_keeps_the_global_batch_on_every_allowed_degree() -> None:
    assert [batch_layout(GLOBAL, m, 2) for m in (1, 2, 3, 4, 6, 12)] == [(2, 6), (2, 3), (2, 2), (1, 3), (2, 1), (1, 1)]
    assert batch_layout(16, 2, 8) == (8, 1)
    assert allowed_degrees(GLOBAL, up_to=8) == [1, 2, 3, 4, 6]


def test_a_degree_that_does_not_divide_the_global_batch_is_refused_naming_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        batch_layout(GLOBAL, 5, 2)
    assert err.value.field == "global_batch"
    assert str(err.value) == (
        "global_batch: global batch 12 does not split over data-parallel degree 5; "
        "a degree must divide it (allowed: 1, 2, 3, 4, 6, 12)"
    )


def test_grad_accum_is_derived_when_the_global_batch_is_set(tmp_path: Path) -> None:
    raw = {"model": "tiny", "data": [str(tmp_path)], "checkpoint_dir": str(tmp_path), "max_steps": 1}
    with pytest.raises(ConfigError, match=r"^grad_accum: is derived from global_batch"):
        JobConfig.from_dict({**raw, "global_batch": 12, "grad_accum": 2})
    with pytest.raises(ConfigError, match=r"^global_batch: must be >= 0"):
        JobConfig.from_dict({**raw, "global_batch": -1})
    assert JobConfig.from_dict({**raw, "global_batch": 12}).global_batch == 12


# ---- the sampler's global order --------------------------------------------------------------------


@pytest.fixture
def small_shards(tmp_path: Path) -> Path:
    with ShardWriter(tmp_path, vocab_size=1000, eos_id=0, shard_tokens=100) as w:
        for d in range(40):
            w.add_document(range(1 + d, 11 + d))  # 440 tokens: 54 samples of 8 + 1
    return tmp_path


def global_steps(folder: Path, degree: int, steps: int, state: dict[str, int] | None = None) -> list[list[int]]:
    """Sample ids of each optimizer step over all ``degree`` ranks, in global position order."""
    micro, accum = batch_layout(GLOBAL, degree, 2)
    ranks = [
        TokenSampler(
            [str(folder)], seq_len=8, micro_batch=micro, dp_rank=r, dp_size=degree, seed=7, global_batch=GLOBAL
        )
        for r in range(degree)
    ]
    out = []
    for _ in range(steps):
        taken = []
        for s in ranks:
            if state is not None:
                s.load_state_dict(state)
        state = None
        for _ in range(accum):
            for s in ranks:
                s.next_batch()
        for s in ranks:
            taken += s.drain_taken()
        out.append([i for _, _, i in sorted(taken)])
    return out


def test_every_degree_trains_the_same_samples_in_each_step_and_wraps_epochs_alike(small_shards: Path) -> None:
    # 54 samples: 4 steps of 12 per epoch, the tail of 6 skipped on every degree
    want = global_steps(small_shards, 4, 10)
    order0 = np.random.Generator(np.random.PCG64([7, 0])).permutation(54)
    order1 = np.random.Generator(np.random.PCG64([7, 1])).permutation(54)
    assert want[0] == order0[:12].tolist() and want[3] == order0[36:48].tolist() and want[4] == order1[:12].tolist()
    for degree in (1, 2, 3, 6):
        assert global_steps(small_shards, degree, 10) == want


def test_a_position_saved_at_one_degree_continues_at_the_next_sample_on_another(small_shards: Path) -> None:
    want = global_steps(small_shards, 4, 9)
    s = TokenSampler([str(small_shards)], seq_len=8, micro_batch=1, dp_rank=0, dp_size=4, seed=7, global_batch=GLOBAL)
    for _ in range(5 * 3):  # 5 steps of 3 micro-batches: into the second epoch
        s.next_batch()
    state = s.state_dict()
    assert (state["epoch"], state["offset"], state["global_batch"]) == (1, 12, GLOBAL)
    assert global_steps(small_shards, 3, 4, state) == want[5:]
    assert global_steps(small_shards, 2, 4, state) == want[5:]


def test_a_position_of_a_job_that_is_not_elastic_stays_bound_to_its_degree(small_shards: Path) -> None:
    state = TokenSampler([str(small_shards)], seq_len=8, micro_batch=2, dp_rank=0, dp_size=2, seed=7).state_dict()
    other = TokenSampler([str(small_shards)], seq_len=8, micro_batch=2, dp_rank=0, dp_size=4, seed=7, global_batch=8)
    with pytest.raises(ValueError, match="per_step is 8 but the checkpoint was made with 4"):
        other.load_state_dict(state)


# ---- real torchrun ---------------------------------------------------------------------------------


def consumed(workdir: Path) -> dict[tuple[int, int], list[int]]:
    """(attempt, step) -> sample ids of that step over all ranks, in global position order."""
    taken: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for path in sorted(workdir.glob("samples-rank*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            key = (rec["attempt"], rec["step"])
            taken.setdefault(key, []).extend(zip(rec["epoch"], rec["position"], rec["id"], strict=True))
    return {k: [i for _, _, i in sorted(v)] for k, v in sorted(taken.items())}


@pytest.fixture(scope="module")
def elastic_config(base_config: dict[str, Any]) -> dict[str, Any]:
    cfg = {
        **base_config,
        "engine": "fsdp",
        "global_batch": GLOBAL,
        "micro_batch": 2,
        "max_steps": STEPS,
        "record_samples": True,
    }
    cfg.pop("grad_accum")
    return cfg


@pytest.mark.slow
def test_a_job_resumed_on_2_then_3_ranks_trains_the_uninterrupted_samples_and_losses(
    elastic_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    ref = run_job({**elastic_config, "checkpoint_dir": str(tmp_path / "ref-ckpt")}, tmp_path / "ref", nproc=4)
    assert ref.wait() == 0, ref.output()
    want_ids = consumed(tmp_path / "ref")
    assert sorted(want_ids) == [(0, s) for s in range(1, STEPS + 1)]
    flat = [i for ids in want_ids.values() for i in ids]
    assert len(flat) == len(set(flat)) == STEPS * GLOBAL  # one epoch: no id twice

    ckpt, work = tmp_path / "ckpt", tmp_path / "work"
    plan = [(0, 4, 3), (1, 2, 6), (2, 3, None)]  # attempt, degree, preempted at step
    codes = []
    for attempt, degree, stop in plan:
        env = {PREEMPT_AT_STEP_ENV: str(stop)} if stop else {}
        job = run_job({**elastic_config, "checkpoint_dir": str(ckpt), "attempt": attempt}, work, env, nproc=degree)
        job.wait()
        codes.append(json.loads((work / "exit.json").read_text())["exit_code"])
        assert (work / "exit.json").exists(), job.output()
    assert codes == [EXIT_PREEMPTED, EXIT_PREEMPTED, EXIT_FINISHED]

    got_ids = consumed(work)
    assert sorted(got_ids) == [(0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (2, 7), (2, 8), (2, 9)]
    assert list(got_ids.values()) == list(want_ids.values())  # the same ids, step by step: none repeated or skipped

    started = [e for e in read_events(work) if e["type"] == "started"]
    assert [
        (e["step"], e["world_size"], e["resumed_from_degree"], e["micro_batch"], e["grad_accum"], e["global_batch"])
        for e in started
    ] == [
        (0, 4, 4, 1, 3, GLOBAL),
        (3, 2, 4, 2, 3, GLOBAL),
        (6, 3, 2, 2, 2, GLOBAL),
    ]
    progress = [e for e in read_events(work) if e["type"] == "progress"]
    assert [e["step"] for e in progress] == list(range(1, STEPS + 1))  # each step trained once
    want_loss, got_loss = losses(tmp_path / "ref"), losses(work)
    want_lr = {e["step"]: e["lr"] for e in read_events(tmp_path / "ref") if e["type"] == "progress"}
    for s in range(1, STEPS + 1):
        assert abs(got_loss[s] - want_loss[s]) <= ELASTIC_TOL, f"step {s}: {got_loss[s]} vs {want_loss[s]}"
        assert {e["step"]: e["lr"] for e in progress}[s] == want_lr[s]  # the LR schedule continued exactly
    assert {e["step"]: e["tokens_seen"] for e in progress}[STEPS] == STEPS * GLOBAL * elastic_config["seq_len"]

    # a degree that does not divide the global batch: exit 64 naming the allowed degrees, checkpoints untouched
    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    before = sorted(p.name for p in bad.iterdir())
    job = run_job(
        {**elastic_config, "checkpoint_dir": str(bad), "global_batch": 9, "attempt": 3}, tmp_path / "bad-work", nproc=2
    )
    job.wait()
    exit_event = read_events(tmp_path / "bad-work")[-1]
    assert (exit_event["reason"], exit_event["exit_code"]) == ("failed", EXIT_CONFIG_ERROR)
    assert "global batch 9 does not split over data-parallel degree 2" in exit_event["message"]
    assert "(allowed: 1, 3, 9)" in exit_event["message"]
    assert sorted(p.name for p in bad.iterdir()) == before


@pytest.mark.slow
def test_no_thread_outlives_an_async_saving_run_nor_a_resume_at_its_last_step(
    base_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    """Issue 31 item 2 (part): a run with asynchronous interval saves, then a run that resumes at its last step
    and trains nothing, each end with no non-daemon thread alive on any rank after ``close()``."""
    from instances.runtime.__main__ import THREADS_REPORT_ENV

    cfg = {
        **base_config,
        "max_steps": 3,
        "checkpoint_every_steps": 1,
        "async_save": True,
        "checkpoint_dir": str(tmp_path / "ckpt"),
    }
    for n in (1, 2):
        work = tmp_path / f"work{n}"
        job = run_job(cfg, work, {THREADS_REPORT_ENV: "1"})
        assert job.wait() == 0, job.output()
        assert [json.loads((work / f"threads-rank{r}.json").read_text()) for r in (0, 1)] == [[], []]
        started = [e for e in read_events(work) if e["type"] == "started"]
        assert [e["step"] for e in started] == [0 if n == 1 else 3]
    assert [e["step"] for e in read_events(tmp_path / "work2") if e["type"] == "progress"] == []  # trained nothing
