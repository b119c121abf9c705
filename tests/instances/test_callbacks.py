"""The runtime's callback endpoint: job-attempt token only, events stored once per (job, attempt, seq),
metrics / checkpoints / state applied once, requests answered."""

from __future__ import annotations

import json
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
    job = training_job_launch(
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks, name="j"
    )
    return job


def post(client: Any, job_id: int, token: str | None, body: Any) -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
    return client.post(
        f"/api/v1/runtime/jobs/{job_id}/events", data=json.dumps(body), content_type="application/json", **headers
    )


def token_of(job: Any, number: int = 1) -> str:
    from instances.services import attempt_token

    return attempt_token(job.attempts.get(number=number))


BATCH = {
    "attempt": 1,
    "events": [
        {"seq": 1, "type": "started", "time": "2026-03-01T08:00:00Z", "step": 0, "world_size": 2},
        {
            "seq": 2,
            "type": "progress",
            "time": "2026-03-01T08:00:01Z",
            "step": 1,
            "loss": 6.5,
            "lr": 1e-4,
            "tokens_per_s": 900.0,
            "tokens_seen": 128,
        },
        {
            "seq": 3,
            "type": "progress",
            "time": "2026-03-01T08:00:02Z",
            "step": 2,
            "loss": 6.25,
            "lr": 2e-4,
            "tokens_per_s": 950.0,
            "tokens_seen": 256,
        },
        {
            "seq": 4,
            "type": "checkpoint",
            "time": "2026-03-01T08:00:03Z",
            "step": 2,
            "path": "/c/step-00000002",
            "bytes": 4096,
            "loss": 6.25,
        },
    ],
}


def test_events_update_metrics_checkpoints_and_state_once_even_when_resent(client: Any, job: Any) -> None:
    from instances.models import InstanceRunSegment, JobEvent, JobMetric
    from instances.selectors import loss_curve

    for _ in range(2):  # the runtime resends until a 2xx: the second time changes nothing
        resp = post(client, job.pk, token_of(job), BATCH)
        assert resp.status_code == 200
        assert resp.json() == {"checkpoint_requested": False, "stop_requested": False}
    job.refresh_from_db()
    assert JobEvent.objects.filter(job=job).count() == 4
    assert list(JobMetric.objects.filter(job=job).values_list("step", "loss", "tokens_per_s")) == [
        (1, 6.5, 900.0),
        (2, 6.25, 950.0),
    ]
    assert [(p.step, p.loss) for p in loss_curve(job)] == [(1, 6.5), (2, 6.25)]
    assert list(job.checkpoints.values_list("step", "location", "size_bytes", "complete")) == [
        (2, "/c/step-00000002", 4096, True)
    ]
    assert (job.last_step, job.tokens_seen) == (2, 256)
    assert job.instance.status == "running"
    assert InstanceRunSegment.objects.filter(instance=job.instance, ended_at__isnull=True).count() == 1
    assert job.attempts.get().started_step == 0


def test_a_partly_new_batch_applies_only_the_new_events(client: Any, job: Any) -> None:
    from instances.models import JobMetric

    post(client, job.pk, token_of(job), {"attempt": 1, "events": BATCH["events"][:2]})
    post(client, job.pk, token_of(job), BATCH)
    assert JobMetric.objects.filter(job=job).count() == 2


@pytest.mark.parametrize("token", [None, "", "gpj_wrong", "gpp_abc_def"])
def test_a_missing_or_wrong_token_is_401_and_stores_nothing(client: Any, job: Any, token: str | None) -> None:
    from instances.models import JobEvent

    resp = post(client, job.pk, token, BATCH)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "authentication_failed"
    assert JobEvent.objects.count() == 0


def test_an_attempt_made_before_token_salts_keeps_its_token(client: Any, job: Any) -> None:
    """Attempts made before ``token_salt`` existed (salt empty) keep the token derived from their id,
    instance and number: a retried launch writes the token a runtime started before the upgrade holds, and
    it still reports; the salted token of a new attempt is not accepted for it."""
    import hashlib
    import hmac

    from django.conf import settings

    from instances.models import JobEvent
    from instances.services import attempt_token

    attempt = job.attempts.get(number=1)
    assert len(attempt.token_salt) == 32
    message = f"gpu-portal:attempt:{attempt.pk}:{attempt.instance_id}:{attempt.number}".encode()
    legacy = "gpj_" + hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()
    type(attempt).objects.filter(pk=attempt.pk).update(
        token_salt="", token_sha256=hashlib.sha256(legacy.encode()).hexdigest()
    )
    attempt.refresh_from_db()
    assert attempt_token(attempt) == legacy
    assert post(client, job.pk, legacy, {"attempt": 1, "events": BATCH["events"][:1]}).status_code == 200
    assert JobEvent.objects.filter(job=job).count() == 1

    salted = attempt_token(type(attempt)(pk=attempt.pk, token_salt="0" * 32))
    assert salted != legacy
    assert post(client, job.pk, salted, BATCH).status_code == 401
    assert JobEvent.objects.filter(job=job).count() == 1


def test_a_token_of_another_job_or_attempt_is_refused(
    client: Any, job: Any, funded: Any, alice: Any, licensed: Any
) -> None:
    from instances.models import JobEvent
    from instances.services import LaunchSpec, instance_launch

    other = instance_launch(
        organization=funded,
        user=alice,
        spec=LaunchSpec(
            name="k",
            gpu_type="A100-80G-SXM",
            gpu_count=1,
            dataset_version_ids=[licensed.pk],
            hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 10},
        ),
    ).job
    assert post(client, job.pk, token_of(other), BATCH).status_code == 401
    resp = post(client, job.pk, token_of(job), {**BATCH, "attempt": 2})
    assert resp.status_code == 400
    assert post(client, job.pk, token_of(job), {"attempt": 1, "events": [{"type": "progress"}]}).status_code == 400
    assert (
        client.post(
            f"/api/v1/runtime/jobs/{job.pk}/events",
            data="not json",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token_of(job)}",
        ).status_code
        == 400
    )
    assert JobEvent.objects.count() == 0


def test_checkpoint_now_is_answered_once_and_stop_while_stopping(
    client: Any, job: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import instance_stop, job_checkpoint_now

    post(client, job.pk, token_of(job), BATCH)
    job_checkpoint_now(job=job, acting_user=alice)
    empty = {"attempt": 1, "events": []}
    assert post(client, job.pk, token_of(job), empty).json() == {"checkpoint_requested": True, "stop_requested": False}
    assert post(client, job.pk, token_of(job), empty).json() == {"checkpoint_requested": False, "stop_requested": False}
    instance_stop(instance=job.instance, reason="test", acting_user=alice)  # on_commit not run: still stopping
    assert post(client, job.pk, token_of(job), empty).json() == {"checkpoint_requested": False, "stop_requested": True}


def test_the_dedupe_is_a_database_constraint(job: Any) -> None:
    from django.db import IntegrityError, transaction

    from instances.models import JobEvent

    JobEvent.objects.create(job=job, attempt=1, seq=1, type="started")
    with pytest.raises(IntegrityError), transaction.atomic():
        JobEvent.objects.create(job=job, attempt=1, seq=1, type="started")


def test_an_older_attempt_still_reporting_is_recorded_moves_nothing_and_is_told_to_stop(
    client: Any,
    job: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.backends.base import JobStatus
    from instances.services import instances_reconcile

    post(client, job.pk, token_of(job), BATCH)
    fake_backend.states[job.attempts.get(number=1).handle] = JobStatus("failed", None, "node lost")
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(backend=fake_backend)  # type: ignore[arg-type]
    job.instance.refresh_from_db()
    assert (job.instance.status, job.attempts.count()) == ("provisioning", 2)
    late = {
        "attempt": 1,
        "events": [
            {
                "seq": 5,
                "type": "progress",
                "time": "2026-03-01T08:00:04Z",
                "step": 3,
                "loss": 6.0,
                "lr": 3e-4,
                "tokens_per_s": 990.0,
                "tokens_seen": 384,
            }
        ],
    }
    assert post(client, job.pk, token_of(job, 1), late).json() == {
        "checkpoint_requested": False,
        "stop_requested": True,
    }
    job.instance.refresh_from_db()
    assert job.instance.status == "provisioning"
    assert job.metrics.filter(step=3).count() == 1
