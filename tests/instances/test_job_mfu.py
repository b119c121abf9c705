"""The job page shows the runtime's own MFU figure from its newest progress event (issue 16), or "MFU —"
with the runtime's reason when it has none (CPU, unknown GPU)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse
from test_callbacks import job, post, token_of  # noqa: F401 - the fixture is used by name

PROGRESS = {
    "seq": 1,
    "type": "progress",
    "time": "2026-03-01T08:00:01Z",
    "step": 1,
    "loss": 6.5,
    "lr": 1e-4,
    "tokens_per_s": 900.0,
    "tokens_seen": 128,
}


def page(client: Any, user: Any, job: Any) -> Any:  # noqa: F811
    client.force_login(user)
    return client.get(reverse("job_detail", kwargs={"org": job.instance.organization.slug, "pk": job.pk}))


def test_the_job_page_shows_the_mfu_of_the_newest_progress_event(client: Any, job: Any, alice: Any) -> None:  # noqa: F811
    events = [{**PROGRESS, "mfu": 0.3},
              {**PROGRESS, "seq": 2, "step": 2, "mfu": 0.4123, "tokens_per_s": 950.0}]  # fmt: skip
    assert post(client, job.pk, token_of(job), {"attempt": 1, "events": events}).status_code == 200
    html = page(client, alice, job).content.decode()
    assert '<span data-testid="job-mfu">MFU 41%</span>' in html


CPU_EN = "No GPU: the peak FLOP/s of a CPU is not tabulated, so MFU is not computed."
CPU_ZH = "没有 GPU：CPU 的每秒浮点运算峰值没有列表可查，因此不计算 MFU。"
X1_EN = "The peak FLOP/s of NVIDIA X1 is not in the runtime&#x27;s table, so MFU is not computed."
X1_ZH = "NVIDIA X1 的每秒浮点运算峰值不在运行时的表中，因此不计算 MFU。"
OLD_CPU = "no GPU: the peak FLOP/s of a CPU is not tabulated"
OLD_X1 = "peak of 'NVIDIA X1' unknown (not in instances/runtime/mfu.py)"


@pytest.mark.parametrize(
    ("why", "language", "says"),
    [
        # this runtime: the code decides, whatever the English note says
        ({"mfu_note_code": "cpu", "mfu_note": "reworded"}, "en", CPU_EN),
        ({"mfu_note_code": "cpu", "mfu_note": "reworded"}, "zh-hans", CPU_ZH),
        ({"mfu_note_code": "unknown_device", "mfu_device": "NVIDIA X1", "mfu_note": "reworded"}, "en", X1_EN),
        ({"mfu_note_code": "unknown_device", "mfu_device": "NVIDIA X1", "mfu_note": "reworded"}, "zh-hans", X1_ZH),
        # a code this portal does not know (a newer runtime): its own text
        ({"mfu_note_code": "throttled", "mfu_note": "clock throttled"}, "zh-hans", "clock throttled"),
        # a runtime from before the code: its two English wordings are recognised
        ({"mfu_note": OLD_CPU}, "en", CPU_EN),
        ({"mfu_note": OLD_CPU}, "zh-hans", CPU_ZH),
        ({"mfu_note": OLD_X1}, "en", X1_EN),
        ({"mfu_note": OLD_X1}, "zh-hans", X1_ZH),
        (
            {"mfu_note": "peak of 'Acme unknown GPU' unknown (not in instances/runtime/mfu.py)"},
            "en",
            "The peak FLOP/s of Acme unknown GPU is not in the runtime&#x27;s table, so MFU is not computed.",
        ),
        ({"mfu_note": "something new from a newer runtime"}, "zh-hans", "something new from a newer runtime"),
    ],
)
def test_without_a_figure_the_page_says_why_in_the_readers_language(
    client: Any,
    job: Any,  # noqa: F811
    alice: Any,
    why: dict[str, str],
    language: str,
    says: str,
) -> None:
    event = {**PROGRESS, "mfu": None, **why}
    assert post(client, job.pk, token_of(job), {"attempt": 1, "events": [event]}).status_code == 200
    client.cookies["django_language"] = language
    html = page(client, alice, job).content.decode()
    assert f'<span class="muted" data-testid="job-mfu" title="{says}">MFU —</span>' in html


def test_an_outsider_gets_404(client: Any, job: Any, charlie: Any) -> None:  # noqa: F811
    assert page(client, charlie, job).status_code == 404
