"""``runportal``'s Ctrl-C on the local backend (``instances.services.local_jobs_suspend``): the stop is
recorded as a suspension, not as the user's stop — nothing is billed while the portal is down, and a training
job resumes from its checkpoint on the next start. The backend is the in-memory fake (its ``stop`` answers as
the local backend does after SIGTERM: ``stopped`` with exit code 85); the real-process variant is in
``test_interactive_local.py``."""

from __future__ import annotations

from typing import Any

import pytest
from instances_support import FakeBackend, training_job_launch

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_suspended_training_job_stops_billing_at_shutdown_and_resumes_on_the_next_start(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.models import Instance, JobAttempt
    from instances.services import instances_reconcile, local_jobs_suspend

    job = training_job_launch(
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks
    )
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile()  # the fake backend answers "running"
    assert Instance.objects.get(pk=job.instance_id).status == "running"
    first = job.attempts.get()

    assert local_jobs_suspend(grace_s=1) == [first.handle]
    assert fake_backend.stopped == [first.handle]
    first.refresh_from_db()
    job.refresh_from_db()
    inst = Instance.objects.get(pk=job.instance_id)
    assert (first.state, first.message_code, inst.status, inst.status_reason_code) == (
        "preempted",
        "suspended_at_shutdown",
        "preempted",
        "suspended_at_shutdown",
    )
    assert (job.outcome, job.next_resume_at, job.crash_count) == ("", first.ended_at, 0)
    assert inst.run_segments.get().ended_at == first.ended_at  # billing stops at shutdown
    assert local_jobs_suspend(grace_s=1) == []  # nothing left to stop; nothing recorded twice

    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile()  # the next start
    second = JobAttempt.objects.get(job=job, number=2)
    assert (second.resume_from_step, fake_backend.submitted[-1].attempt) == (-1, 2)  # the newest checkpoint
    assert Instance.objects.get(pk=job.instance_id).status in ("provisioning", "running")
