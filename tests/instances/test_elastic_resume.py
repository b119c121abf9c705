"""Elastic resume in the portal (issue 31, item 1): "resume on at least K GPUs" at launch; after a preemption
the scheduler resumes a 4-GPU job on 2 GPUs when allowed and lets it wait when not; each attempt's GPU
count is shown and billed. Against the stand-in backend (the compute boundary), over frozen time, real
database; bad input is refused at launch with nothing written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from instances_support import FakeBackend, accept, fund
from test_launch import counts, spec

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def frozen(catalog: None, alice_org: Any, alice: Any, dataset_version: Any, time_machine: Any) -> Any:
    """Time frozen at T0, alice's organization funded with 10 CNY, the license accepted, one node of 4 slots."""
    from instances.models import GpuType, Node

    time_machine.move_to(T0, tick=False)
    fund(alice_org, 10)
    accept(alice_org, alice, dataset_version)
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=4, block="local")
    return alice_org


def _preempt_by_on_demand(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    backend: FakeBackend,
    capture: Any,
    time_machine: Any,
    elastic_min: int,
) -> tuple[Any, Any]:
    """A 4-slot interruptible job (elastic minimum ``elastic_min``) runs 5 minutes; an on-demand 2-slot
    instance then preempts it. Returns (job instance, on-demand instance) after the next reconcile."""
    from instances.services import instance_launch, instances_reconcile

    def reconcile(at: datetime) -> None:
        time_machine.move_to(at, tick=False)
        with capture(execute=True):
            instances_reconcile(now=at, backend=backend)

    with capture(execute=True):
        cheap = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(
                dataset_version_ids=[dataset_version.pk],
                tier="interruptible",
                checkpoint_every_steps=5,
                gpu_count=4,
                elastic_min_gpus=elastic_min,
            ),
        )
    reconcile(T0)
    time_machine.move_to(T0 + 5 * MIN, tick=False)
    with capture(execute=True):
        urgent = instance_launch(
            organization=frozen, user=alice, spec=spec(kind="interactive", command=["sleep", "600"], gpu_count=2)
        )
    reconcile(T0 + 6 * MIN)
    cheap.refresh_from_db()
    urgent.refresh_from_db()
    return cheap, urgent


def test_a_preempted_4_gpu_job_resumes_on_2_gpus_when_allowed_and_is_billed_for_2(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    client: Any,
) -> None:
    from billing.metering import metering_tick
    from billing.models import UsageRecord
    from instances.services import instances_reconcile
    from instances.services.runtime_config import job_spec_for

    cheap, urgent = _preempt_by_on_demand(
        frozen, alice, dataset_version, fake_backend, django_capture_on_commit_callbacks, time_machine, elastic_min=2
    )
    job = cheap.job
    assert (cheap.elastic_min_gpus, cheap.elastic_gpu_counts) == (2, [2])  # 3 does not divide the batch of 8
    assert job.hyperparameters["global_batch"] == 8 and "grad_accum" not in job.hyperparameters
    assert urgent.status == "running"
    assert cheap.status == "running"  # resumed at once on the 2 free slots, not waiting for 4
    first, second = job.attempts.order_by("number")
    assert (first.state, first.gpu_count, second.gpu_count) == ("preempted", 4, 2)
    assert second.placement == [["local", 2]]
    submitted = job_spec_for(second)
    assert submitted.nproc_per_node == 2
    cfg = json.loads(submitted.config_json or "{}")
    assert (cfg["global_batch"], cfg["grad_accum"], cfg["micro_batch"]) == (8, 1, 2)  # the runtime derives 2 x 2

    # the API and the job page show each attempt's GPU count
    from django.urls import reverse
    from test_checkpoints_and_logs import api_for

    body = api_for(alice).get(f"/api/v1/jobs/{job.pk}").json()
    assert body["elastic_min_gpus"] == 2
    assert [(a["number"], a["gpu_count"]) for a in body["attempts"]] == [(1, 4), (2, 2)]
    client.force_login(alice)
    page = client.get(reverse("job_detail", kwargs={"org": frozen.slug, "pk": job.pk})).content.decode()
    assert '<td data-testid="attempt-gpus">4 GPUs</td>' in page and '<td data-testid="attempt-gpus">2 GPUs</td>' in page

    # minutes 0-4 on 4 slots, minutes 6-9 (started ones) on 2 slots, at 0.36 CNY per slot-hour (interruptible);
    # a reconcile sees it running before the tick, as beat schedules them (metering charges up to a sighting)
    time_machine.move_to(T0 + 9 * MIN, tick=False)
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=T0 + 9 * MIN, backend=fake_backend)
    metering_tick(now=T0 + 9 * MIN)
    rows = list(
        UsageRecord.objects.filter(instance_id=cheap.pk)
        .order_by("minute")
        .values_list("minute", "gpu_count", "amount_micros")
    )
    assert rows == [(T0 + i * MIN, 4, 24_000) for i in range(5)] + [(T0 + (6 + i) * MIN, 2, 12_000) for i in range(4)]


def test_a_preempted_job_without_an_elastic_minimum_waits_for_its_4_gpus(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
) -> None:
    cheap, urgent = _preempt_by_on_demand(
        frozen, alice, dataset_version, fake_backend, django_capture_on_commit_callbacks, time_machine, elastic_min=0
    )
    assert (cheap.elastic_min_gpus, cheap.elastic_gpu_counts) == (0, [])
    assert urgent.status == "running"
    assert cheap.status == "scheduling"
    assert cheap.queue_position == 1
    assert [(a.number, a.state, a.gpu_count) for a in cheap.job.attempts.order_by("number")] == [(1, "preempted", 4)]


def test_a_first_launch_of_an_elastic_job_waits_for_its_full_count(
    frozen: Any, alice: Any, dataset_version: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import instance_launch

    with django_capture_on_commit_callbacks(execute=True):
        instance_launch(
            organization=frozen, user=alice, spec=spec(kind="interactive", command=["sleep", "1"], gpu_count=2)
        )
        job = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], gpu_count=4, elastic_min_gpus=2),
        )
    job.refresh_from_db()
    assert job.status == "scheduling" and job.attempts.count() == 0  # elastic only resumes on fewer


@pytest.mark.parametrize(
    ("kw", "code", "message"),
    [
        (
            {"gpu_count": 2, "elastic_min_gpus": 3},
            "elastic_min_too_large",
            "The elastic minimum of 3 GPUs is larger than the job's 2 GPUs.",
        ),
        (
            {
                "gpu_count": 4,
                "elastic_min_gpus": 3,
                "hyperparameters": {"seq_len": 32, "micro_batch": 2, "max_steps": 10},
            },
            "elastic_no_count",
            "No GPU count from 3 to 3 keeps the global batch of 8 samples (a count must divide it): raise the "
            "elastic minimum or change the batch.",
        ),
        (
            {"gpu_count": 4, "elastic_min_gpus": 2, "engine": "deepspeed"},
            "elastic_engine",
            "Resuming on fewer GPUs needs engine FSDP or DDP; DeepSpeed keeps its own batch size.",
        ),
    ],
)
def test_bad_elastic_input_is_refused_at_launch_and_writes_nothing(
    frozen: Any, alice: Any, dataset_version: Any, kw: dict[str, Any], code: str, message: str
) -> None:
    from instances.services import LaunchError, instance_launch

    before = counts()
    with pytest.raises(LaunchError) as err:
        instance_launch(organization=frozen, user=alice, spec=spec(dataset_version_ids=[dataset_version.pk], **kw))
    assert (err.value.code, str(err.value), err.value.field) == (code, message, "elastic_min_gpus")
    assert counts() == before


def test_a_minimum_whose_gpus_cannot_hold_the_model_is_refused_naming_the_memory(
    frozen: Any, alice: Any, dataset_version: Any
) -> None:
    from instances.models import GpuType
    from instances.services import LaunchError
    from instances.services.launch import elastic_plan

    a100 = GpuType.objects.exclude(memory_gib=0).order_by("memory_gib").last()
    assert a100 is not None
    s = spec(gpu_type=a100.code, gpu_count=8, model_preset="7b", engine="fsdp", elastic_min_gpus=1)
    with pytest.raises(LaunchError) as err:
        elastic_plan(s, gpu_type=a100)
    assert err.value.code == "elastic_min_too_small"
    assert str(err.value) == (
        f"1 GPUs of {a100.code} cannot hold model 7b with fsdp: it needs 100.4 GiB of weights, gradients and "
        f"optimizer state per GPU, a GPU has {a100.memory_gib} GiB."
    )
    hyper, allowed = elastic_plan(
        spec(gpu_type=a100.code, gpu_count=8, model_preset="7b", engine="fsdp", elastic_min_gpus=2), gpu_type=a100
    )
    assert allowed == [4, 2] and hyper["global_batch"] == 16  # 2 x 1 x 8; 8 = a whole node is the job itself
