"""An interactive instance runs the user's own command on the real local backend (no torchrun)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any) -> Path:
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    return tmp_path / "ws"


def _reconcile_until(predicate: Any, timeout: float = 60) -> None:
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        instances_reconcile()
        time.sleep(0.1)


def test_an_interactive_command_runs_finishes_and_its_output_is_kept(local: Path, alice: Any, alice_org: Any) -> None:
    from instances_support import fund

    from instances.backends.local import LOG_FILE
    from instances.models import Instance, InstanceRunSegment, Node
    from instances.services import LaunchSpec, instance_launch, instances_reconcile

    fund(alice_org, 10)
    instances_reconcile()  # a fresh install: the first reconcile takes the local node from the backend
    assert list(Node.objects.values_list("name", "gpus", "gpu_type__code")) == [("local", 2, "cpu-local")]
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="hello",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=1,
            command=[sys.executable, "-c", "import time; time.sleep(0.5); print('hello from the instance')"],
        ),
    )
    _reconcile_until(lambda: Instance.objects.get(pk=inst.pk).status == "stopped")
    inst.refresh_from_db()
    assert inst.status_reason == "finished"
    assert list(inst.transitions.values_list("to_status", flat=True)) == [
        "scheduling",
        "provisioning",
        "running",
        "stopped",
    ]
    assert InstanceRunSegment.objects.filter(instance=inst, ended_at__isnull=False).count() == 1
    attempt = inst.attempts.get()
    assert (attempt.state, attempt.exit_code) == ("succeeded", 0)
    assert "hello from the instance" in (local / f"instance-{inst.pk}" / "attempt-1" / LOG_FILE).read_text()


def test_stopping_a_running_command_kills_it_and_frees_the_slot(local: Path, alice: Any, alice_org: Any) -> None:
    from instances_support import fund

    from instances.models import Instance
    from instances.selectors import node_views
    from instances.services import LaunchSpec, instance_launch, instance_stop, instances_reconcile

    fund(alice_org, 10)
    instances_reconcile()
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="sleeper",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=2,
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        ),
    )
    _reconcile_until(lambda: Instance.objects.get(pk=inst.pk).status == "running")
    assert [v.gpus_free for v in node_views()] == [0]
    instance_stop(instance=inst, reason="done", acting_user=alice)  # eager Celery: the stop task runs here
    inst.refresh_from_db()
    assert inst.status == "stopped"
    attempt = inst.attempts.get()
    # the user's own program, killed by the stop: no training wording ("checkpoint saved", "preempted")
    assert (attempt.state, attempt.exit_code, attempt.message_code) == ("stopped", -15, "command_stopped")
    assert (inst.status_reason_code, inst.status_reason) == (
        "command_stopped",
        "its processes were ended; the disk (workspace folder and volumes) is kept",
    )
    assert [v.gpus_free for v in node_views()] == [2]


def test_shutting_down_the_embedded_product_leaves_no_process_running(local: Path, alice: Any, alice_org: Any) -> None:
    """What ``manage.py runportal`` does on Ctrl-C after web, worker and beat have exited."""
    import json

    from instances_support import fund

    from instances.models import Instance
    from instances.services import (
        LaunchSpec,
        compute_backend,
        instance_launch,
        instances_reconcile,
        local_jobs_suspend,
    )

    fund(alice_org, 10)
    instances_reconcile()
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="sleeper",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=1,
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        ),
    )
    _reconcile_until(lambda: Instance.objects.get(pk=inst.pk).status == "running")
    attempt = inst.attempts.get()
    state = json.loads((local / f"instance-{inst.pk}" / "attempt-1" / "backend.json").read_text())
    announced: list[int] = []
    assert local_jobs_suspend(grace_s=5, on_start=announced.append) == [attempt.handle]
    assert announced == [1]  # runportal says "stopping 1 local instance(s) and job(s)…" before it waits
    for pid in {int(state["pgid"]), *[int(p) for p in state.get("pids", [])]}:
        # A process that exited but was not reaped yet by its new parent (pid 1, slow on a loaded machine) is a
        # zombie: it runs nothing, and os.kill(pid, 0) still finds it (seen in CI) — read its state instead.
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        assert stat[stat.rfind(")") + 2] in "ZX", f"process {pid} survived: {stat}"
    assert compute_backend().status(attempt.handle).state in ("stopped", "preempted", "failed")
    # recorded as a suspension, not a user stop: the run segment closed (nothing billed while the portal is
    # down) and the instance queued to come back on the next start
    attempt.refresh_from_db()
    inst.refresh_from_db()
    assert (attempt.state, attempt.message_code) == ("preempted", "suspended_at_shutdown_interactive")
    assert inst.status == "scheduling"
    assert list(inst.transitions.order_by("id").values_list("to_status", "reason_code"))[-2:] == [
        ("preempted", "suspended_at_shutdown_interactive"),
        ("scheduling", "waiting_after_preemption"),
    ]
    segment = inst.run_segments.get()
    assert segment.ended_at is not None and segment.ended_at == attempt.ended_at
