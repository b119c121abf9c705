"""A researcher's first notebook in a real browser (Debian's headless Chromium through Playwright), on the real
local backend (issue 25, "What must be shown"): a new user signs up and verifies her address (trial credit),
launches an interactive instance from the console leaving the command empty, opens JupyterLab from the instance
page, makes a notebook whose cell imports torch and prints its version — the portal's own torch version — and
stops the instance from the console: stopped in the database, none of its processes left. Screenshot:
``test-artifacts/first-notebook-en.png``."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from test_browser_jobs import ARGS, ARTIFACTS, CHROMIUM

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
def local(settings: Any, tmp_path: Path, catalog: None) -> Path:
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    return tmp_path / "ws"


def _until(predicate: Any, what: str, timeout_s: float = 90) -> Any:
    """Reconcile (the beat's work) until ``predicate()`` is truthy; returns its value."""
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        instances_reconcile()
        time.sleep(0.2)
    return value


def test_a_new_user_launches_without_a_command_and_prints_torchs_version_in_a_notebook(
    live_server: Any, settings: Any, local: Path
) -> None:
    import torch
    from django.core import mail
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    from instances.backends.local import LocalBackend
    from instances.backends.procfs import job_processes
    from instances.interactive.jupyter import jupyter_state
    from instances.models import Instance
    from instances.services import instance_stop, instances_reconcile

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    ARTIFACTS.mkdir(exist_ok=True)
    instances_reconcile()  # the beat's first pass registers this machine as the local node
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(
                locale="en-US", timezone_id="Asia/Shanghai", viewport={"width": 1280, "height": 800}
            )
            page = context.new_page()
            page.goto(f"{live_server.url}/signup/")
            page.fill("#id_email", "researcher@example.com")
            page.fill("#id_name", "Researcher")
            page.fill("#id_password1", "correct horse battery 9")
            page.fill("#id_password2", "correct horse battery 9")
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"/o/[\w-]+/$"))
            link = re.search(r"http://\S+/verify/\S+/", mail.outbox[0].body).group(0)  # type: ignore[union-attr]
            page.goto(link)
            page.wait_for_url(re.compile(r"/o/[\w-]+/$"))
            assert page.text_content("[data-testid=balance-trial]").strip() == "10.00 CNY"  # type: ignore[union-attr]
            console = page.url

            page.goto(f"{console}instances/new/")
            assert page.get_attribute("#id_command", "required") is None  # the command is optional
            page.fill("#id_name", "first-notebook")
            page.select_option("#id_gpu_type", "cpu-local")
            page.click("#launch-form button[type=submit]")
            page.wait_for_url(re.compile(r"/instances/\d+/$"))
            inst = Instance.objects.get(created_by__email="researcher@example.com")
            assert (inst.name, inst.kind, inst.command) == ("first-notebook", "interactive", [])
            _until(
                lambda: (i := Instance.objects.get(pk=inst.pk)).status == "running" and jupyter_state(i) == "ready",
                "JupyterLab did not answer",
            )

            button = page.locator("[data-testid=open-jupyter]")
            button.wait_for(timeout=30_000)  # the panel arrives by htmx
            with context.expect_page() as opened:
                button.click()
            lab = opened.value
            lab.wait_for_url(f"**/jupyter/{inst.pk}/lab**", timeout=30_000)
            lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=60_000)
            cell = lab.locator(".jp-NotebookPanel .jp-Cell .cm-content").first
            output = lab.locator(".jp-NotebookPanel .jp-OutputArea-output").first
            source = "import torch; print(torch.__version__)"
            # JupyterLab drops a cell run before its new kernel is connected (the cell moves on, "[ ]:", nothing
            # executed): wait for the status bar's "| Idle"; on a loaded machine the cell is still checked to hold
            # the line before it runs, and run again (idempotent) if no output came
            lab.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=120_000)
            for _attempt in range(3):
                cell.click(timeout=60_000)
                if cell.inner_text().strip() != source:
                    cell.fill(source)
                assert cell.inner_text().strip() == source
                cell.press("Shift+Enter")
                try:
                    output.wait_for(timeout=60_000)
                    break
                except PlaywrightTimeout:
                    lab.screenshot(path=str(ARTIFACTS / "first-notebook-waiting.png"))  # what it waited on
            assert output.inner_text().strip() == torch.__version__
            lab.screenshot(path=str(ARTIFACTS / "first-notebook-en.png"))

            page.bring_to_front()
            page.get_by_role("link", name="Stop", exact=True).click()
            page.wait_for_url(f"**/instances/{inst.pk}/stop/")
            page.locator("form.card button[type=submit]").click()  # the confirmation
            page.wait_for_url(f"**/instances/{inst.pk}/")
            browser.close()
    finally:  # nothing it started outlives the test, pass or fail
        for left in Instance.objects.filter(status__in=("scheduling", "provisioning", "running")):
            instance_stop(instance=left, reason="test ended", acting_user=None)

    _until(lambda: Instance.objects.get(pk=inst.pk).status == "stopped", "the instance did not stop", 60)
    attempt = inst.attempts.get()
    pgid, workspace = LocalBackend.parse_handle(attempt.handle)
    assert json.loads((workspace / "backend.json").read_text())["command"][-2:] == [
        "-m",
        "instances.interactive.keepalive",
    ]
    assert job_processes(str(workspace), pgid) == []  # keep-alive, JupyterLab and the notebook's kernel are gone
