"""The training console in a real browser (Debian's headless Chromium through Playwright).

A user with trial credit and a licensed dataset opens the launch form, sees the live price and runway change
as she changes the GPU count (htmx), launches a job, watches the job page pick up the steps and draw the
loss curve while the runtime reports (its HTTP callbacks are sent to the live server with the attempt's
token), and rolls back to a checkpoint through the confirmation page. The compute backend is the only
stand-in (no torchrun here: ``test_e2e_local.py`` runs the real one).
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from instances_support import FakeBackend

CHROMIUM = os.environ.get("PLAYWRIGHT_CHROMIUM_EXECUTABLE", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.engine_independent(
        "a browser journey: it proves pages, scripts and htmx swaps; the queries behind them run on PostgreSQL in "
        "the view and API tests of the same pages"
    ),
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists(),
        reason=f"{CHROMIUM} not installed (apt-get install chromium)",
    ),
]


@pytest.fixture
def page(live_server: Any, settings: Any) -> Any:
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(locale="en-US", timezone_id="Asia/Shanghai")
        yield context.new_page()
        browser.close()


def _post_events(url: str, token: str, attempt: int, events: list[dict[str, Any]]) -> dict[str, Any]:
    req = urllib.request.Request(  # noqa: S310 - the live test server's http:// URL
        url,
        data=json.dumps({"attempt": attempt, "events": events}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - the live server
        return json.loads(resp.read())


def _log_in_as_alice(page: Any, base: str, org_slug: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", "alice@example.com")
    page.fill("#id_password", "correct horse battery 9")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/o/{org_slug}/")


def test_launch_watch_and_roll_back_in_the_browser(
    page: Any, live_server: Any, alice: Any, funded: Any, licensed: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from instances.models import TrainingJob
    from instances.services import attempt_token

    ARTIFACTS.mkdir(exist_ok=True)
    _log_in_as_alice(page, live_server.url, funded.slug)

    page.goto(f"{live_server.url}/o/{funded.slug}/jobs/new/")
    assert page.text_content("[data-testid=price-per-hour]").strip() == "0.60"
    assert page.text_content("[data-testid=runway]").strip() == "your balance lasts 16 h 40 min"
    page.fill("#id_gpu_count", "2")
    page.locator("#id_gpu_count").dispatch_event("change")
    page.wait_for_function("document.querySelector('[data-testid=price-per-hour]').textContent.trim() === '1.20'")
    assert page.text_content("[data-testid=runway]").strip() == "your balance lasts 8 h 20 min"
    assert page.text_content("[data-testid=queue]").strip() == "Starts now on local."
    page.fill("#id_name", "legal-tiny")
    page.check(f"input[name=datasets][value='{licensed.pk}']")
    page.fill("#id_seq_len", "32")
    page.fill("#id_micro_batch", "2")
    page.fill("#id_max_steps", "12")
    page.screenshot(path=str(ARTIFACTS / "job-launch-en.png"), full_page=True)
    page.click("button[type=submit]:has-text('Launch')")
    page.wait_for_selector("[data-testid=job-status]")
    job = TrainingJob.objects.get(name="legal-tiny")
    assert page.text_content("[data-testid=job-status]").strip() == "Provisioning"

    # the runtime reports (as instances/runtime/reporting.py does) to the live server
    url = f"{live_server.url}/api/v1/runtime/jobs/{job.pk}/events"
    token = attempt_token(job.attempts.get(number=1))
    events: list[dict[str, Any]] = [
        {"seq": 1, "type": "started", "time": "2026-03-01T08:00:00Z", "step": 0, "world_size": 2}
    ]
    for step in range(1, 7):
        events.append(
            {
                "seq": step + 1,
                "type": "progress",
                "time": "2026-03-01T08:00:01Z",
                "step": step,
                "loss": 8.0 - step * 0.25,
                "lr": 1e-3,
                "tokens_per_s": 900.0 + step,
                "tokens_seen": 128 * step,
            }
        )
    events.append(
        {
            "seq": 8,
            "type": "checkpoint",
            "time": "2026-03-01T08:00:02Z",
            "step": 4,
            "path": "/ckpt/step-00000004",
            "bytes": 46_516_899,
            "loss": 7.0,
        }
    )
    assert _post_events(url, token, 1, events) == {"checkpoint_requested": False, "stop_requested": False}

    page.wait_for_function(
        "document.querySelector('[data-testid=job-step]').textContent.trim() === '6'", timeout=15_000
    )  # the page's htmx poll (every 3 s) picks it up
    assert page.text_content("[data-testid=job-status]").strip() == "Running"
    assert page.locator("svg[aria-label=Loss] polyline").count() == 1
    page.screenshot(path=str(ARTIFACTS / "job-running-en.png"), full_page=True)

    page.click("text=Roll back to here")
    page.wait_for_selector("text=Roll back to step 4?")
    page.click("button[type=submit]:has-text('Roll back')")
    page.wait_for_selector("text=legal-tiny rolls back to step 4.")
    job.refresh_from_db()
    assert fake_backend.stopped == [f"fake:job-{job.pk}:1"]
    assert json.loads(fake_backend.submitted[-1].config_json)["resume_step"] == 4
    assert job.attempts.get(number=2).resume_from_step == 4


def test_switching_the_gpu_type_moves_the_untouched_defaults_and_keeps_typed_values(
    page: Any, live_server: Any, alice: Any, funded: Any, licensed: Any, nodes: Any
) -> None:
    """The launch page starts on the CPU slot's defaults (short samples, a checkpoint every minute and every
    100 steps); choosing an A100 moves the fields still at those defaults to a GPU's (1024-token samples, a
    checkpoint every 30 minutes, none by steps), and back again; a value the user typed stays as typed."""
    _log_in_as_alice(page, live_server.url, funded.slug)
    page.goto(f"{live_server.url}/o/{funded.slug}/jobs/new/")
    fields = ["seq_len", "micro_batch", "max_steps", "checkpoint_every_minutes", "checkpoint_every_steps"]

    def values() -> list[str]:
        return [page.input_value(f"#id_{name}") for name in fields]

    assert page.input_value("#id_gpu_type") == "cpu-local"
    assert values() == ["256", "4", "1000", "1", "100"]
    page.fill("#id_micro_batch", "3")
    page.select_option("#id_gpu_type", "A100-80G-SXM")
    assert values() == ["1024", "3", "1000", "30", "0"]
    page.select_option("#id_gpu_type", "cpu-local")
    assert values() == ["256", "3", "1000", "1", "100"]
