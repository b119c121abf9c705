"""The interruptible tier on the real local backend with torchrun (slow): an interruptible training job
trains; an on-demand instance that needs both CPU slots is launched; the scheduler gives the job the
preemption notice, its attempt gets SIGTERM, the runtime saves a checkpoint at the current step and exits,
the instance becomes ``preempted`` (not a crash) and the on-demand instance starts; when it stops the job
resumes from that checkpoint and finishes with one loss point per step 1…N, none repeated, none skipped.
Every minute it ran is charged at the interruptible price (the exact amounts over frozen time are in
``test_interruptible.py``). Callbacks are served by the pumped portal of ``test_e2e_local``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from test_e2e_local import PumpedPortal, portal, wait_until  # noqa: F401 (portal is a fixture)

MAX_STEPS = 200


def _corpus(data_dir: Path) -> Any:
    """A dataset version with 400 documents of token ids in a real shard folder, its license accepted."""
    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter

    rel = "datasets/ints/v1/shards"
    with ShardWriter(data_dir / rel, vocab_size=300, eos_id=0) as w:
        for i in range(400):
            w.add_document([1 + (i * 7 + j * 13) % 290 for j in range(40)])
    lv = license_version_create(
        slug="ints-license",
        name="Ints license",
        text="Use it.",
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    ds = dataset_create(slug="ints", name="Ints", domain="legal", description="Integers.")
    return dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={"documents": 400, "bytes": 1, "characters": 1, "tokens": 16_400, "language": "en", "files": []},
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path=f"{rel}/tokenizer.json",
        source_files=[{"file": "ints.jsonl", "bytes": 1, "sha256": "0" * 64}],
    )


@pytest.mark.slow
@pytest.mark.engine_independent(
    "the process-level half (SIGTERM, the checkpoint at the current step, exact resume under torchrun); the "
    "scheduling, preemption and billing rows are proven on PostgreSQL by tests/instances/test_interruptible.py"
)
def test_an_on_demand_launch_preempts_an_interruptible_job_which_resumes_exactly_once_per_step(
    portal: PumpedPortal,  # noqa: F811
    alice: Any,
    alice_org: Any,
    settings: Any,
) -> None:
    from django.core.management import call_command
    from django.utils import timezone
    from instances_support import accept, fund

    from billing.metering import metering_tick
    from billing.models import UsageRecord
    from instances.models import Instance, JobMetric, TrainingJob
    from instances.selectors import newest_complete_checkpoint, preemption_summary
    from instances.services import LaunchSpec, instance_launch, instance_stop, nodes_sync

    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    fund(alice_org, 10)
    version = _corpus(Path(settings.DATA_DIR))
    accept(alice_org, alice, version)

    cheap = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="cheap",
            gpu_type="cpu-local",
            gpu_count=1,
            tier="interruptible",
            dataset_version_ids=[version.pk],
            engine="ddp",
            checkpoint_every_minutes=0,
            checkpoint_every_steps=40,
            hyperparameters={
                "seq_len": 32,
                "micro_batch": 2,
                "max_steps": MAX_STEPS,
                "warmup_steps": 2,
                "lr": 1e-3,
                "log_every_steps": 1,
                "report_interval_s": 0.2,
            },
        ),
    )
    job = cheap.job
    wait_until(portal, lambda: TrainingJob.objects.get(pk=job.pk).last_step >= 3, timeout=120, what="steps")

    # an on-demand instance needs both slots: notice → SIGTERM → checkpoint → preempted; it starts
    urgent = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="urgent",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=2,
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        ),
    )
    wait_until(
        portal, lambda: Instance.objects.get(pk=urgent.pk).status == "running", timeout=90, what="the on-demand start"
    )
    job.refresh_from_db()
    saved = newest_complete_checkpoint(job)
    first = job.attempts.get(number=1)
    assert (first.state, first.exit_code) == ("preempted", 85)
    assert (job.preempt_count, job.crash_count) == (1, 0)
    assert saved is not None and saved.step < MAX_STEPS
    assert Instance.objects.get(pk=cheap.pk).status == "scheduling"  # waits for capacity behind on-demand work

    # capacity returns: the job resumes from the checkpoint saved on SIGTERM and finishes
    instance_stop(instance=Instance.objects.get(pk=urgent.pk), reason="done", acting_user=alice)
    wait_until(portal, lambda: TrainingJob.objects.get(pk=job.pk).outcome == "finished", timeout=240, what="the finish")
    job.refresh_from_db()
    second = job.attempts.get(number=2)
    assert second.started_step == saved.step
    steps = list(JobMetric.objects.filter(job=job).order_by("step", "attempt_id").values_list("step", flat=True))
    assert steps == list(range(1, MAX_STEPS + 1))  # each step once: nothing re-run, nothing skipped
    assert set(JobMetric.objects.filter(job=job, step__gt=saved.step).values_list("attempt__number", flat=True)) == {2}

    # charged at the interruptible price (0.60 CNY per slot-hour less 40 %) for every minute it ran
    metering_tick(now=timezone.now())
    prices = set(UsageRecord.objects.filter(instance_id=cheap.pk).values_list("price_per_gpu_hour_micros", flat=True))
    assert prices == {360_000}
    summary = preemption_summary(Instance.objects.get(pk=cheap.pk))
    assert (summary["preemptions"], summary["steps_rerun"], summary["minutes_rerun"]) == (1, 0, 0)
    assert summary["minutes_billed"] == UsageRecord.objects.filter(instance_id=cheap.pk).count() >= 2
