"""Status and attempt reasons are stored as a code with parameters and shown in the reader's language; the API
keeps the English ``status_reason`` text beside the code; rows written before codes show their stored text."""

from __future__ import annotations

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
        organization=funded, user=alice, version=licensed, capture=django_capture_on_commit_callbacks
    )
    return job


def test_a_reason_is_its_english_text_with_a_code_and_params() -> None:
    from instances.backends.base import state_for_exit_code
    from instances.reasons import reason, reason_fields

    state, message = state_for_exit_code(87)
    assert (state, message) == ("failed", "crashed (exit code 87)")
    assert reason_fields(message) == ("crashed", {"exit_code": 87})
    nested = reason("node_lost", msg=reason("processes_gone"))
    assert nested == "node lost: processes gone without an exit code (killed)"
    assert reason_fields(nested) == ("node_lost", {"msg": {"code": "processes_gone", "params": {}}})
    assert reason_fields("plain words") == ("", {})


def test_an_unknown_code_is_refused() -> None:
    from instances.reasons import reason

    with pytest.raises(KeyError, match="unknown reason code 'no_such_code'"):
        reason("no_such_code")


def test_a_crash_reads_in_english_and_in_chinese_and_the_api_gives_the_code(
    client: Any, alice: Any, funded: Any, job: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.backends.base import JobStatus, state_for_exit_code
    from instances.services import attempt_observe

    attempt = job.attempts.get()
    state, message = state_for_exit_code(87)
    attempt_observe(attempt=attempt, status=JobStatus(state, 87, message))

    job.instance.refresh_from_db()
    attempt.refresh_from_db()
    assert (job.instance.status, job.instance.status_reason) == ("failed", "crashed (exit code 87)")
    assert (job.instance.status_reason_code, job.instance.status_reason_params) == ("crashed", {"exit_code": 87})
    assert (attempt.message, attempt.message_code, attempt.message_params) == (
        "crashed (exit code 87)",
        "crashed",
        {"exit_code": 87},
    )
    last = job.instance.transitions.last()
    assert (last.to_status, last.reason_code, last.reason_params) == ("failed", "crashed", {"exit_code": 87})

    client.force_login(alice)
    url = f"/o/{funded.slug}/jobs/{job.pk}/"
    english = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    chinese = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    # the status line, the crash report's summary (the runtime said nothing: the attempt's reason) and its row
    assert english.count("crashed (exit code 87)") == 3
    assert chinese.count("已崩溃（退出码 87）") == 3
    assert "crashed (exit code 87)" not in chinese

    api = APIClient()
    api.force_authenticate(alice)
    body = api.get(f"/api/v1/jobs/{job.pk}", HTTP_ACCEPT_LANGUAGE="zh-hans").json()
    assert (body["status_reason"], body["status_reason_code"], body["status_reason_params"]) == (
        "crashed (exit code 87)",
        "crashed",
        {"exit_code": 87},
    )
    assert [(a["message"], a["message_code"], a["message_params"]) for a in body["attempts"]] == [
        ("crashed (exit code 87)", "crashed", {"exit_code": 87})
    ]
    inst = api.get(f"/api/v1/instances/{job.instance.pk}").json()
    assert (inst["status_reason"], inst["status_reason_code"]) == ("crashed (exit code 87)", "crashed")


def test_stopped_by_the_user_names_the_user_in_chinese(client: Any, alice: Any, funded: Any, job: Any) -> None:
    from instances.models import Instance

    client.force_login(alice)
    response = client.post(f"/o/{funded.slug}/jobs/{job.pk}/stop/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 302
    inst = Instance.objects.get(pk=job.instance.pk)
    assert (inst.status, inst.status_reason) == ("stopping", f"stopped by {alice}")
    assert (inst.status_reason_code, inst.status_reason_params) == ("stopped_by_user", {"user": str(alice)})
    page = client.get(f"/o/{funded.slug}/instances/{inst.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert f"由 {alice} 停止" in page


def test_a_row_written_before_codes_shows_its_stored_text(client: Any, alice: Any, funded: Any, job: Any) -> None:
    from instances.models import Instance

    Instance.objects.filter(pk=job.instance.pk).update(status_reason="legacy words", status_reason_code="")
    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/jobs/{job.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "legacy words" in page
    inst = Instance.objects.get(pk=job.instance.pk)
    assert inst.status_reason_display == "legacy words"
    Instance.objects.filter(pk=inst.pk).update(status_reason_code="gone_from_the_registry")
    assert Instance.objects.get(pk=inst.pk).status_reason_display == "legacy words"


def test_every_reason_code_has_a_chinese_template_with_the_same_parameters() -> None:
    import re

    from django.utils import translation

    from instances.reasons import REASON_TEXTS

    with translation.override("zh-hans"):
        from django.utils.translation import gettext

        untranslated = [code for code, text in REASON_TEXTS.items() if gettext(text) == text]
        mismatched = [
            code
            for code, text in REASON_TEXTS.items()
            if sorted(re.findall(r"%\(\w+\)[sd]", gettext(text))) != sorted(re.findall(r"%\(\w+\)[sd]", text))
        ]
    assert (untranslated, mismatched) == ([], [])


def test_the_schedulers_refusals_are_reasons_read_in_chinese() -> None:
    import dataclasses
    from datetime import UTC, datetime

    from django.utils import translation

    from instances import scheduler
    from instances.reason_display import reason_render
    from instances.reasons import reason_fields

    request = scheduler.PlacementRequest("r1", "1", "H100-80G-SXM", 16, "container", datetime(2026, 3, 1, tzinfo=UTC))
    nodes = [scheduler.NodeView(f"h-{i}", "H100-80G-SXM", 8, free, "b1") for i, free in enumerate((8, 3))]
    refused = scheduler.place(request, nodes)
    assert isinstance(refused, scheduler.Unplaceable)
    assert refused.reason == "needs 2 free H100-80G-SXM nodes, 1 free"
    code, params = reason_fields(refused.reason)
    assert (code, params) == (
        "sched_capacity_nodes",
        {"nodes": {"code": "sched_free_nodes", "params": {"n": 2, "gpu_type": "H100-80G-SXM"}}, "free": 1},
    )
    with translation.override("zh-hans"):
        assert reason_render(code=code, params=params) == "需要 2 台空闲的 H100-80G-SXM 节点，当前空闲 1 台"
    none = scheduler.place(dataclasses.replace(request, gpu_type="L40S-48G"), nodes)
    with translation.override("zh-hans"):
        assert reason_render(code=none.reason.code, params=none.reason.params) == "没有就绪的 L40S-48G 节点"
