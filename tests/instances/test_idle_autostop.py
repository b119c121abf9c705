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
        ("stopped", "its processes were ended; the disk (workspace folder and volumes) is kept"),
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
    # N = 15 ≤ 2W: the warning comes halfway, 7.5 minutes before the stop
    assert _tick(time_machine, T0 + 7 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 8 * MIN, cap) == {"warned": 1, "stopped": 0}
    # alice presses "keep it running" at T0+9: the warning no longer holds, the clock restarts
    instance_activity_record(instance=inst, at=T0 + 9 * MIN, acting_user=alice)
    instance_activity_record(instance=inst, at=T0 + 7 * MIN)  # an older report does not move it back
    inst.refresh_from_db()
    assert inst.last_activity_at == T0 + 9 * MIN
    assert _tick(time_machine, T0 + 16 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 17 * MIN, cap) == {"warned": 1, "stopped": 0}  # 7.5 after T0+9

    # a source (as JupyterLab's will be) reports activity at T0+20, cancelling that warning; then the tick is
    # down until T0+50: the warning still comes first and the stop waits the full 7.5 minutes after it
    idle_mod.ACTIVITY_SOURCES.append(lambda instance, now: T0 + 20 * MIN)
    try:
        assert _tick(time_machine, T0 + 50 * MIN, cap) == {"warned": 1, "stopped": 0}
        assert _tick(time_machine, T0 + 57 * MIN, cap) == {"warned": 0, "stopped": 0}
        assert _tick(time_machine, T0 + 58 * MIN, cap) == {"warned": 0, "stopped": 1}
    finally:
        idle_mod.ACTIVITY_SOURCES.pop()
    inst.refresh_from_db()
    assert inst.status == "stopped"
    assert inst.transitions.get(to_status="stopping").reason == "idle autostop: no activity for 38 minutes (limit 15)"
    assert len(mailoutbox) == 3
    assert {m.subject for m in mailoutbox} == {"gpu-portal: j will be stopped in 8 minutes (idle)"}


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


def _busy_minute(inst: Any, at: datetime, cpu_seconds: float) -> None:
    """A utilization sample at ``at`` of the instance's processes with ``cpu_seconds`` of CPU time so far."""
    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import utilization_record

    utilization_record(instance=inst, totals=ProcessTotals(2, cpu_seconds, 2**20), gpu=GpuReading(), now=at)


def test_one_warning_per_idle_period_even_when_the_limit_is_below_the_warning_time(
    org: Any,
    alice: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    mailoutbox: list[Any],
) -> None:
    """A 5-minute limit with warnings 10 minutes ahead: the warning comes halfway (2.5 minutes before the
    stop), never while the instance works, and once per idle period."""
    from instances.interactive.idle import instance_activity_record

    cap = django_capture_on_commit_callbacks
    inst = _run(
        org, alice, fake_backend, cap, kind="interactive", command=["python", "train.py"], idle_autostop_minutes=5
    )
    mailoutbox.clear()  # the sign-up's verification e-mail
    # ten minutes of work: a sample every minute shows a core busy (60 CPU-seconds a minute)
    for minute in range(1, 11):
        _busy_minute(inst, T0 + minute * MIN, cpu_seconds=60.0 * minute)
        assert _tick(time_machine, T0 + minute * MIN, cap) == {"warned": 0, "stopped": 0}, minute
    assert mailoutbox == []
    inst.refresh_from_db()
    assert (inst.last_activity_at, inst.idle_warned_at) == (T0 + 10 * MIN, None)

    # the work ends at T0+10 (the next samples show no CPU use): one warning at T0+12.5, nothing more
    _busy_minute(inst, T0 + 11 * MIN, cpu_seconds=600.0)
    assert _tick(time_machine, T0 + 11 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 12 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 13 * MIN, cap) == {"warned": 1, "stopped": 0}
    assert _tick(time_machine, T0 + 14 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert [m.subject for m in mailoutbox] == ["gpu-portal: j will be stopped in 3 minutes (idle)"]
    assert "stopped at 2027-01-04 09:15 UTC" in mailoutbox[0].body

    # alice keeps it running at T0+14: a new idle period, warned once again, then stopped
    instance_activity_record(instance=inst, at=T0 + 14 * MIN, acting_user=alice)
    assert _tick(time_machine, T0 + 15 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 16 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 17 * MIN, cap) == {"warned": 1, "stopped": 0}
    assert _tick(time_machine, T0 + 18 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert _tick(time_machine, T0 + 19 * MIN, cap) == {"warned": 0, "stopped": 0}  # stop at T0+19.5
    assert _tick(time_machine, T0 + 20 * MIN, cap) == {"warned": 0, "stopped": 1}
    assert len(mailoutbox) == 2
    inst.refresh_from_db()
    assert (inst.status, inst.idle_warned_at, inst.autostopped_at) == ("stopped", T0 + 17 * MIN, T0 + 20 * MIN)
    assert inst.transitions.get(to_status="stopping").reason == "idle autostop: no activity for 6 minutes (limit 5)"


def test_gpu_work_of_the_instances_own_processes_counts_a_busy_card_of_another_instance_does_not(
    org: Any, alice: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any, time_machine: Any
) -> None:
    """Samples with the GPU at work and the CPU at rest (the stand-in readings of NVML: no GPU here)."""
    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import sample_busy, utilization_record

    cap = django_capture_on_commit_callbacks
    inst = _run(
        org, alice, fake_backend, cap, kind="interactive", command=["python", "train.py"], idle_autostop_minutes=2
    )
    card = {"index": 0, "name": "H100", "utilization_percent": 95, "memory_used_bytes": 10, "memory_total_bytes": 80}
    mine, others = GpuReading(cards=[card], processes={0: {41: 10}}), GpuReading(cards=[card], processes={0: {99: 10}})
    unknown = GpuReading(cards=[card])  # NVML did not list the card's processes

    def sample(at: datetime, gpu: GpuReading) -> Any:
        return utilization_record(instance=inst, totals=ProcessTotals(1, 1.0, 2**20, (41,)), gpu=gpu, now=at)

    assert sample_busy(sample(T0 + 1 * MIN, mine))  # CPU 0 %, its card at 95 %
    assert _tick(time_machine, T0 + 1 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert sample_busy(sample(T0 + 2 * MIN, unknown))  # unknown is not idle
    assert _tick(time_machine, T0 + 2 * MIN, cap) == {"warned": 0, "stopped": 0}
    assert not sample_busy(sample(T0 + 3 * MIN, others))  # another instance's work on the card
    inst.refresh_from_db()
    assert inst.last_activity_at == T0 + 2 * MIN
    assert _tick(time_machine, T0 + 3 * MIN, cap) == {"warned": 1, "stopped": 0}
    assert _tick(time_machine, T0 + 4 * MIN, cap) == {"warned": 0, "stopped": 1}


@pytest.mark.parametrize("bad", [-1, 10_081, 10**30, "thirty", 1.5, True])
def test_a_bad_idle_autostop_is_refused_by_the_api_and_the_console_with_nothing_written(
    org: Any, alice: Any, client: Any, bad: Any
) -> None:
    from rest_framework.test import APIClient

    from portal.models import AuditEvent

    before, audits = counts(), AuditEvent.objects.count()
    api = APIClient()
    api.force_authenticate(alice)
    body = {"gpu_type": "cpu-local", "gpu_count": 1, "command": ["sleep", "9"], "idle_autostop_minutes": bad}
    res = api.post("/api/v1/instances", body, format="json")
    assert res.status_code == 400, res.content
    assert (res.json()["error"]["code"], list(res.json()["error"]["details"])) == ("invalid", ["idle_autostop_minutes"])

    client.force_login(alice)
    page = client.post(
        f"/o/{org.slug}/instances/new/",
        {
            "gpu_type": "cpu-local",
            "gpu_count": 1,
            "mode": "container",
            "command": "sleep 9",
            "idle_autostop_minutes": bad,
        },
    )
    assert page.status_code == 400
    assert "idle_autostop_minutes" in page.context["form"].errors
    settings_page = client.post(f"/o/{org.slug}/instances/idle-autostop/", {"minutes": bad})
    assert settings_page.status_code == 400 and "minutes" in settings_page.context["form"].errors
    org.refresh_from_db()
    assert org.idle_autostop_minutes == 30  # unchanged
    assert (counts(), AuditEvent.objects.count()) == (before, audits)


def test_the_warning_e_mail_reads_in_chinese(
    org: Any,
    alice: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    mailoutbox: list[Any],
    settings: Any,
) -> None:
    """Subject and body come from the zh_Hans catalogue (the body's msgid once held an escaped quote mark that
    never matched the text, so it was sent in English)."""
    from django.utils.translation import override

    cap = django_capture_on_commit_callbacks
    inst = _run(org, alice, fake_backend, cap, kind="interactive", command=["sleep", "9999"], name="notebook")
    mailoutbox.clear()
    with override("zh-hans"):
        assert _tick(time_machine, T0 + 20 * MIN, cap) == {"warned": 1, "stopped": 0}
    assert [m.subject for m in mailoutbox] == ["gpu-portal：notebook 将在 10 分钟后停止（空闲）"]
    assert mailoutbox[0].body == (
        "你的实例 notebook 已空闲一段时间：没有 JupyterLab 或 SSH 使用，没有忙碌的内核、打开的终端或 SSH 会话，"
        "它的进程也没有在计算。除非有人使用，它将在 UTC 2027-01-04 09:30 停止（空闲 30 分钟后自动停止）；磁盘保留。"
        f"要让它继续运行，请使用它，或在 {settings.SITE_URL}/o/alice/instances/{inst.pk}/ 点击“保持运行”"
    )
