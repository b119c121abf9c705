"""Console and API of instances and jobs: outsiders get 404 everywhere (actions included), creates honour
``Idempotency-Key``, refusals use the error envelope, pages render the quote, charts and checkpoints."""

from __future__ import annotations

from typing import Any

import pytest
from instances_support import FakeBackend, training_job_launch


@pytest.fixture
def job(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> Any:
    from instances.models import Checkpoint, JobMetric

    job = training_job_launch(
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks
    )
    attempt = job.attempts.get()
    for step, loss in ((1, 7.5), (2, 7.0), (3, 6.5)):
        JobMetric.objects.create(job=job, attempt=attempt, step=step, loss=loss, lr=1e-4, tokens_per_s=1000.0 + step)
    Checkpoint.objects.create(job=job, attempt=attempt, step=2, location="/c/step-2", size_bytes=2048, loss=7.0)
    return job


def console_routes(org: str, job: Any) -> list[tuple[str, str]]:
    inst, cp = job.instance.pk, job.checkpoints.get().pk
    return [
        ("get", f"/o/{org}/instances/"),
        ("get", f"/o/{org}/instances/new/"),
        ("get", f"/o/{org}/instances/quote/"),
        ("get", f"/o/{org}/instances/{inst}/"),
        ("get", f"/o/{org}/instances/{inst}/stop/"),
        ("post", f"/o/{org}/instances/{inst}/stop/"),
        ("get", f"/o/{org}/jobs/"),
        ("get", f"/o/{org}/jobs/new/"),
        ("get", f"/o/{org}/jobs/{job.pk}/"),
        ("get", f"/o/{org}/jobs/{job.pk}/stop/"),
        ("post", f"/o/{org}/jobs/{job.pk}/stop/"),
        ("get", f"/o/{org}/jobs/{job.pk}/restart/"),
        ("post", f"/o/{org}/jobs/{job.pk}/restart/"),
        ("post", f"/o/{org}/jobs/{job.pk}/checkpoint/"),
        ("get", f"/o/{org}/jobs/{job.pk}/logs/"),
        ("get", f"/o/{org}/jobs/{job.pk}/rollback/{cp}/"),
        ("post", f"/o/{org}/jobs/{job.pk}/rollback/{cp}/"),
    ]


def api_routes(job: Any) -> list[tuple[str, str]]:
    inst, cp = job.instance.pk, job.checkpoints.get().pk
    return [
        ("get", f"/api/v1/instances/{inst}"),
        ("post", f"/api/v1/instances/{inst}/stop"),
        ("get", f"/api/v1/jobs/{job.pk}"),
        ("post", f"/api/v1/jobs/{job.pk}/stop"),
        ("post", f"/api/v1/jobs/{job.pk}/restart"),
        ("post", f"/api/v1/jobs/{job.pk}/checkpoint"),
        ("get", f"/api/v1/jobs/{job.pk}/checkpoints"),
        ("get", f"/api/v1/jobs/{job.pk}/logs"),
        ("get", f"/api/v1/jobs/{job.pk}/metrics"),
        ("post", f"/api/v1/jobs/{job.pk}/rollback"),
        ("get", f"/api/v1/jobs/{job.pk}/checkpoints?cp={cp}"),
    ]


def test_charlie_gets_404_on_every_console_route_and_nothing_changes(
    client: Any, charlie: Any, job: Any, funded: Any
) -> None:
    from instances.models import Instance
    from portal.selectors import organization_for_user

    client.force_login(charlie)
    charlie_org = organization_for_user(user=charlie).slug
    for method, url in console_routes(funded.slug, job):
        assert getattr(client, method)(url).status_code == 404, url
    # alice's objects under charlie's own organization are 404 too
    for method, url in console_routes(charlie_org, job):
        if "/new/" in url or "/quote/" in url or url.endswith(("/instances/", "/jobs/")):
            continue
        assert getattr(client, method)(url).status_code == 404, url
    assert Instance.objects.get(pk=job.instance.pk).status == "provisioning"
    job.refresh_from_db()
    assert (job.checkpoint_requested, job.resume_step) == (False, -1)


def test_charlie_gets_404_on_every_api_route_and_sees_empty_lists(charlie: Any, job: Any) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(charlie)
    for method, url in api_routes(job):
        resp = (
            getattr(api, method)(url, {"checkpoint": job.checkpoints.get().pk}, format="json")
            if method == "post"
            else api.get(url)
        )
        assert resp.status_code == 404, url
        assert resp.json()["error"]["code"] == "not_found"
    assert api.get("/api/v1/jobs").json()["results"] == []
    assert api.get("/api/v1/instances").json()["results"] == []
    assert Instance.objects.get(pk=job.instance.pk).status == "provisioning"


def test_bob_a_member_sees_the_organizations_job(bob: Any, job: Any, funded: Any) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(bob)
    resp = api.get(f"/api/v1/jobs/{job.pk}", {"organization": funded.slug})
    assert resp.status_code == 200
    assert resp.json()["name"] == "legal-tiny"


def test_api_create_honours_the_idempotency_key(
    alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(alice)
    body = {
        "gpu_type": "A100-80G-SXM",
        "gpu_count": 1,
        "dataset_version_ids": [licensed.pk],
        "hyperparameters": {"seq_len": 32, "micro_batch": 2, "max_steps": 10},
    }
    first = api.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    other = api.post("/api/v1/jobs", body, format="json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]
    assert Instance.objects.filter(organization=funded).count() == 2
    assert first.json()["status"] == "provisioning"
    inst = api.post(
        "/api/v1/instances", {"gpu_type": "A100-80G-SXM", "gpu_count": 1, "command": ["sleep", "60"]}, format="json"
    )
    assert inst.status_code == 201
    assert (inst.json()["kind"], inst.json()["command"]) == ("interactive", ["sleep", "60"])


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"gpu_type": "B200", "gpu_count": 1}, 400, "unknown_gpu_type"),
        ({"gpu_type": "A100-80G-SXM", "gpu_count": 0}, 400, "invalid_gpu_count"),
        ({"gpu_type": "A100-80G-SXM", "gpu_count": 1025}, 400, "invalid_gpu_count"),
        ({"gpu_type": "H100-80G-SXM", "gpu_count": 64}, 402, "insufficient_funds"),
    ],
)
def test_api_refusals_use_the_envelope_and_create_nothing(
    alice: Any, funded: Any, licensed: Any, nodes: Any, body: dict[str, Any], status: int, code: str
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post("/api/v1/jobs", {**body, "dataset_version_ids": [licensed.pk]}, format="json")
    assert resp.status_code == status
    assert resp.json()["error"]["code"] == code
    assert Instance.objects.count() == 0


def test_api_rollback_to_an_unknown_checkpoint_is_400(alice: Any, job: Any) -> None:
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post(f"/api/v1/jobs/{job.pk}/rollback", {"checkpoint": 999999}, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"] == {
        "code": "unknown_checkpoint",
        "message": "Unknown checkpoint.",
        "details": {"field": "checkpoint"},
    }
    assert api.get(f"/api/v1/jobs/{job.pk}/checkpoints").json()[0]["step"] == 2
    assert [p["step"] for p in api.get(f"/api/v1/jobs/{job.pk}/metrics").json()["points"]] == [1, 2, 3]


def test_the_quote_shows_price_runway_and_queue(client: Any, alice: Any, funded: Any, nodes: Any) -> None:
    client.force_login(alice)
    resp = client.get(
        f"/o/{funded.slug}/instances/quote/", {"gpu_type": "cpu-local", "gpu_count": 2}, HTTP_HX_REQUEST="true"
    )
    html = resp.content.decode()
    # 2 slots at 0.60 CNY per slot-hour = 1.20 CNY/h; 10.00 CNY lasts exactly 500 minutes
    assert '<span data-testid="price-per-hour">1.20</span>' in html
    assert '<span data-testid="runway">your balance lasts 8 h 20 min</span>' in html
    assert '<span data-testid="queue">Starts now on local.</span>' in html
    resp = client.get(f"/o/{funded.slug}/instances/quote/", {"gpu_type": "A100-80G-SXM", "gpu_count": 24})
    assert (
        '<p class="error">A100-80G-SXM cannot take 24 GPUs: its 2 ready nodes have 16 in all (at most 8 on one '
        "node). Ask for fewer GPUs or choose another GPU type.</p>"
    ) in resp.content.decode()
    from instances.models import GpuQuota

    GpuQuota.objects.create(organization=funded, gpus=8)
    resp = client.get(f"/o/{funded.slug}/instances/quote/", {"gpu_type": "A100-80G-SXM", "gpu_count": 16})
    assert "Waits:" in resp.content.decode()


def test_the_job_page_draws_the_curve_and_lists_checkpoints(client: Any, alice: Any, funded: Any, job: Any) -> None:
    client.force_login(alice)
    resp = client.get(f"/o/{funded.slug}/jobs/{job.pk}/")
    html = resp.content.decode()
    assert resp.status_code == 200
    assert html.count("<svg") == 2 and 'aria-label="Loss"' in html and "<polyline" in html
    assert f"/o/{funded.slug}/jobs/{job.pk}/rollback/{job.checkpoints.get().pk}/" in html
    partial = client.get(f"/o/{funded.slug}/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in partial and 'data-testid="job-step"' in partial


def test_console_launch_form_launches_a_job(
    client: Any, alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from instances.models import TrainingJob

    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/jobs/new/")
    assert page.status_code == 200 and "Corpus v1" in page.content.decode()
    resp = client.post(
        f"/o/{funded.slug}/jobs/new/",
        {
            "name": "from-console",
            "gpu_type": "cpu-local",
            "gpu_count": 2,
            "mode": "container",
            "datasets": [licensed.pk],
            "model_preset": "tiny",
            "engine": "ddp",
            "seq_len": 64,
            "micro_batch": 2,
            "grad_accum": 1,
            "max_steps": 20,
            "lr": "0.001",
            "checkpoint_every_minutes": 30,
            "checkpoint_every_steps": 0,
            "keep_last": 3,
        },
    )
    job = TrainingJob.objects.get(name="from-console")
    assert resp.status_code == 302 and resp["Location"] == f"/o/{funded.slug}/jobs/{job.pk}/"
    assert (job.engine, job.hyperparameters["seq_len"], job.checkpoint_every_minutes) == ("ddp", 64, 30)
    bad = client.post(f"/o/{funded.slug}/jobs/new/", {"gpu_type": "cpu-local", "gpu_count": 0})
    assert bad.status_code == 400


def test_list_pages_and_endpoints_use_a_fixed_number_of_queries(
    client: Any,
    alice: Any,
    funded: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from rest_framework.test import APIClient

    from instances.services import LaunchSpec, instance_launch

    def launch(n: int) -> None:
        for i in range(n):
            instance_launch(
                organization=funded,
                user=alice,
                spec=LaunchSpec(
                    name=f"j{i}",
                    gpu_type="A100-80G-SXM",
                    gpu_count=1,
                    dataset_version_ids=[licensed.pk],
                    hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 10},
                ),
            )

    api = APIClient()
    api.force_authenticate(alice)
    client.force_login(alice)
    urls = ["/api/v1/jobs", "/api/v1/instances"]
    pages = [f"/o/{funded.slug}/jobs/", f"/o/{funded.slug}/instances/"]

    def counts() -> list[int]:
        out = []
        for url in urls:
            with CaptureQueriesContext(connection) as ctx:
                assert api.get(url).status_code == 200
            out.append(len(ctx.captured_queries))
        for url in pages:
            with CaptureQueriesContext(connection) as ctx:
                assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
            out.append(len(ctx.captured_queries))
        return out

    launch(2)
    few = counts()
    launch(6)
    assert counts() == few


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (
            '{"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [%d], "hyperparameters": {"lr": 1e400}}',
            "hyperparameters",
        ),
        (
            '{"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [99999999999999999999]}',
            "dataset_version_ids",
        ),
    ],
)
def test_out_of_range_numbers_are_refused_with_the_envelope(
    alice: Any, funded: Any, licensed: Any, nodes: Any, raw: str, field: str
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(alice)
    body = raw % licensed.pk if "%d" in raw else raw
    resp = api.post("/api/v1/jobs", body, content_type="application/json")
    assert resp.status_code == 400, resp.content[:300]
    error = resp.json()["error"]
    assert field in str(error)
    assert Instance.objects.count() == 0


def test_a_checkpoint_of_a_job_that_is_not_running_is_refused_with_nothing_written(
    alice: Any, job: Any, client: Any
) -> None:
    """A provisioning (or stopped) job has no runtime to ask: the API answers 409 ``not_running``, the console
    says so, and no request is left pending for a later attempt."""
    from rest_framework.test import APIClient

    from instances.models import TrainingJob

    assert job.instance.status == "provisioning"
    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post(f"/api/v1/jobs/{job.pk}/checkpoint")
    assert (resp.status_code, resp.json()["error"]["code"]) == (409, "not_running")
    client.force_login(alice)
    page = client.post(f"/o/{job.organization.slug}/jobs/{job.pk}/checkpoint/", follow=True).content.decode()
    assert "The job is not running: there is nothing to checkpoint now." in page
    assert TrainingJob.objects.get(pk=job.pk).checkpoint_requested is False
