"""Helpers shared by the instances tests (imported by their conftest and test modules)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any


def fund(organization: Any, cny: int) -> None:
    """Give ``organization`` ``cny`` CNY of trial credit."""
    from django.utils import timezone

    from billing.choices import GrantKind
    from billing.services import credit_grant_create

    credit_grant_create(
        organization=organization,
        amount_micros=cny * 1_000_000,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key=f"test-fund:{organization.pk}:{cny}",
    )


def accept(organization: Any, user: Any, version: Any) -> Any:
    """``user`` accepts the license of ``version`` for ``organization``."""
    from datasets.selectors import required_license_version
    from datasets.services import agreement_accept, text_sha256

    lv = required_license_version(version)
    return agreement_accept(
        organization=organization,
        user=user,
        license_version=lv,
        shown_text_sha256=text_sha256(lv.text),
        ip="127.0.0.1",
        user_agent="pytest",
        dataset=version.dataset,
    )


class FakeBackend:
    """A stand-in for the compute backend boundary: records calls, reports what the test sets."""

    name = "fake"

    def __init__(self) -> None:
        self.submitted: list[Any] = []
        self.stopped: list[str] = []
        self.states: dict[str, Any] = {}

    def submit(self, spec: Any) -> str:
        handle = f"fake:{spec.job_id}:{spec.attempt}"
        if handle not in [f"fake:{s.job_id}:{s.attempt}" for s in self.submitted]:
            self.submitted.append(spec)
        return handle

    def status(self, handle: str) -> Any:
        from instances.backends.base import JobStatus

        return self.states.get(handle, JobStatus("running"))

    def stop(self, handle: str, grace_s: float) -> Any:
        from instances.backends.base import JobStatus

        self.stopped.append(handle)
        self.states[handle] = JobStatus("stopped", 85, "stopped, checkpoint saved")
        return self.states[handle]

    def request_checkpoint(self, handle: str) -> int:
        return 0

    def inventory(self) -> list[Any]:
        return []


def training_job_launch(
    *, organization: Any, user: Any, version: Any, capture: Any, name: str = "legal-tiny", max_steps: int = 10
) -> Any:
    """alice's usual test job: ``name`` on 2 CPU slots training on dataset ``version`` (seq_len 32, micro-batch 2,
    ``max_steps``), launched with the on-commit callbacks run (``capture`` is pytest-django's
    ``django_capture_on_commit_callbacks``). Returns the ``TrainingJob``."""
    from instances.services import LaunchSpec, instance_launch

    with capture(execute=True):
        inst = instance_launch(
            organization=organization,
            user=user,
            spec=LaunchSpec(
                name=name,
                gpu_type="cpu-local",
                gpu_count=2,
                dataset_version_ids=[version.pk],
                hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": max_steps},
            ),
        )
    return inst.job
