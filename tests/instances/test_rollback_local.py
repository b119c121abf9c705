"""Three rollbacks in a row of a real training job on the local backend (torchrun, 1 CPU process, the tiny
preset on synthetic shards), each to a step the portal lists, each resumed exactly from that step.

Each rollback stops the running attempt, whose stop writes a final checkpoint from the timeline being
abandoned; the portal records it set aside (it is never offered again), the next attempt's runtime moves it
aside on disk, resumes at the chosen step, and its first step's loss equals the original timeline's loss at
that step. Rolling back to the abandoned final checkpoint is refused naming the steps there are, and the job
keeps running. The runtime reports through the end-to-end tests' pumped portal (one thread uses the database).

The stop task, which a Celery worker runs beside the web process in production, is deferred here: run
eagerly in the test's thread it would block the pumped portal for its grace period, so the runtime could not
hear the stop request. The runtime hears it in its next callback's answer, saves and exits ``stopped``; the
deferred task then finds the attempt ended (it is idempotent).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import test_e2e_local as e2e

portal = e2e.portal  # the pumped portal fixture (local backend, its own data folder)
TOL = 1e-6  # as the runtime's resume tests (tests/runtime/runtime_support.py)


def _corpus(data_dir: Path) -> Any:
    """A dataset version with ~100k tokens of deterministic synthetic shards (vocabulary 300), licensed."""
    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter

    lv = license_version_create(
        slug="rb-license",
        name="Rollback corpus license",
        text="Use it for training.",
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    ds = dataset_create(slug="rb-corpus", name="Rollback corpus", domain="legal", description="Synthetic.")
    rel = "datasets/rb-corpus/v1/shards"
    with ShardWriter(data_dir / rel, vocab_size=300, eos_id=0) as w:
        for doc in range(2000):
            w.add_document([1 + (doc * 31 + i * 17 + (i * i) % 7) % 299 for i in range(50)])
    return dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={"documents": 2000, "bytes": 0, "characters": 0, "tokens": 102_000, "language": "en", "files": []},
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path="",
        source_files=[{"file": "synthetic.jsonl", "bytes": 0, "sha256": "0" * 64}],
    )


def _loss(job: Any, attempt: int, step: int) -> float | None:
    from instances.models import JobMetric

    return JobMetric.objects.filter(job=job, attempt__number=attempt, step=step).values_list("loss", flat=True).first()


def _usable(job: Any) -> list[int]:
    from instances.checkpoints import usable_checkpoints

    return sorted(usable_checkpoints(job).values_list("step", flat=True))


@pytest.mark.slow
def test_a_training_job_rolls_back_three_times_in_a_row_and_resumes_exactly_each_time(
    portal: Any, alice: Any, alice_org: Any, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.core.management import call_command
    from instances_support import accept, fund

    from instances import tasks
    from instances.backends.local import LOG_FILE, LocalBackend
    from instances.models import JobAttempt
    from instances.reasons import Reason
    from instances.services import (
        LaunchSpec,
        RollbackError,
        instance_launch,
        instance_stop,
        instance_stop_backend,
        job_rollback,
        nodes_sync,
    )

    deferred: list[int] = []  # stop tasks a worker would run
    monkeypatch.setattr(tasks.stop_instance, "delay", deferred.append)

    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    fund(alice_org, 10)
    version = _corpus(Path(settings.DATA_DIR))
    accept(alice_org, alice, version)
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="rollbacks",
            gpu_type="cpu-local",
            gpu_count=1,
            dataset_version_ids=[version.pk],
            model_preset="tiny",
            engine="ddp",
            checkpoint_every_steps=5,
            checkpoint_every_minutes=0,
            keep_last=30,
            hyperparameters={
                "seq_len": 64,
                "micro_batch": 4,
                "grad_accum": 1,
                "max_steps": 100_000,  # it trains until stopped
                "warmup_steps": 2,
                "lr": 1e-3,
                "log_every_steps": 1,
                "report_interval_s": 0.2,
            },
        ),
    )
    job = inst.job

    def attempt(n: int) -> JobAttempt | None:
        return job.attempts.filter(number=n).exclude(handle="").first()

    def logs() -> str:
        out = []
        for a in job.attempts.exclude(handle="").order_by("number"):
            log = LocalBackend.parse_handle(a.handle)[1] / LOG_FILE
            out.append(log.read_text(errors="replace")[-2000:] if log.exists() else "")
        return "\n".join(out)

    def wait(what: str, predicate: Any, timeout: float = 120) -> Any:
        return e2e.wait_until(portal, predicate, timeout=timeout, what=what, logs=logs)

    def resumed(n: int, at: int) -> None:
        """Attempt ``n`` started from step ``at`` and trained the step after it as the original timeline did."""
        wait(f"attempt {n} to train step {at + 1}", lambda: _loss(job, n, at + 1) is not None)
        a = job.attempts.get(number=n)
        assert (a.resume_from_step, a.started_step) == (at, at)
        got, want = _loss(job, n, at + 1), _loss(job, 1, at + 1)
        assert want is not None and abs(got - want) <= TOL, f"step {at + 1}: {got} vs original {want}"

    def roll_back_to(step: int, *, after: int) -> None:
        """Roll back to the listed ``step``; the stop's final checkpoint is set aside, never listed."""
        assert step in _usable(job)
        job_rollback(job=job, checkpoint_id=job.checkpoints.get(step=step).pk, acting_user=alice)
        group = LocalBackend.parse_handle(job.attempts.get(number=after).handle)[0]

        def next_attempt() -> bool:
            if not e2e._alive(group):
                while deferred:  # the worker's stop task, once the attempt has ended by itself
                    instance_stop_backend(instance_id=deferred.pop())
            return attempt(after + 1) is not None

        wait(f"attempt {after} to stop and attempt {after + 1} to start", next_attempt)
        ended = job.attempts.get(number=after)
        final = job.events.filter(attempt=after, type="exit").values_list("payload", flat=True).first()
        assert final is not None and final["reason"] == "stopped", logs()
        stop_step = int(final["step"])
        saved = job.checkpoints.get(step=stop_step)  # the stop's own checkpoint, from the abandoned timeline
        assert (saved.attempt_id, saved.rolled_back) == (ended.pk, True)
        assert all(s <= step or c == after + 1 for s, c in job.checkpoints.filter(
            complete=True, rolled_back=False, deleted_at__isnull=True
        ).values_list("step", "attempt__number"))  # fmt: skip

    try:
        wait("attempt 1 to train past step 40", lambda: _loss(job, 1, 41) is not None and 40 in _usable(job))

        roll_back_to(10, after=1)  # 1st: to a checkpoint of the original timeline
        resumed(2, 10)
        first_stop = job.checkpoints.filter(attempt__number=1).order_by("-step").first()
        assert first_stop.rolled_back and first_stop.step > 40

        wait("attempt 2 to write step 20 again", lambda: job.checkpoints.filter(step=20, attempt__number=2).exists())
        # the abandoned final checkpoint is not offered; asking for it anyway stops nothing
        with pytest.raises(RollbackError) as refused:
            job_rollback(job=job, checkpoint_id=first_stop.pk, acting_user=alice)
        usable = _usable(job)
        assert str(refused.value) == (
            f"The checkpoint at step {first_stop.step} was set aside by a rollback. Checkpoints you can use: "
            f"steps {', '.join(map(str, usable))}."
        )
        job.refresh_from_db()
        assert (job.instance.status, job.attempts.count(), job.resume_step) == ("running", 2, -1)

        roll_back_to(20, after=2)  # 2nd: to a checkpoint the resumed timeline wrote
        resumed(3, 20)

        roll_back_to(10, after=3)  # 3rd: back to the first target again
        resumed(4, 10)
        job.refresh_from_db()
        assert job.last_step >= 11 and job.attempts.count() == 4
    finally:
        job.instance.refresh_from_db()
        if job.instance.status not in ("stopped", "failed"):
            instance_stop(instance=job.instance, reason=Reason("stopped_by_user", {"user": "test"}), acting_user=None)
        groups = [LocalBackend.parse_handle(a.handle)[0] for a in job.attempts.exclude(handle="")]
        try:
            e2e.wait_until(
                portal, lambda: not any(e2e._alive(g) for g in groups), timeout=60, what="every attempt to exit"
            )
            while deferred:
                instance_stop_backend(instance_id=deferred.pop())
        finally:
            for g in groups:
                if e2e._alive(g):
                    os.killpg(g, signal.SIGKILL)
