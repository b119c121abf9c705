"""A first launch that teaches: a CPU slot's defaults (a step within seconds, a checkpoint within a minute), and
GPU types without capacity shown as unavailable with a reason and refused at launch with nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from instances_support import FakeBackend, fund

CPU_HYPER = {
    "seq_len": 256,
    "micro_batch": 4,
    "grad_accum": 1,
    "max_steps": 1000,
    "lr": 3e-4,
    "warmup_steps": 20,
    "seed": 0,
    "log_every_steps": 1,
    "report_interval_s": 2.0,
}
GPU_HYPER = {
    "seq_len": 1024,
    "micro_batch": 8,
    "grad_accum": 1,
    "max_steps": 1000,
    "lr": 3e-4,
    "warmup_steps": 100,
    "seed": 0,
}


def counts() -> tuple[int, ...]:
    from billing.models import LedgerTransaction
    from datasets.models import DatasetMount
    from instances.models import Instance, JobAttempt, TrainingJob
    from portal.models import AuditEvent

    return (
        Instance.objects.count(),
        TrainingJob.objects.count(),
        JobAttempt.objects.count(),
        DatasetMount.objects.count(),
        LedgerTransaction.objects.count(),
        AuditEvent.objects.filter(action="instances.instance.launch").count(),
    )


def launch(org: Any, user: Any, version: Any, **kw: Any) -> Any:
    from instances.services import LaunchSpec, instance_launch

    return instance_launch(
        organization=org,
        user=user,
        spec=LaunchSpec(
            **{"name": "j", "gpu_type": "cpu-local", "gpu_count": 2, "dataset_version_ids": [version.pk], **kw}
        ),
    )


# --- a: launch defaults ---------------------------------------------------------------------------------------
def test_a_cpu_job_left_to_its_defaults_reports_every_step_and_checkpoints_every_minute(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        job = launch(funded, alice, licensed).job
    assert job.hyperparameters == CPU_HYPER
    assert (job.checkpoint_every_minutes, job.checkpoint_every_steps, job.keep_last) == (1, 100, 3)
    cfg = json.loads(fake_backend.submitted[0].config_json)
    assert {k: cfg[k] for k in CPU_HYPER} == CPU_HYPER
    assert (cfg["checkpoint_every_minutes"], cfg["checkpoint_every_steps"], cfg["keep_last"]) == (1.0, 100, 3)


def test_given_values_win_over_the_defaults_and_a_gpu_keeps_the_gpu_defaults(
    funded: Any, alice: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    job = launch(funded, alice, licensed, hyperparameters={"seq_len": 64}, checkpoint_every_minutes=5).job
    assert job.hyperparameters == {**CPU_HYPER, "seq_len": 64}
    assert (job.checkpoint_every_minutes, job.checkpoint_every_steps) == (5, 100)
    gpu = launch(funded, alice, licensed, gpu_type="A100-80G-SXM", gpu_count=1).job
    assert gpu.hyperparameters == GPU_HYPER
    assert (gpu.checkpoint_every_minutes, gpu.checkpoint_every_steps, gpu.keep_last) == (30, 0, 3)


def test_the_api_left_to_its_defaults_gets_the_cpu_defaults(
    alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from rest_framework.test import APIClient

    from instances.models import TrainingJob

    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post(
        "/api/v1/jobs", {"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [licensed.pk]}, format="json"
    )
    assert resp.status_code == 201, resp.content
    job = TrainingJob.objects.get(pk=resp.json()["id"])
    assert (job.hyperparameters, job.checkpoint_every_minutes, job.checkpoint_every_steps) == (CPU_HYPER, 1, 100)


def test_the_launch_page_starts_with_the_cpu_defaults(client: Any, alice: Any, funded: Any, nodes: Any) -> None:
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/jobs/new/").content.decode()
    for name, value in (
        ("seq_len", "256"),
        ("micro_batch", "4"),
        ("max_steps", "1000"),
        ("checkpoint_every_minutes", "1"),
        ("checkpoint_every_steps", "100"),
        ("keep_last", "3"),
    ):
        assert f'name="{name}" value="{value}"' in html, name
    assert '<option value="cpu-local" selected>' in html


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"checkpoint_every_minutes": -1}, "checkpoint_every_minutes must be between 0 and 10080."),
        ({"checkpoint_every_steps": 1.5}, "checkpoint_every_steps must be a whole number."),
        ({"hyperparameters": {"log_every_steps": 0}}, "log_every_steps must be between 1 and 1000000."),
        ({"hyperparameters": ["seq_len"]}, "hyperparameters must be an object of name: value."),
    ],
)
def test_bad_values_beside_the_defaults_are_refused_with_nothing_written(
    funded: Any, alice: Any, licensed: Any, nodes: Any, changes: dict[str, Any], message: str
) -> None:
    from instances.services import LaunchError

    before = counts()
    with pytest.raises(LaunchError) as err:
        launch(funded, alice, licensed, **changes)
    assert (err.value.code, str(err.value)) == ("invalid", message)
    assert counts() == before


# --- b: GPU types without capacity ----------------------------------------------------------------------------
def test_the_launch_page_disables_gpu_types_without_a_ready_node_and_says_why(
    client: Any, alice: Any, funded: Any, nodes: Any
) -> None:
    from instances.models import Node

    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/jobs/new/").content.decode()
    assert (
        '<option value="H100-80G-SXM" disabled>H100-80G-SXM — unavailable: no node of this type is ready</option>'
        in html
    )
    assert '<option value="A100-80G-SXM">A100-80G-SXM</option>' in html
    assert 'data-testid="no-capacity"' not in html
    # the local node is cordoned: the page starts on the first type that has capacity
    Node.objects.filter(name="local").update(state="cordoned")
    html = client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    assert '<option value="cpu-local" disabled>cpu-local — unavailable: no node of this type is ready</option>' in html
    assert '<option value="A100-80G-SXM" selected>A100-80G-SXM</option>' in html
    # no ready node at all: a banner says why nothing can start
    Node.objects.update(state="cordoned")
    html = client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    assert 'data-testid="no-capacity"' in html


def test_a_launch_on_a_type_without_capacity_is_refused_in_the_console_with_nothing_made(
    client: Any, alice: Any, funded: Any, licensed: Any, nodes: Any
) -> None:
    client.force_login(alice)
    before = counts()
    resp = client.post(
        f"/o/{funded.slug}/instances/new/",
        {"gpu_type": "H100-80G-SXM", "gpu_count": 1, "mode": "container", "command": "sleep 1"},
    )
    # a disabled option still posted (an old page, a script) gets the reason, not a queue that never moves
    assert resp.status_code == 400
    assert (
        "H100-80G-SXM has no capacity now: no node of this type is ready. Choose another GPU type."
        in resp.content.decode()
    )
    assert counts() == before


def test_a_launch_larger_than_the_inventory_is_refused_through_the_api(
    alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from rest_framework.test import APIClient

    fund(funded, 100)  # 24 A100 for the first 10 minutes cost 32.00 CNY: the balance is not the refusal
    api = APIClient()
    api.force_authenticate(alice)
    before = counts()
    body = {"gpu_type": "A100-80G-SXM", "gpu_count": 24, "dataset_version_ids": [licensed.pk]}
    resp = api.post("/api/v1/jobs", body, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"] == {
        "code": "no_capacity",
        "message": "A100-80G-SXM cannot take 24 GPUs: its 2 ready nodes have 16 in all (at most 8 on one node). "
        "Ask for fewer GPUs or choose another GPU type.",
        "details": {"field": "gpu_type"},
    }
    resp = api.post("/api/v1/jobs", {**body, "gpu_type": "H100-80G-SXM", "gpu_count": 1}, format="json")
    assert (resp.status_code, resp.json()["error"]["code"]) == (400, "no_capacity")
    assert counts() == before
    # a request that fits but waits for busy capacity is still queued, not refused
    resp = api.post("/api/v1/jobs", {**body, "gpu_count": 16}, format="json")
    assert (resp.status_code, resp.json()["status"]) == (201, "provisioning")


def test_capacity_by_type_counts_ready_nodes_only(nodes: Any) -> None:
    from instances.capacity import capacity_by_type
    from instances.models import Node

    Node.objects.filter(name="a100-1").update(state="draining")
    got = {code: (c.ready_nodes, c.gpus, c.largest_node, c.available) for code, c in capacity_by_type().items()}
    assert got["cpu-local"] == (1, 2, 2, True)
    assert got["A100-80G-SXM"] == (1, 8, 8, True)
    assert got["H100-80G-SXM"] == (0, 0, 0, False)


# --- i: the job page's speed, ETA, one status line, started vs resumed ------------------------------------------
def test_the_job_page_shows_steps_per_second_eta_one_status_line_and_how_each_attempt_started(
    client: Any,
    alice: Any,
    funded: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from instances.models import Instance, JobAttempt, JobMetric, TrainingJob

    with django_capture_on_commit_callbacks(execute=True):
        job = launch(funded, alice, licensed, hyperparameters={"max_steps": 1000}).job
    attempt = job.attempts.get()
    t0 = timezone.now() - timedelta(seconds=60)
    for step in (1, 101, 201):  # 200 steps in 80 s = 2.50 steps/s; 799 steps left = 320 s (5:20)
        JobMetric.objects.create(
            job=job,
            attempt=attempt,
            step=step,
            loss=5.0,
            lr=1e-4,
            tokens_per_s=1.0,
            reported_at=t0 + timedelta(seconds=(step - 1) * 0.4),
        )
    TrainingJob.objects.filter(pk=job.pk).update(last_step=201)
    Instance.objects.filter(pk=job.instance.pk).update(status="running", status_reason="running")
    JobAttempt.objects.filter(pk=attempt.pk).update(started_step=0)
    JobAttempt.objects.create(instance=job.instance, job=job, number=2, backend="fake", started_step=150)
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert '<span data-testid="job-steps-per-s">2.50 steps/s</span>' not in html  # the newest attempt has no metrics
    JobAttempt.objects.filter(number=2).delete()
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert '<span data-testid="job-steps-per-s">2.50 steps/s</span>' in html
    assert '<span data-testid="job-eta">ETA 0:05:20</span>' in html
    assert 'data-testid="job-status-reason"' not in html  # "Running running" reads "Running"
    assert '<td data-testid="attempt-start">started from the beginning</td>' in html
    JobAttempt.objects.create(instance=job.instance, job=job, number=2, backend="fake", started_step=150)
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert '<td data-testid="attempt-start">resumed from step 150</td>' in html
    assert 'data-testid="job-eta"' not in html
    Instance.objects.filter(pk=job.instance.pk).update(
        status="failed",
        status_reason="crashed (exit code 87)",
        status_reason_code="crashed",  # as the reconcile stores it (instances.reasons)
        status_reason_params={"exit_code": 87},
    )
    html = client.get(f"/o/{funded.slug}/jobs/{job.pk}/").content.decode()
    assert '<span class="muted" data-testid="job-status-reason">crashed (exit code 87)</span>' in html


def test_the_image_choice_explains_its_default(client: Any, alice: Any, funded: Any, nodes: Any) -> None:
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    assert '<option value="" selected>Default image (the platform&#x27;s PyTorch image)</option>' in html
    assert "---------" not in html


def test_a_double_submitted_launch_form_launches_once(
    client: Any, alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    """The launch page carries one submit key per rendered form: the same form posted twice (a double click,
    a re-sent request) makes one instance and both answers lead to it; a fresh page is a new launch."""
    import re

    from instances.models import Instance

    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    key = re.search(r'name="submit_key" value="([0-9a-f]{32})"', page)
    assert key is not None
    form = {"gpu_type": "cpu-local", "gpu_count": 1, "mode": "container", "command": "sleep 60", "name": "nb1"}
    first = client.post(f"/o/{funded.slug}/instances/new/", {**form, "submit_key": key.group(1)})
    second = client.post(f"/o/{funded.slug}/instances/new/", {**form, "submit_key": key.group(1)})
    inst = Instance.objects.get(organization=funded)
    assert (first.status_code, second.status_code) == (302, 302)
    assert first["Location"] == second["Location"] == f"/o/{funded.slug}/instances/{inst.pk}/"
    assert inst.idempotency_key == f"console:{key.group(1)}"
    other = re.search(
        r'name="submit_key" value="([0-9a-f]{32})"', client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    )
    assert other is not None and other.group(1) != key.group(1)
    client.post(f"/o/{funded.slug}/instances/new/", {**form, "submit_key": other.group(1)})
    assert Instance.objects.filter(organization=funded).count() == 2
