"""JupyterLab from the instance page in a real browser (Debian's headless Chromium through Playwright), on the
real local backend: alice signs in, the instance page's panel (htmx) offers "Open JupyterLab", the click opens a
tab that goes through the portal's ticket hand-off into JupyterLab, which loads its UI. Screenshot:
``test-artifacts/jupyterlab-en.png``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from jupyter_support import running_with_jupyter
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


def test_jupyterlab_opens_from_the_instance_page(
    live_server: Any, settings: Any, local: Path, alice: Any, alice_org: Any
) -> None:
    from playwright.sync_api import sync_playwright

    from instances.services import instance_stop

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    ARTIFACTS.mkdir(exist_ok=True)
    inst = running_with_jupyter(alice, alice_org)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(
                locale="en-US", timezone_id="Asia/Shanghai", viewport={"width": 1280, "height": 800}
            )
            page = context.new_page()
            page.goto(f"{live_server.url}/login/")
            page.fill("#id_username", "alice@example.com")
            page.fill("#id_password", "correct horse battery 9")
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/o/{alice_org.slug}/")

            page.goto(f"{live_server.url}/o/{alice_org.slug}/instances/{inst.pk}/")
            button = page.locator("[data-testid=open-jupyter]")
            button.wait_for(timeout=15_000)  # the panel arrives by htmx
            assert button.text_content().strip() == "Open JupyterLab"
            with context.expect_page() as opened:
                button.click()
            lab = opened.value
            lab.wait_for_url(f"**/jupyter/{inst.pk}/lab**", timeout=30_000)
            lab.wait_for_selector(".jp-Launcher", timeout=60_000)  # the UI loaded and talks to its server
            assert lab.title().endswith("JupyterLab")
            lab.screenshot(path=str(ARTIFACTS / "jupyterlab-en.png"))
            browser.close()
    finally:
        instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    assert inst.status == "stopped"
