"""Idle autostop (issue 14, item 5): an interactive instance with no activity for N minutes is warned (console
and e-mail) W minutes ahead, then stopped with a reason; activity cancels the warning; a training job is
never touched; off means never. Over frozen time against the stand-in backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from instances_support import FakeBackend, accept, fund
from test_launch import counts, spec

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def org(catalog: None, alice_org: Any, alice: Any, dataset_version: Any, time_machine: Any, settings: Any) -> Any:
    """alice's organization at T0 with 10 CNY, a 30-minute idle autostop default, warnings 10 minutes ahead,
    one local node of 4 CPU slots and the dataset's license accepted."""
    from instances.models import GpuType, Node

    time_machine.move_to(T0, tick=False)
    settings.INSTANCES_IDLE_WARNING_MINUTES = 10
    fund(alice_org, 10)
    accept(alice_org, alice, dataset_version)
    alice_org.idle_autostop_minutes = 30
    alice_org.save(update_fields=["idle_autostop_minutes"])
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=4, block="local")
    return alice_org


def _run(org: Any, alice: Any, fake_backend: FakeBackend, capture: Any, **kw: Any) -> Any:
    """Launch and bring to ``running`` at the frozen now."""
    from django.utils import timezone

    from instances.services import instance_launch, instances_reconcile

    with capture(execute=True):
        inst = instance_launch(organization=org, user=alice, spec=spec(gpu_count=1, **kw))
    with capture(execute=True):
        instances_reconcile(now=timezone.now(), backend=fake_backend)  # type: ignore[arg-type]
    inst.refresh_from_db()
    assert inst.status == "running"
    return inst


def _tick(time_machine: Any, at: datetime, capture: Any) -> dict[str, int]:
    from instances.interactive.idle import idle_autostop_tick

    time_machine.move_to(at, tick=False)
    with capture(execute=True):
        return idle_autostop_tick(now=at)


def test_an_idle_instance_is_warned_then_stopped_a_training_job_is_not_and_off_means_never(
    org: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    mailoutbox: list[Any],
) -> None:
    from instances.interactive.idle import autostop_at, minutes_saved

    cap = django_capture_on_commit_callbacks
    shell = {"kind": "interactive", "command": ["sleep", "9999"]}
    idle = _run(org, alice, fake_backend, cap, **shell, name="notebook")
    off = _run(org, alice, fake_backend, cap, **shell, name="off", idle_autostop_minutes=0)
    train = _run(org, alice, fake_backend, cap, name="train", dataset_version_ids=[dataset_version.pk])
    assert (idle.idle_autostop_minutes, off.idle_autostop_minutes, train.idle_autostop_minutes) == (30, 0, None)
    assert autostop_at(idle) == T0 + 30 * MIN

    assert _tick(time_machine, T0 + 19 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 20 * MIN, cap) == {"warned": 1, "stopped": 0}
    assert [(m.to, m.subject) for m in mailoutbox] == [
        (["alice@example.com"], "gpu-portal: notebook will be stopped in 10 minutes (idle)")
    ]
    assert "stopped at 2027-01-04 09:30 UTC" in mailoutbox[0].body
    idle.refresh_from_db()
    assert idle.idle_warned_at == T0 + 20 * MIN
    assert _tick(time_machine, T0 + 21 * MIN, cap) == {"warned": 0, "stopped": 0}  # warned once
    assert _tick(time_machine, T0 + 29 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 30 * MIN, cap) == {"warned": 0, "stopped": 1}
    idle.refresh_from_db()
    assert (idle.status, idle.autostopped_at) == ("stopped", T0 + 30 * MIN)
    assert list(idle.transitions.values_list("to_status", "reason"))[-2:] == [
        ("stopping", "idle autostop: no activity for 30 minutes (limit 30)"),
        ("stopped", "stopped, checkpoint saved"),
    ]
    assert minutes_saved(idle, now=T0 + 75 * MIN) == 45
    assert len(mailoutbox) == 1

    # the training job and the instance with autostop off are never touched
    assert _tick(time_machine, T0 + 600 * MIN, cap) == {"warned": 0, "stopped": 0}
    off.refresh_from_db()
    train.refresh_from_db()
    assert (off.status, off.idle_warned_at, train.status, train.idle_warned_at) == ("running", None, "running", None)
    assert len(mailoutbox) == 1


def test_activity_cancels_the_warning_and_a_late_warning_still_gives_its_minutes(
    org: Any,
    alice: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    mailoutbox: list[Any],
) -> None:
    from instances.interactive import idle as idle_mod
    from instances.interactive.idle import instance_activity_record

    cap = django_capture_on_commit_callbacks
    inst = _run(org, alice, fake_backend, cap, kind="interactive", command=["sleep", "9999"], idle_autostop_minutes=15)
    assert _tick(time_machine, T0 + 5 * MIN, cap) == {"warned": 1, "stopped": 0}
    # alice presses "keep it running" at T0+8: the warning no longer holds, the clock restarts
    instance_activity_record(instance=inst, at=T0 + 8 * MIN, acting_user=alice)
    instance_activity_record(instance=inst, at=T0 + 7 * MIN)  # an older report does not move it back
    inst.refresh_from_db()
    assert inst.last_activity_at == T0 + 8 * MIN
    assert _tick(time_machine, T0 + 12 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 13 * MIN, cap) == {"warned": 1, "stopped": 0}  # 15 − 10 after T0+8

    # a source (as JupyterLab's will be) reports activity at T0+20, cancelling that warning; then the tick is
    # down until T0+50: the warning still comes first and the stop waits the full 10 minutes after it
    idle_mod.ACTIVITY_SOURCES.append(lambda instance: T0 + 20 * MIN)
    try:
        assert _tick(time_machine, T0 + 50 * MIN, cap) == {"warned": 1, "stopped": 0}
        assert _tick(time_machine, T0 + 59 * MIN, cap) == {"warned": 0, "stopped": 0}
        assert _tick(time_machine, T0 + 60 * MIN, cap) == {"warned": 0, "stopped": 1}
    finally:
        idle_mod.ACTIVITY_SOURCES.pop()
    inst.refresh_from_db()
    assert inst.status == "stopped"
    assert inst.transitions.get(to_status="stopping").reason == "idle autostop: no activity for 40 minutes (limit 15)"
    assert len(mailoutbox) == 3


@pytest.mark.parametrize("bad", [-1, 10_081, "30", True])
def test_a_bad_idle_autostop_is_refused_with_nothing_created(org: Any, alice: Any, bad: Any) -> None:
    from instances.services import LaunchError, instance_launch

    before = counts()
    with pytest.raises(LaunchError, match="Idle autostop is 0 \\(off\\) to 10080 minutes") as exc:
        instance_launch(
            organization=org,
            user=alice,
            spec=spec(kind="interactive", command=["sleep", "1"], gpu_count=1, idle_autostop_minutes=bad),
        )
    assert exc.value.field == "idle_autostop_minutes"
    assert counts() == before


def test_the_periodic_reconcile_task_runs_idle_autostop_once_a_minute(
    org: Any, alice: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any, time_machine: Any
) -> None:
    from instances import tasks

    _run(org, alice, fake_backend, django_capture_on_commit_callbacks, kind="interactive", command=["sleep", "9"])
    time_machine.move_to(T0 + 20 * MIN, tick=False)
    assert tasks.reconcile() == {"observed": 1, "resumed": 0, "placed": 0, "warned": 1, "stopped": 0}
    assert tasks.reconcile() == {"observed": 1, "resumed": 0, "placed": 0}  # at most once a minute
