"""The newcomer's first minutes in a real browser: Debian's headless Chromium driven by Playwright.

Sign up → open the verification link from the e-mail outbox → the dashboard shows 10.00 CNY of
trial credit → switch to Chinese and see the dashboard in Chinese. Screenshots are saved under
``test-artifacts/``. Nothing is replaced: the live server, the database and the browser are real;
only e-mail goes to Django's in-memory outbox instead of an SMTP server.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.core import mail

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
        reason=f"{CHROMIUM} not installed (apt-get install chromium); .ci/test installs it",
    ),
]


@pytest.fixture
def page(live_server, settings):
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)  # fresh temporary profile
        context = browser.new_context(locale="en-US", timezone_id="Asia/Shanghai")
        yield context.new_page()
        browser.close()


def test_signup_verify_and_see_trial_credit_then_switch_to_chinese(page, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    page.goto(f"{live_server.url}/signup/")
    page.fill("#id_email", "newcomer@example.com")
    page.fill("#id_name", "Newcomer")
    page.fill("#id_password1", "correct horse battery 9")
    page.fill("#id_password2", "correct horse battery 9")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/o/[\w-]+/$"))
    assert page.text_content("[data-testid=balance-trial]").strip() == "0.00 CNY"

    assert len(mail.outbox) == 1
    link = re.search(r"http://\S+/verify/\S+/", mail.outbox[0].body).group(0)
    page.goto(link)
    page.wait_for_url(re.compile(r"/o/[\w-]+/$"))
    assert page.text_content("[data-testid=balance-trial]").strip() == "10.00 CNY"
    assert page.text_content("[data-testid=balance-total]").strip() == "10.00 CNY"
    assert "Expires" in page.text_content("[data-testid=trial-expiry]")
    page.screenshot(path=str(ARTIFACTS / "dashboard-en.png"), full_page=True)

    page.select_option("[data-testid=language-switcher]", "zh-hans")
    page.wait_for_load_state("load")
    page.wait_for_selector("text=试用额度")
    assert page.get_attribute("html", "lang") == "zh-hans"
    assert page.text_content("h1").strip().startswith("概览")
    assert page.text_content("[data-testid=balance-trial]").strip() == "10.00 CNY"
    page.screenshot(path=str(ARTIFACTS / "dashboard-zh.png"), full_page=True)
