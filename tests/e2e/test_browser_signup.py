"""The newcomer's first minutes in a real browser: Debian's headless Chromium driven by Playwright.

Sign up → open the verification link from the e-mail outbox → the dashboard shows 10.00 CNY of
trial credit → switch to Chinese and see the dashboard in Chinese. At 1280×800 the header is one row in both
languages (measured: its height is one row of its children plus its padding). Screenshots are saved under
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
VIEWPORT = {"width": 1280, "height": 800}  # a common laptop screen: the header must stay one row
# The header's geometry: its height, the tallest of its visible children, its padding, whether its content is
# wider than itself (cut off) and the vertical centres of its visible children and nav links.
HEADER_GEOMETRY = """() => {
  const h = document.querySelector("header.topbar");
  const style = getComputedStyle(h);
  const shown = [...h.children, ...h.querySelectorAll(".mainnav > a")].filter((e) => e.getClientRects().length);
  const centre = (e) => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; };
  const kids = [...h.children].filter((e) => e.getClientRects().length);
  return {
    height: h.getBoundingClientRect().height,
    tallest: Math.max(...kids.map((e) => e.getBoundingClientRect().height)),
    padding: parseFloat(style.paddingTop) + parseFloat(style.paddingBottom),
    overflow: h.scrollWidth - h.clientWidth,
    centres: shown.map(centre),
  };
}"""


def _assert_one_row_header(page) -> dict:
    """The header of the page is one row at the viewport's width; returns its geometry (for the report)."""
    geometry = page.evaluate(HEADER_GEOMETRY)
    assert abs(geometry["height"] - (geometry["tallest"] + geometry["padding"])) < 1, geometry  # one row of children
    centres = geometry.pop("centres")
    assert max(centres) - min(centres) < 2, (centres, geometry)  # every child and nav link on the same line
    assert geometry["overflow"] <= 0, geometry  # and nothing pushed out of sight on the right
    return geometry


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
        context = browser.new_context(locale="en-US", timezone_id="Asia/Shanghai", viewport=VIEWPORT)
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
    english = _assert_one_row_header(page)  # signed in, with the organization's whole navigation

    page.select_option("[data-testid=language-switcher]", "zh-hans")
    page.wait_for_load_state("load")
    page.wait_for_selector("text=试用额度")
    assert page.get_attribute("html", "lang") == "zh-hans"
    assert page.text_content("h1").strip().startswith("概览")
    assert page.text_content("[data-testid=balance-trial]").strip() == "10.00 CNY"
    page.screenshot(path=str(ARTIFACTS / "dashboard-zh.png"), full_page=True)
    chinese = _assert_one_row_header(page)
    print(f"header at {VIEWPORT['width']}x{VIEWPORT['height']}: en {english}, zh {chinese}")
