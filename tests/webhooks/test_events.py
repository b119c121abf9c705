"""Each event type comes from a real change made by the existing services (instance transitions, the backend's
reports of an attempt, the runtime's checkpoint callback, a resume, a low balance, a credited Stripe top-up, a
failed app call) and produces one delivery to a subscribed endpoint, with the documented ``data``."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.core.management import call_command

from billing.choices import TopUpStatus
from billing.models import TopUp
from billing.notices import low_balance_notices
from billing.payments import stripe_event_handle, stripe_event_record
from instances.backends.base import JobStatus
from instances.choices import AttemptState, InstanceStatus
from instances.models import GpuType, Instance, JobAttempt, TrainingJob
from instances.services import attempt_observe, attempt_token, instance_transition, job_events_receive, job_resume
from portal.marketplace import calls, services
from portal.marketplace.choices import ServingKind
from portal.webhooks.models import WebhookDelivery, WebhookEvent

pytestmark = pytest.mark.django_db
S = InstanceStatus


def _events(since=0):
    """(type, data) of the events recorded after id ``since``, each with exactly one delivery to ``hook``."""
    rows = list(WebhookEvent.objects.filter(pk__gt=since).order_by("id"))
    assert all(e.deliveries.count() == 1 for e in rows)
    return [(e.type, e.data) for e in rows]


def _last_id():
    return WebhookEvent.objects.order_by("-id").values_list("pk", flat=True).first() or 0


@pytest.fixture
def running(alice_org):
    """A training instance running attempt 1 of its job (set up directly: the tests drive what follows)."""
    call_command("seed_catalog", verbosity=0)
    instance = Instance.objects.create(
        organization=alice_org,
        name="llama",
        gpu_type=GpuType.objects.get(code="cpu-local"),
        gpu_count=1,
        status=S.RUNNING,
    )
    job = TrainingJob.objects.create(instance=instance, organization=alice_org, name="llama")
    attempt = JobAttempt.objects.create(
        instance=instance, job=job, number=1, backend="fake", handle="fake:1:1", state=AttemptState.RUNNING
    )
    attempt.token_sha256 = hashlib.sha256(attempt_token(attempt).encode()).hexdigest()
    attempt.save(update_fields=["token_sha256"])
    return instance, job, attempt


def test_an_instance_transition_is_sent_to_the_receiver(
    alice_org, hook, httpserver, django_capture_on_commit_callbacks
):
    call_command("seed_catalog", verbosity=0)
    instance = Instance.objects.create(
        organization=alice_org, name="box", gpu_type=GpuType.objects.get(code="cpu-local"), gpu_count=1
    )
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    with django_capture_on_commit_callbacks(execute=True):
        instance_transition(instance=instance, to=S.SCHEDULING, reason="queued")
    data = {"instance_id": instance.pk, "name": "box", "from": "pending", "to": "scheduling", "reason": "queued"}
    assert _events() == [("instance.state_changed", data)]
    ((request, _response),) = httpserver.log
    assert json.loads(request.get_data())["data"] == data
    assert WebhookDelivery.objects.get().status == "succeeded"


def test_preemption_resume_checkpoint_and_finish_each_produce_their_event(running, hook, client):
    instance, job, attempt = running
    attempt_observe(attempt=attempt, status=JobStatus("preempted", None, "capacity reclaimed"))
    common = {"job_id": job.pk, "instance_id": instance.pk}
    assert _events() == [
        (
            "instance.state_changed",
            {
                "instance_id": instance.pk,
                "name": "llama",
                "from": "running",
                "to": "preempted",
                "reason": "capacity reclaimed",
            },
        ),
        ("job.preempted", {**common, "attempt": 1, "message": "capacity reclaimed"}),
    ]
    since = _last_id()
    job.refresh_from_db()
    assert job_resume(job=job, reason="automatic resume")
    assert _events(since) == [
        (
            "instance.state_changed",
            {
                "instance_id": instance.pk,
                "name": "llama",
                "from": "preempted",
                "to": "scheduling",
                "reason": "automatic resume",
            },
        ),
        ("job.resumed", {**common, "reason": "automatic resume", "resume_step": -1}),
    ]

    since = _last_id()
    Instance.objects.filter(pk=instance.pk).update(status=S.RUNNING)
    second = JobAttempt.objects.create(
        instance=instance, job=job, number=2, backend="fake", handle="fake:1:2", state=AttemptState.RUNNING
    )
    second.token_sha256 = hashlib.sha256(attempt_token(second).encode()).hexdigest()
    second.save(update_fields=["token_sha256"])
    body = {
        "attempt": 2,
        "events": [{"seq": 1, "type": "checkpoint", "step": 40, "path": "/c/step-40", "bytes": 4096, "loss": 3.5}],
    }
    for _ in range(2):  # the runtime resends: the checkpoint is committed (and sent) once
        job_events_receive(job_id=job.pk, token=attempt_token(second), body=body)
    assert _events(since) == [
        ("job.checkpoint_committed", {**common, "attempt": 2, "step": 40, "size_bytes": 4096, "loss": 3.5})
    ]

    since = _last_id()
    attempt_observe(attempt=second, status=JobStatus("succeeded", 0, ""))
    assert _events(since) == [
        (
            "instance.state_changed",
            {"instance_id": instance.pk, "name": "llama", "from": "running", "to": "stopped", "reason": "finished"},
        ),
        ("job.finished", {**common, "attempt": 2}),
    ]


def test_a_crash_produces_job_failed(running, hook):
    instance, job, attempt = running
    attempt_observe(attempt=attempt, status=JobStatus("failed", 1, "CUDA error"))
    attempt_observe(attempt=attempt, status=JobStatus("failed", 1, "CUDA error"))  # reported twice: sent once
    assert _events() == [
        (
            "instance.state_changed",
            {"instance_id": instance.pk, "name": "llama", "from": "running", "to": "failed", "reason": "CUDA error"},
        ),
        (
            "job.failed",
            {"job_id": job.pk, "instance_id": instance.pk, "attempt": 1, "exit_code": 1, "message": "CUDA error"},
        ),
    ]


def test_a_low_balance_produces_one_event_per_threshold_crossed(alice_org, hook, settings):
    settings.LOW_BALANCE_THRESHOLDS = ["50", "10"]
    assert low_balance_notices(organizations=[alice_org]) == 2
    assert low_balance_notices(organizations=[alice_org]) == 0  # still open: not again
    assert _events() == [
        ("wallet.balance_low", {"balance_micros": 0, "threshold_micros": 50_000_000, "currency": "CNY"}),
        ("wallet.balance_low", {"balance_micros": 0, "threshold_micros": 10_000_000, "currency": "CNY"}),
    ]


def test_a_credited_top_up_produces_one_event_even_when_stripe_repeats_itself(alice, alice_org, hook):
    topup = TopUp.objects.create(
        organization=alice_org,
        user=alice,
        amount_micros=50_000_000,
        idempotency_key="topup:x",
        status=TopUpStatus.CHECKOUT_OPEN,
        stripe_session_id="cs_test_1",
    )
    session = {
        "id": "cs_test_1",
        "payment_status": "paid",
        "amount_total": 5000,
        "currency": "cny",
        "payment_intent": "pi_1",
        "client_reference_id": str(topup.pk),
        "metadata": {"topup_id": str(topup.pk), "organization_id": str(alice_org.pk)},
    }
    for event_id in ("evt_stripe_1", "evt_stripe_2"):  # the same payment reported twice
        row, _ = stripe_event_record(
            event={"id": event_id, "type": "checkout.session.completed", "data": {"object": session}}
        )
        stripe_event_handle(row=row)
    assert _events() == [
        ("wallet.top_up_credited", {"top_up_id": topup.pk, "amount_micros": 50_000_000, "currency": "CNY"})
    ]


def test_a_failed_app_call_produces_app_call_failed(alice, alice_org, hook):
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Echo",
        category="general",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        price_per_call_micros=0,
    )
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO)
    with pytest.raises(services.CallFailed):
        calls.app_invoke(
            app=app, caller=alice_org, user=alice, payload={"text": "x"}, fail_after_reserve=RuntimeError("boom")
        )
    (event,) = _events()
    assert event[0] == "app_call.failed"
    assert event[1] == {
        "call_id": app.calls.get().pk,
        "app": app.slug,
        "error_code": "backend_error",
        "message": "boom",
    }
