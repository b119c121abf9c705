"""What the training runtime says when it exits reads in the reader's language (issue 25): the portal maps the
runtime's exit code to a reason code; a failed attempt's page shows that summary beside the runtime's own
words and the last lines of its log; reasons written before codes get theirs from their text
(migration ``instances.0012``)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.urls import reverse
from django.utils import translation
from instances_support import FakeBackend, training_job_launch

from instances.runtime import exitcodes


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
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks, name="legal"
    )
    _report(job, [{"seq": 1, "type": "started", "step": 0}])
    return job


def _report(job: Any, events: list[dict[str, Any]]) -> None:
    from instances.services import attempt_token, job_events_receive

    job_events_receive(job_id=job.pk, token=attempt_token(job.attempts.get()), body={"attempt": 1, "events": events})


@pytest.mark.parametrize(
    ("exit_code", "code", "chinese"),
    [
        (exitcodes.EXIT_FINISHED, "exit_finished", "训练程序在第 40 步完成"),
        (exitcodes.EXIT_FAILED, "exit_failed", "训练程序在第 40 步因错误停止：日志的最后几行说明了是什么错误"),
        (exitcodes.EXIT_CONFIG_ERROR, "exit_config_error",
         "训练程序拒绝了它的配置：未进行任何训练（不会重试）；日志说明了是哪项设置"),
        (exitcodes.EXIT_RESUME_REFUSED, "exit_resume_refused",
         "训练程序无法从给定的检查点精确恢复：未进行任何训练（不会重试）；请回滚到另一个检查点"),
        (exitcodes.EXIT_STORE_UNAVAILABLE, "exit_store_unavailable",
         "检查点存储在第 40 步持续出错（暂时性读写错误）：稍后恢复，不计为崩溃"),
        (exitcodes.EXIT_RANK_LOST, "exit_rank_lost",
         "第 40 步时一个对等进程丢失（被终止、内存不足或节点丢失）：从最新检查点恢复，不计为崩溃"),
        (exitcodes.EXIT_PREEMPTED, "exit_preempted", "训练程序在第 40 步保存检查点后停止（被抢占）"),
        (exitcodes.EXIT_STOPPED, "exit_stopped", "训练程序在第 40 步保存检查点后停止"),
        (3, "exit_code_other", "训练程序在第 40 步以退出码 3 退出"),
    ],
)  # fmt: skip
def test_each_runtime_exit_code_is_a_reason_code_in_words(exit_code: int, code: str, chinese: str) -> None:
    from instances.reason_display import reason_render
    from instances.reasons import runtime_exit_reason

    why = runtime_exit_reason(exit_code, 40)
    assert why.code == code
    with translation.override("zh-hans"):
        assert reason_render(code=why.code, params=why.params, fallback="") == chinese


def test_the_exit_callback_stores_the_code_not_the_runtimes_english(job: Any) -> None:
    _report(job, [{"seq": 2, "type": "exit", "reason": "failed", "exit_code": 1, "step": 7,
                   "message": "ValueError: bad shard"}])  # fmt: skip
    attempt = job.attempts.get()
    assert (attempt.message, attempt.message_code, attempt.message_params) == (
        "the training program stopped with an error at step 7: the last lines of its log say which",
        "exit_failed",
        {"step": 7},
    )


def test_a_failed_attempt_shows_a_chinese_summary_beside_its_last_log_lines_and_charlie_gets_404(
    client: Any, alice: Any, charlie: Any, job: Any
) -> None:
    from instances.backends.base import JobStatus, state_for_exit_code
    from instances.models import JobLogArchive
    from instances.services import attempt_observe

    attempt = job.attempts.get()
    _report(job, [{"seq": 2, "type": "exit", "reason": "failed", "exit_code": 1, "step": 7,
                   "message": "ValueError: bad shard"}])  # fmt: skip
    log = "step 6 loss 7.1\nTraceback (most recent call last):\nValueError: bad shard\n"
    JobLogArchive.objects.create(
        attempt=attempt, rank=0, text=log + "exit failed (1) at step 7: ValueError: bad shard\n"
    )
    state, message = state_for_exit_code(1)
    attempt_observe(attempt=attempt, status=JobStatus(state, 1, message))
    url = reverse("job_detail", kwargs={"org": job.organization.slug, "pk": job.pk})
    client.force_login(alice)
    html = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "第 1 次尝试失败的原因" in html
    assert '<p data-testid="crash-summary">训练程序在第 7 步因错误停止：日志的最后几行说明了是什么错误</p>' in html
    assert '<code data-testid="crash-message">ValueError: bad shard</code>' in html
    assert (
        '<pre class="log" data-testid="crash-lines">step 6 loss 7.1\nTraceback (most recent call last):\n'
        "ValueError: bad shard\nexit failed (1) at step 7: ValueError: bad shard\n</pre>"
    ) in html
    client.force_login(charlie)
    assert client.get(url).status_code == 404


def test_a_job_without_a_failed_attempt_shows_no_crash_report(client: Any, alice: Any, job: Any) -> None:
    from instances.job_page import crash_report

    assert crash_report(job) is None
    client.force_login(alice)
    url = reverse("job_detail", kwargs={"org": job.organization.slug, "pk": job.pk})
    assert 'data-testid="crash-report"' not in client.get(url).content.decode()


def test_a_crash_the_runtime_did_not_report_is_summed_up_by_the_attempts_own_reason(job: Any) -> None:
    """A kill (no exit event): the summary is the attempt's reason ("killed by SIGKILL"), with no message."""
    from instances.backends.base import JobStatus, state_for_exit_code
    from instances.job_page import crash_report
    from instances.services import attempt_observe

    state, message = state_for_exit_code(-9)
    attempt_observe(attempt=job.attempts.get(), status=JobStatus(state, -9, message))
    with translation.override("en"):
        report = crash_report(job)
    assert report is not None
    assert (report.attempt, report.summary, report.message, report.lines) == (1, "killed by SIGKILL", "", [])


def test_the_migration_gives_reasons_written_before_codes_their_code(job: Any) -> None:
    from instances.models import Instance, InstanceTransition, JobAttempt

    backfill = import_module("instances.migrations.0012_reason_codes_from_text").reason_codes_from_text
    Instance.objects.filter(pk=job.instance_id).update(
        status_reason="stopped by alice@example.com", status_reason_code="", status_reason_params={}
    )
    JobAttempt.objects.filter(job=job).update(
        message="node lost: processes gone without an exit code (killed)", message_code="", message_params={}
    )
    InstanceTransition.objects.filter(instance_id=job.instance_id).update(
        reason="an operator typed this", reason_code="", reason_params={}
    )

    backfill(django_apps, None)

    instance = Instance.objects.get(pk=job.instance_id)
    attempt = JobAttempt.objects.get(job=job)
    assert (instance.status_reason_code, instance.status_reason_params) == (
        "stopped_by_user", {"user": "alice@example.com"}
    )  # fmt: skip
    assert (attempt.message_code, attempt.message_params) == (
        "node_lost", {"msg": {"code": "processes_gone", "params": {}}}
    )  # fmt: skip
    assert set(
        InstanceTransition.objects.filter(instance_id=job.instance_id).values_list("reason_code", flat=True)
    ) == {""}
    with translation.override("zh-hans"):
        assert instance.status_reason_display != instance.status_reason
        assert attempt.message_display != attempt.message


def test_the_crash_report_leaves_once_a_later_attempt_runs(job: Any) -> None:
    """The card explains the job's current failure only: when the next attempt (a crash resume) exists, the old
    crash is history (the attempts table) and the card is gone."""
    from instances.backends.base import JobStatus, state_for_exit_code
    from instances.job_page import crash_report
    from instances.models import JobAttempt
    from instances.services import attempt_observe

    state, message = state_for_exit_code(1)
    attempt_observe(attempt=job.attempts.get(), status=JobStatus(state, 1, message))
    report = crash_report(job)
    assert report is not None and report.attempt == 1
    JobAttempt.objects.create(instance=job.instance, job=job, number=2, state="running")
    assert crash_report(job) is None
