"""A rank lost without an exit code (SIGKILL, OOM killer) is a node failure: the job resumes without
charging the crash budget or waiting out a crash back-off (issue 16). The backend side — the launcher
turning a rank that died without a code into exit 88 — is tested in tests/runtime/test_rank_loss.py."""

from __future__ import annotations

from typing import Any

from instances_support import FakeBackend
from test_launch import spec

from instances.backends.base import JobStatus, state_for_exit_code
from instances.runtime.exitcodes import EXIT_RANK_LOST, EXIT_STORE_UNAVAILABLE


def test_exit_codes_of_lost_ranks_and_unavailable_stores_map_to_preempted() -> None:
    assert state_for_exit_code(EXIT_RANK_LOST) == (
        "preempted",
        "rank lost (killed without an exit code: SIGKILL, OOM killer or node loss)",
    )
    assert state_for_exit_code(EXIT_STORE_UNAVAILABLE) == (
        "preempted",
        "checkpoint store unavailable (transient I/O errors): resumed later",
    )
    assert state_for_exit_code(EXIT_RANK_LOST, stop_requested=True) == ("stopped", "stopped (exit code 88)")


def test_a_lost_rank_resumes_at_once_with_the_crash_count_unchanged(
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    settings: Any,
) -> None:
    from django.utils import timezone

    from instances.services import instance_launch, instances_reconcile

    settings.INSTANCES_RESUME_BACKOFF_S = 30
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        inst = instance_launch(organization=funded, user=alice, spec=spec(dataset_version_ids=[licensed.pk]))
    job = inst.job
    for n, code in enumerate([EXIT_RANK_LOST, EXIT_STORE_UNAVAILABLE, EXIT_RANK_LOST], start=1):
        attempt = job.attempts.order_by("-number").first()
        # a backend that reports the code as a failure (not every backend maps it): still no crash
        fake_backend.states[attempt.handle] = JobStatus("failed", code, f"exit code {code}")
        with django_capture_on_commit_callbacks(execute=True):
            instances_reconcile(now=now, backend=fake_backend)  # type: ignore[arg-type]
        job.refresh_from_db()
        assert (job.instance.status, job.preempt_count, job.crash_count, job.attempts.count()) == (
            "provisioning",
            n,
            0,
            n + 1,
        )
    assert job.attempts.get(number=1).exit_code == EXIT_RANK_LOST
