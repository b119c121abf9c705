"""The runtime under real torchrun (2 processes, gloo on CPU) on real legal text.

Scenarios share one uninterrupted DDP reference run (module fixture) which also reports to a portal
that is down at first and comes back while the job trains.
"""

from __future__ import annotations

import json
import pickle
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from runtime_support import (
    REPO,
    Job,
    PortalStub,
    alive,
    assert_same_losses,
    free_port,
    losses,
    read_events,
    wait_for_step,
)

from instances.runtime.checkpoint import METADATA_HASHES_ATTR, STEP_RE, CheckpointStore
from instances.runtime.exitcodes import (
    EXIT_FINISHED,
    EXIT_PREEMPTED,
    EXIT_RESUME_REFUSED,
    EXIT_STORE_UNAVAILABLE,
)
from instances.runtime.train import PAUSE_BEFORE_COMMIT_ENV

pytestmark = pytest.mark.slow
MAX_STEPS = 12


def step_dirs(ckpt: Path) -> list[str]:
    """Names of the step-N folders (not those set aside)."""
    return sorted(p.name for p in ckpt.iterdir() if STEP_RE.match(p.name))


@pytest.fixture(scope="module")
def reference(base_config: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Uninterrupted DDP run of MAX_STEPS steps; its portal is unreachable until step 3."""
    root = tmp_path_factory.mktemp("reference")
    port = free_port()
    cfg = {
        **base_config,
        "max_steps": MAX_STEPS,
        "checkpoint_dir": str(root / "ckpt"),
        "callback_url": f"http://127.0.0.1:{port}/cb",
        "job_token": "job-token",
    }
    job = Job(cfg, root / "work")
    wait_for_step(job, 3)
    portal = PortalStub(port=port)  # the portal comes back
    try:
        rc = job.wait()
    finally:
        portal.close()
    assert rc == 0, job.output()
    return {
        "cfg": cfg,
        "root": root,
        "losses": losses(root / "work"),
        "events": read_events(root / "work"),
        "portal": portal.events(),
    }


def test_reference_run_trains_and_finishes(reference: dict[str, Any]) -> None:
    assert sorted(reference["losses"]) == list(range(1, MAX_STEPS + 1))
    assert reference["losses"][MAX_STEPS] < reference["losses"][1]
    progress = [e for e in reference["events"] if e["type"] == "progress"]
    assert {(e["mfu"], e["mfu_note_code"], "mfu_device" in e) for e in progress} == {(None, "cpu", False)}
    exit_event = reference["events"][-1]
    assert (exit_event["type"], exit_event["reason"], exit_event["exit_code"]) == (
        "exit",
        "finished",
        EXIT_FINISHED,
    )


def test_portal_outage_does_not_stop_training_and_events_arrive_later(reference: dict[str, Any]) -> None:
    logged = [{k: v for k, v in e.items() if k != "attempt"} for e in reference["events"]]
    assert reference["portal"] == logged  # every event, once, in seq order
    assert [e["seq"] for e in logged] == list(range(1, len(logged) + 1))


def test_keep_last_k_keeps_the_newest_complete_checkpoints(reference: dict[str, Any]) -> None:
    ckpt = reference["root"] / "ckpt"
    assert step_dirs(ckpt) == ["step-00000009", "step-00000012"]  # saves at 3, 6, 9, 12; keep_last=2
    reported = [e["step"] for e in reference["events"] if e["type"] == "checkpoint"]
    assert reported == [3, 6, 9, 12]
    pruned = [(e["step"], e["path"]) for e in reference["events"] if e["type"] == "checkpoint_pruned"]
    assert pruned == [(3, str(ckpt / "step-00000003")), (6, str(ckpt / "step-00000006"))]
    kinds = [e["type"] for e in reference["events"] if e["type"].startswith("checkpoint")]
    assert kinds == ["checkpoint", "checkpoint", "checkpoint", "checkpoint_pruned", "checkpoint", "checkpoint_pruned"]
    for name in step_dirs(ckpt):
        assert (ckpt / name / ".metadata").exists() and (ckpt / name / "manifest.json").exists()


def test_a_resumed_run_finishes_the_pruning_a_killed_run_left_undone(
    reference: dict[str, Any], base_config: dict[str, Any], tmp_path: Path, run_job: Callable[..., Job]
) -> None:
    """A run killed between a commit and its keep-last-K prune (a lost node) leaves one checkpoint too
    many; the next run prunes it once it has resumed, so such kills do not pile checkpoints up."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)  # steps 9 and 12: one too many for keep_last=1
    cfg = {**base_config, "max_steps": MAX_STEPS + 1, "keep_last": 1, "checkpoint_dir": str(ckpt)}
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = [e for e in read_events(tmp_path / "work") if e["type"] in ("started", "checkpoint", "checkpoint_pruned")]
    assert [(e["type"], e["step"]) for e in events] == [
        ("started", 12),
        ("checkpoint_pruned", 9),  # before any save of this run
        ("checkpoint", 13),
        ("checkpoint_pruned", 12),
    ]
    assert events[1]["path"] == str(ckpt / "step-00000009")
    assert step_dirs(ckpt) == ["step-00000013"]


@pytest.mark.parametrize("engine", ["ddp", "fsdp"])
def test_sigterm_saves_exits_preempted_and_resume_is_exact(
    engine: str,
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    cfg = {**base_config, "engine": engine, "max_steps": MAX_STEPS, "checkpoint_dir": str(tmp_path / "ckpt")}
    if engine == "ddp":
        want = reference["losses"]
    else:  # FSDP2 shards differently from DDP: compare against its own uninterrupted run
        job = run_job({**cfg, "checkpoint_dir": str(tmp_path / "ref-ckpt")}, tmp_path / "ref")
        assert job.wait() == 0, job.output()
        want = losses(tmp_path / "ref")
    job = run_job(cfg, tmp_path / "work")
    wait_for_step(job, 4)
    job.signal_group(signal.SIGTERM)  # the preemption notice, to torchrun and the workers
    job.wait()
    exit_event = read_events(tmp_path / "work")[-1]
    assert (exit_event["type"], exit_event["reason"], exit_event["exit_code"]) == (
        "exit",
        "preempted",
        EXIT_PREEMPTED,
    )
    stopped_at = exit_event["step"]
    assert 4 <= stopped_at < MAX_STEPS
    assert f"step-{stopped_at:08d}" in step_dirs(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / f"step-{stopped_at:08d}" / ".metadata").exists()
    exit_file = json.loads((tmp_path / "work" / "exit.json").read_text())
    assert (exit_file["exit_code"], exit_file["step"]) == (EXIT_PREEMPTED, stopped_at)

    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    started = [e for e in events if e["type"] == "started"]
    assert [e["step"] for e in started] == [0, stopped_at]
    assert_same_losses(losses(tmp_path / "work"), want, range(stopped_at + 1, MAX_STEPS + 1))


def test_sigkill_during_a_save_resumes_from_the_previous_complete_checkpoint(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    cfg = {
        **base_config,
        "max_steps": MAX_STEPS,
        "checkpoint_dir": str(tmp_path / "ckpt"),
        "async_save": False,
    }
    job = run_job(cfg, tmp_path / "work", env={PAUSE_BEFORE_COMMIT_ENV: "6"})
    job.wait_for_file(tmp_path / "work" / "paused-before-commit")
    ranks = job.rank_pids()
    assert len(ranks) == 2
    job.kill_all()  # torchrun and both workers (each in a session of its own), as a node loss would
    assert job.processes() == []
    assert [pid for pid in ranks if alive(pid)] == []
    ckpt = tmp_path / "ckpt"
    assert step_dirs(ckpt) == ["step-00000003", "step-00000006"]
    assert (ckpt / "step-00000003" / ".metadata").exists()
    # shards and their manifest written, never committed: the manifest alone does not make it complete
    assert (ckpt / "step-00000006" / "manifest.json").exists()
    assert not (ckpt / "step-00000006" / ".metadata").exists()
    assert list((ckpt / "step-00000006").glob("*.distcp"))
    assert [(f.step, f.complete) for f in CheckpointStore(str(ckpt)).list()] == [(3, True), (6, False)]

    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    assert [e["step"] for e in events if e["type"] == "started"] == [0, 3]
    assert any(e["type"] == "warning" and "partial checkpoint" in e["message"] for e in events)
    assert_same_losses(losses(tmp_path / "work"), reference["losses"], range(4, MAX_STEPS + 1))
    assert step_dirs(ckpt) == ["step-00000009", "step-00000012"]


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("shard", "fails its SHA-256 check"),  # caught by the manifest's checksums
        ("metadata", ".metadata cannot be read"),  # the commit marker itself truncated
    ],
)
def test_a_damaged_checkpoint_is_named_and_the_previous_one_is_used(
    damage: str,
    expected: str,
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    newest = ckpt / "step-00000012"
    if damage == "shard":
        shard = sorted(newest.glob("*.distcp"))[-1]
        data = bytearray(shard.read_bytes())
        data[len(data) // 2] ^= 0xFF  # one flipped byte inside a tensor
        shard.write_bytes(bytes(data))
    else:
        (newest / "manifest.json").unlink()
        meta = newest / ".metadata"
        meta.write_bytes(meta.read_bytes()[: meta.stat().st_size // 2])
    cfg = {**base_config, "max_steps": MAX_STEPS, "checkpoint_dir": str(ckpt)}
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert any(str(newest) in w and expected in w for w in warnings), warnings
    assert [e["step"] for e in events if e["type"] == "started"] == [9]
    assert_same_losses(losses(tmp_path / "work"), reference["losses"], range(10, MAX_STEPS + 1))
    assert len(list(ckpt.glob("step-00000012.corrupt-*"))) == 1  # set aside, kept for inspection
    assert step_dirs(ckpt)[-1] == "step-00000012"  # trained again into a fresh folder


def test_a_checkpoint_from_another_data_parallel_degree_is_refused(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    cfg = {**base_config, "max_steps": MAX_STEPS + 2, "checkpoint_dir": str(ckpt)}
    job = run_job(cfg, tmp_path / "work", nproc=1)
    job.wait()
    exit_event = read_events(tmp_path / "work")[-1]
    assert (exit_event["reason"], exit_event["exit_code"]) == ("failed", EXIT_RESUME_REFUSED)
    assert "data-parallel degree 2, this run has 1" in exit_event["message"]
    assert step_dirs(ckpt) == ["step-00000009", "step-00000012"]  # nothing deleted or set aside


def folders(ckpt: Path) -> list[str]:
    """Every entry of the checkpoint root (set-aside folders included)."""
    return sorted(p.name for p in ckpt.iterdir())


def test_every_complete_checkpoint_has_a_manifest_with_hashes_also_inside_its_commit_marker(
    reference: dict[str, Any],
) -> None:
    ckpt = reference["root"] / "ckpt" / "step-00000012"
    manifest = json.loads((ckpt / "manifest.json").read_text())
    shards = sorted(p.name for p in ckpt.glob("*.distcp"))
    assert sorted(manifest["files"]) == shards and len(shards) >= 2  # both ranks' shards
    assert manifest["commit"] == ".metadata"
    assert manifest["bytes"] == sum((ckpt / n).stat().st_size for n in shards)
    meta = pickle.loads((ckpt / ".metadata").read_bytes())  # noqa: S301 - our own test checkpoint
    assert getattr(meta, METADATA_HASHES_ATTR) == manifest["files"]
    assert not list(ckpt.glob(".sha256-rank*"))  # the per-rank tables are merged and removed before the commit
    assert CheckpointStore(str(ckpt.parent)).verify(12, checksum=True) == []


def test_a_changed_micro_batch_is_refused_with_87_and_touches_no_checkpoint(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    before = folders(ckpt)
    cfg = {**base_config, "max_steps": MAX_STEPS + 2, "checkpoint_dir": str(ckpt)}
    job = run_job({**cfg, "micro_batch": 4}, tmp_path / "work")
    job.wait()
    exit_event = read_events(tmp_path / "work")[-1]
    assert (exit_event["reason"], exit_event["exit_code"]) == ("failed", EXIT_RESUME_REFUSED)
    assert "micro_batch=2" in exit_event["message"] and "micro_batch=4" in exit_event["message"]
    assert str(ckpt / "step-00000012") in exit_event["message"]
    assert folders(ckpt) == before == ["step-00000009", "step-00000012"]  # nothing set aside or deleted

    job = run_job(cfg, tmp_path / "work")  # the original config resumes where it was, not from step 0
    assert job.wait() == 0, job.output()
    assert [e["step"] for e in read_events(tmp_path / "work") if e["type"] == "started"] == [12]


def test_a_flipped_shard_in_a_checkpoint_without_its_manifest_is_detected(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    newest = ckpt / "step-00000012"
    (newest / "manifest.json").unlink()
    (ckpt / "step-00000009" / "manifest.json").unlink()  # this one is intact: its manifest is rebuilt
    shard = sorted(newest.glob("*.distcp"))[-1]
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    cfg = {**base_config, "max_steps": MAX_STEPS, "checkpoint_dir": str(ckpt)}
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    warnings = [e["message"] for e in events if e["type"] == "warning"]
    assert f"checkpoint {newest}: file {shard.name} fails its SHA-256 check" in warnings
    assert (
        f"checkpoint {ckpt / 'step-00000009'}: manifest.json was missing; rebuilt from the hashes in .metadata"
        in warnings
    )
    assert [e["step"] for e in events if e["type"] == "started"] == [9]
    assert_same_losses(losses(tmp_path / "work"), reference["losses"], range(10, MAX_STEPS + 1))
    assert len(list(ckpt.glob("step-00000012.corrupt-*"))) == 1


def test_an_old_checkpoint_without_any_hashes_is_reported_unverifiable_and_resumed(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    newest = ckpt / "step-00000012"
    (newest / "manifest.json").unlink()
    meta = pickle.loads((newest / ".metadata").read_bytes())  # noqa: S301 - our own test checkpoint
    for attr in (METADATA_HASHES_ATTR, METADATA_HASHES_ATTR + "_extra"):
        delattr(meta, attr)  # as an older runtime wrote it
    (newest / ".metadata").write_bytes(pickle.dumps(meta))
    cfg = {**base_config, "max_steps": MAX_STEPS, "checkpoint_dir": str(ckpt)}
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    assert any(e["type"] == "warning" and f"checkpoint {newest} is unverifiable" in e["message"] for e in events)
    assert [e["step"] for e in events if e["type"] == "started"] == [12]


@pytest.mark.parametrize("fails", [2, -1])  # two failed reads, then the store answers; a store that never does
def test_a_store_that_fails_reads_is_retried_and_never_sets_checkpoints_aside(
    fails: int,
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    counter = tmp_path / "fails"
    counter.write_text(str(fails))
    env = {
        "PYTHONPATH": f"{Path(__file__).parent / 'flaky_store'}:{REPO}",
        "FLAKY_STORE_FAILS": str(counter),
    }
    cfg = {**base_config, "max_steps": MAX_STEPS, "checkpoint_dir": f"flaky://{ckpt}", "store_retries": 3,
           "store_backoff_s": 0.1}  # fmt: skip
    job = run_job(cfg, tmp_path / "work", env=env)
    rc = job.wait()
    events = read_events(tmp_path / "work")
    retried = [e["message"] for e in events if e["type"] == "warning" and "store error" in e["message"]]
    assert folders(ckpt) == ["step-00000009", "step-00000012"]  # nothing set aside, whatever happened
    if fails > 0:
        assert rc == 0, job.output()
        assert len(retried) == 2 and "injected read error" in retried[0] and "(attempt 1 of 3)" in retried[0]
        assert [e["step"] for e in events if e["type"] == "started"] == [12]
    else:
        exit_event = events[-1]
        assert (exit_event["reason"], exit_event["exit_code"]) == ("failed", EXIT_STORE_UNAVAILABLE)
        assert "kept failing after 3 attempts" in exit_event["message"]
        assert len(retried) == 3
        assert not [e for e in events if e["type"] == "started"]


def test_fresh_start_sets_every_checkpoint_aside_once_and_trains_from_step_0(
    reference: dict[str, Any],
    base_config: dict[str, Any],
    tmp_path: Path,
    run_job: Callable[..., Job],
) -> None:
    ckpt = tmp_path / "ckpt"
    shutil.copytree(reference["root"] / "ckpt", ckpt)
    cfg = {**base_config, "max_steps": 3, "checkpoint_dir": str(ckpt), "fresh_start": True, "attempt": 4}
    job = run_job(cfg, tmp_path / "work")
    assert job.wait() == 0, job.output()
    events = read_events(tmp_path / "work")
    assert [e["step"] for e in events if e["type"] == "started"] == [0]
    assert_same_losses(losses(tmp_path / "work"), reference["losses"], range(1, 3))  # same start, other schedule
    (aside,) = [p for p in ckpt.glob("fresh-start-*") if p.is_dir()]
    assert sorted(p.name for p in aside.iterdir()) == ["step-00000009", "step-00000012"]
    assert step_dirs(ckpt) == ["step-00000003"]

    job = run_job({**cfg, "max_steps": 5}, tmp_path / "work")  # same attempt again: resumes, no second fresh start
    assert job.wait() == 0, job.output()
    assert [e["step"] for e in read_events(tmp_path / "work") if e["type"] == "started"] == [0, 3]
