"""The instance page as a new user reads it (issue 25, item 5): an interactive instance speaks of its disk and
processes, never of checkpoints; the status badge and its reason are not printed twice; the default image is
named; the price per hour and the cost so far are shown; the utilization charts' axes never go negative.
Against the stand-in backend; outsiders get 404."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from instances_support import FakeBackend

STOPPED_TEXT = "its processes were ended; the disk (workspace folder and volumes) is kept"


def _running(org: Any, alice: Any, fake_backend: FakeBackend, capture: Any, **kw: Any) -> Any:
    """An interactive instance ``box`` of 1 cpu-local slot, launched and running on the stand-in backend."""
    from instances.services import LaunchSpec, instance_launch, instances_reconcile

    fields: dict[str, Any] = {
        "name": "box",
        "kind": "interactive",
        "gpu_type": "cpu-local",
        "gpu_count": 1,
        "command": ["sleep", "600"],
    }
    fields.update(kw)
    with capture(execute=True):
        inst = instance_launch(organization=org, user=alice, spec=LaunchSpec(**fields))
    with capture(execute=True):
        instances_reconcile(backend=fake_backend)  # type: ignore[arg-type]
    inst.refresh_from_db()
    assert inst.status == "running"
    return inst


def _text(html: str) -> str:
    """Visible text of an HTML fragment, whitespace collapsed."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def _status_line(page: str) -> str:
    """The text of the badge's paragraph (status, queue position, reason)."""
    found = re.search(r'<p><span class="badge status-.*?</p>', page, re.S)
    assert found, page
    return _text(found.group(0))


def test_stopping_an_interactive_instance_speaks_of_its_disk_never_of_a_checkpoint(
    client: Any, alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    inst = _running(funded, alice, fake_backend, django_capture_on_commit_callbacks)
    client.force_login(alice)
    url = f"/o/{funded.slug}/instances/{inst.pk}/"
    confirm = client.get(f"{url}stop/").content.decode()
    assert (
        "Its processes are ended (JupyterLab and SSH sessions close), then the instance stops and billing ends. "
        "Its disk (workspace folder and volumes) is kept." in confirm
    )
    assert "checkpoint" not in confirm

    # the stand-in ends the attempt with the training runtime's code 85, as a program may: still a plain stop
    with django_capture_on_commit_callbacks(execute=True):  # the stop task runs when the request commits
        assert client.post(f"{url}stop/").status_code == 302
    page = client.get(url).content.decode()
    assert "Stopping box: its processes are ended; its disk (workspace folder and volumes) is kept." in page
    assert "checkpoint" not in page.lower()
    inst.refresh_from_db()
    attempt = inst.attempts.get()
    assert (inst.status, inst.status_reason, inst.status_reason_code) == ("stopped", STOPPED_TEXT, "command_stopped")
    assert (attempt.state, attempt.exit_code, attempt.message, attempt.message_code) == (
        "stopped",
        85,
        STOPPED_TEXT,
        "command_stopped",
    )
    assert list(inst.transitions.order_by("id").values_list("to_status", "reason_code"))[-2:] == [
        ("stopping", "stopped_by_user"),
        ("stopped", "command_stopped"),
    ]
    assert _status_line(page) == f"Stopped {STOPPED_TEXT}"
    client.cookies["django_language"] = "zh-hans"
    zh = client.get(url).content.decode()
    assert _status_line(zh) == "已停止 其进程已结束；磁盘（工作区文件夹和数据卷）保留"


def test_an_interactive_command_that_exits_85_by_itself_failed_it_was_not_preempted(
    alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.backends.base import JobStatus, command_state_for_exit_code, state_for_exit_code
    from instances.services.reconcile import attempt_observe

    inst = _running(funded, alice, fake_backend, django_capture_on_commit_callbacks)
    attempt = inst.attempts.get()
    state, message = state_for_exit_code(85)  # what the backend says: the runtime's code for "preempted"
    with django_capture_on_commit_callbacks(execute=True):
        attempt_observe(attempt=attempt, status=JobStatus(state, 85, message))
    inst.refresh_from_db()
    assert (inst.status, inst.status_reason, inst.status_reason_code) == (
        "failed",
        "the command exited with code 85; the disk is kept",
        "command_exited",
    )
    assert inst.transitions.filter(to_status="preempted").count() == 0
    assert [command_state_for_exit_code(c) for c in (0, -9, 143)] == [
        ("succeeded", "finished"),
        ("failed", "the command was killed by SIGKILL; the disk is kept"),
        ("failed", "the command was killed by SIGTERM; the disk is kept"),
    ]
    assert command_state_for_exit_code(0, stop_requested=True) == ("stopped", STOPPED_TEXT)


def test_the_training_runtime_logs_sigterm_as_a_signal_not_as_a_preemption() -> None:
    from instances.runtime.train import exit_log_line

    assert exit_log_line("preempted", 85, 320, "checkpoint saved at step 320") == (
        "exit on SIGTERM (85) at step 320: checkpoint saved at step 320"
    )
    assert exit_log_line("stopped", 86, 12, "checkpoint saved at step 12") == (
        "exit stopped (86) at step 12: checkpoint saved at step 12"
    )


def test_the_badge_and_a_reason_that_repeats_it_are_shown_once_in_both_languages(
    client: Any,
    alice: Any,
    charlie: Any,
    funded: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from django.utils.translation import override

    from instances.models import Instance
    from instances.reasons import reason

    inst = _running(funded, alice, fake_backend, django_capture_on_commit_callbacks)
    assert (inst.status_reason, inst.status_reason_code) == ("running", "running")
    client.force_login(alice)
    url = f"/o/{funded.slug}/instances/{inst.pk}/"
    assert _status_line(client.get(url).content.decode()) == "Running"
    assert _status_line(client.get(url, HTTP_HX_REQUEST="true").content.decode()) == "Running"
    listing = client.get(f"/o/{funded.slug}/instances/", HTTP_HX_REQUEST="true").content.decode()
    row = re.search(rf'<tr data-instance="{inst.pk}">.*?</tr>', listing, re.S)
    assert row and _text(row.group(0)) == "box Interactive 1× cpu-local (Container) Running"
    client.cookies["django_language"] = "zh-hans"
    assert _status_line(client.get(url).content.decode()) == "运行中"

    # a reason that says more than the status stays
    stopped = Instance(status="stopped", status_reason=reason("stopped_by_user", user="alice@example.com"))
    stopped.status_reason_code, stopped.status_reason_params = "stopped_by_user", {"user": "alice@example.com"}
    legacy = Instance(status="running", status_reason="Running")  # an old row: text only, no code
    with override("en"):
        assert (stopped.status_reason_extra, legacy.status_reason_extra) == ("stopped by alice@example.com", "")
    with override("zh-hans"):
        assert (stopped.status_reason_extra, legacy.status_reason_extra) == ("由 alice@example.com 停止", "")

    client.force_login(charlie)
    assert client.get(url).status_code == 404


def test_the_page_names_the_default_image_and_shows_the_price_per_hour_and_the_cost_so_far(
    client: Any, alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from django.utils import timezone

    from billing.models import UsageRecord
    from instances.job_page import instance_cost

    inst = _running(funded, alice, fake_backend, django_capture_on_commit_callbacks)
    other = _running(
        funded,
        alice,
        fake_backend,
        django_capture_on_commit_callbacks,
        name="old",
        image="PyTorch 2.1 + CUDA 12.1 + DeepSpeed 0.12.3",
    )
    start = timezone.now().replace(second=0, microsecond=0)
    for i, amount in enumerate((10_000, 10_000, 10_001)):  # three minutes at 0.60 CNY/slot-hour, one rounded up
        UsageRecord.objects.create(
            instance_id=inst.pk,
            segment_id=None,
            minute_index=i,
            organization=funded,
            minute=start + timedelta(minutes=i),
            gpu_type="cpu-local",
            mode="container",
            gpu_count=1,
            price_per_gpu_hour_micros=600_000,
            price_minute_index=i + 1,
            amount_micros=amount,
        )
    cost = instance_cost(inst)
    assert (cost.price_per_hour_micros, cost.cost_micros, cost.price_per_hour_cny, cost.cost_cny) == (
        600_000,
        30_001,
        "0.60",
        "0.03",
    )
    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/instances/{inst.pk}/").content.decode()
    found = re.search(r'<p data-testid="instance-cost">.*?</p>', page, re.S)
    assert found and _text(found.group(0)) == "Price ¥0.60 per hour · Cost so far ¥0.03"
    assert re.search(r'data-testid="instance-image">([^<]*)<', page).group(1) == (  # type: ignore[union-attr]
        "PyTorch 2.13 + CUDA 12.8 + DeepSpeed 0.19 (default)"
    )
    assert "Image: —" not in page
    page = client.get(f"/o/{funded.slug}/instances/{other.pk}/").content.decode()
    assert re.search(r'data-testid="instance-image">([^<]*)<', page).group(1) == (  # type: ignore[union-attr]
        "PyTorch 2.1 + CUDA 12.1 + DeepSpeed 0.12.3"
    )
    assert 'data-testid="instance-cost-so-far">¥0.00<' in page


def test_the_utilization_charts_read_minutes_ago_and_start_at_zero(
    client: Any, alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from django.utils import timezone

    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import utilization_record

    inst = _running(funded, alice, fake_backend, django_capture_on_commit_callbacks)
    t0 = timezone.now().replace(microsecond=0)
    for i, cpu_s in enumerate((10.0, 13.0, 13.3, 13.6)):  # 10 %, then a flat 0.5 %
        utilization_record(
            instance=inst,
            totals=ProcessTotals(1, cpu_s, (100 + i) * 2**20),
            gpu=GpuReading(),
            now=t0 + i * timedelta(seconds=60),
        )
    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/instances/{inst.pk}/").content.decode()
    cpu = re.search(r'<svg[^>]*aria-label="CPU \(%\)".*?</svg>', page, re.S)
    assert cpu, page
    labels = re.findall(r'font-size="11"[^>]*>([^<]*)</text>', cpu.group(0))
    assert labels == ["5%", "0%", "2 min ago", "now"]  # max, axis start, first and last x
    memory = re.search(r'<svg[^>]*aria-label="Memory \(MiB\)".*?</svg>', page, re.S)
    assert memory and re.findall(r'font-size="11"[^>]*>([^<]*)</text>', memory.group(0)) == [
        "103",
        "0",
        "3 min ago",
        "now",
    ]


@pytest.mark.parametrize(("y_min", "bottom"), [(None, "-3"), (0, "0")])
def test_a_line_chart_axis_starts_where_it_is_told_and_draws_lower_values_at_it(y_min: Any, bottom: str) -> None:
    from portal.lib.charts import svg_line_chart

    def ago(x: float) -> str:
        return "now" if x == 0 else f"{-x:g} min ago"

    svg = str(svg_line_chart([(-2, -3.0), (-1, 4.0), (0, 8.0)], title="t", y_min=y_min, x_label=ago))
    labels = re.findall(r'font-size="11"[^>]*>([^<]*)</text>', svg)
    assert labels == ["8", bottom, "2 min ago", "now"]
    ys = [float(p.split(",")[1]) for p in re.search(r'points="([^"]*)"', svg).group(1).split()]  # type: ignore[union-attr]
    assert max(ys) == 176.0 and min(ys) == 22.0  # the frame's bottom (22 + 154) and top: nothing drawn below it
