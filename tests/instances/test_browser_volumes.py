"""The volume form's live price in a real browser (Debian's headless Chromium through Playwright): an absurd
size typed into the form shows the form's own error in place of the price (the quote answers 400 and the price
box lets htmx swap it in), and a real size shows its price again — with the name still empty (the form asked
for the quote itself once, and the browser's validation of the empty name and of the size held every request
back, so the last price stayed on screen)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_browser_jobs import ARGS, CHROMIUM, _log_in_as_alice

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
def page(live_server: Any, settings: Any, tmp_path: Path) -> Any:
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = browser.new_context(locale="en-US", timezone_id="Asia/Shanghai")
        yield context.new_page()
        browser.close()


def test_an_absurd_size_shows_the_forms_error_in_place_of_the_price(
    page: Any, live_server: Any, alice: Any, funded: Any
) -> None:
    from instances.models import Volume

    base = live_server.url
    _log_in_as_alice(page, base, funded.slug)
    page.goto(f"{base}/o/{funded.slug}/volumes/")
    assert "10 GB costs 0.005000 CNY per hour" in page.inner_text("#volume-price")
    for typed, shown in [
        ("1e30", "Enter a whole number."),
        ("1000000000000000000000000000000", "Ensure this value is less than or equal to 1000000."),
    ]:
        page.fill("#id_size_gb", typed)
        page.locator("#id_size_gb").dispatch_event("change")  # the form asks for the price on change (and keyup)
        page.wait_for_selector("[data-testid=volume-price-error]")
        assert page.inner_text("[data-testid=volume-price-error]") == shown
        page.fill("#id_size_gb", "3")
        page.locator("#id_size_gb").dispatch_event("change")
        page.wait_for_selector("[data-testid=volume-price]")
        assert "3 GB costs 0.001500 CNY per hour" in page.inner_text("#volume-price")
    assert Volume.objects.count() == 0
