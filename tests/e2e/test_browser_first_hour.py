"""The first hour of a new user in real Chromium (Debian's headless build through Playwright), in English and in
Chinese: sign up → open the verification link from the e-mail outbox → accept a dataset's license in its dialog
(which must open inside the visible page) → launch a training job on the local CPU backend with the launch
form's defaults (small explicit hyperparameters so that a step and a checkpoint come within seconds) → see the
first step and the first checkpoint on the job page → stop it → read the month's statement with its usage line.

Nothing is replaced: the live server, the database, the browser, torchrun and the training runtime (reporting to
the live server over HTTP) are real; e-mail goes to Django's in-memory outbox and Celery runs tasks eagerly
(the stop request waits for the runtime's final checkpoint). The periodic metering tick is run by the test once
the job has stopped, as beat would. In Chinese, every page visited is scanned for untranslated UI text
(``portal.lib.i18n_scan``). Screenshots go to ``test-artifacts/``. Every process started is ended (the
fixture stops whatever job processes are left, then checks none is alive).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core import mail

from portal.lib.i18n_scan import findings_report, untranslated_words

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
# bounds a hung run (torchrun start-up on a busy 2-core machine); not a speed goal
WAIT_MS = int(os.environ.get("FIRST_HOUR_WAIT_MS", "240000"))
VIEWPORT = {"width": 1280, "height": 800}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.engine_independent(
        "a browser journey: it proves pages, scripts and htmx swaps; the queries behind them run on PostgreSQL in "
        "the view and API tests of the same pages"
    ),
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists(),
        reason=f"{CHROMIUM} not installed (apt-get install chromium); .ci/test installs it",
    ),
]

MACHINE_NAMES = {"local"}  # the local backend's node ("Starts now on local."): a name, not UI text
# What each language's run types and sees (the user's own words are not UI text).
RUNS = {
    "en": {"locale": "en-US", "name": "Newcomer", "job": "first-hour", "stopped": "Stopped"},
    "zh-hans": {"locale": "zh-CN", "name": "新用户", "job": "第一小时", "stopped": "已停止"},
}


def _requests_serialized(live_server: Any) -> Any:
    """Make the live server answer one request at a time; returns the function that undoes it.

    The test database is SQLite in memory, one connection the live server's request threads share (Django's
    ``connections_override``). Here the browser's htmx polling, its clicks and the training ranks' progress
    callbacks arrive at once, and two threads inside one shared-cache SQLite connection fail with "database
    table is locked" (PostgreSQL, and the product's own file database with its busy timeout, simply wait).
    Serializing requests is what a one-worker server does; nothing here streams."""
    import threading

    httpd = live_server.thread.httpd
    app = httpd.get_app()
    lock = threading.Lock()

    def one_at_a_time(environ: Any, start_response: Any) -> list[bytes]:
        with lock:
            result = app(environ, start_response)
            try:
                return [b"".join(result)]
            finally:
                if hasattr(result, "close"):
                    result.close()

    httpd.set_app(one_at_a_time)
    return lambda: httpd.set_app(app)


@pytest.fixture
def platform(live_server: Any, settings: Any, tmp_path: Path) -> Iterator[Any]:
    """The embedded product on the live server: local CPU backend (2 slots), the catalog, the local node, and a
    public dataset whose license needs an agreement, with real training shards. Yields the dataset version;
    on the way out stops any job process still running and checks that none is left."""
    from django.core.management import call_command

    from datasets.services import dataset_create, dataset_version_create, license_version_create
    from instances.runtime.shards import ShardWriter
    from instances.services import backend as boundary
    from instances.services import nodes_sync

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"  # Playwright's sync API runs an event loop here
    settings.SITE_URL = live_server.url
    settings.DATA_DIR = tmp_path / "data"
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "data" / "workspaces"), "slots": 2}
    settings.INSTANCES_CHECKPOINT_ROOT = str(tmp_path / "data" / "checkpoints")
    settings.INSTANCES_STOP_GRACE_S = 60
    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    lv = license_version_create(
        slug="legal-corpus-license",
        name="法律语料许可",
        text="仅限用于模型训练。",
        commercial_use=True,
        redistribution=False,
        derivative_models=True,
    )
    ds = dataset_create(slug="legal-corpus", name="法律语料", domain="legal", description="用于训练的法律文本。")
    rel = "datasets/legal-corpus/v1/shards"
    with ShardWriter(settings.DATA_DIR / rel, vocab_size=300, eos_id=0) as w:
        for d in range(200):
            w.add_document([1 + (d * 7 + i) % 299 for i in range(40)])
    version = dataset_version_create(
        dataset=ds,
        license_version=lv,
        statistics={"documents": 200, "bytes": 16000, "characters": 8000, "tokens": 8000, "language": "zh"},
        deid_report={},
        deid_status="deidentified",
        shard_dir=rel,
        tokenizer_path="",
        source_files=[{"file": "legal.jsonl", "bytes": 16000, "sha256": "0" * 64}],
    )
    restore = _requests_serialized(live_server)
    try:
        yield version
    finally:
        restore()
        backend = boundary.compute_backend()
        for handle in backend.running_handles():
            backend.stop(handle, 5.0)
        assert backend.running_handles() == []


@pytest.fixture(params=list(RUNS))
def run(request: Any, platform: Any) -> Iterator[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    language = request.param
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)  # fresh temporary profile
        try:
            context = browser.new_context(
                locale=RUNS[language]["locale"], timezone_id="Asia/Shanghai", viewport=VIEWPORT
            )
            page = context.new_page()
            page.set_default_timeout(WAIT_MS)
            yield {"language": language, "page": page, "version": platform, "findings": {}, **RUNS[language]}
        finally:
            browser.close()


def _visit(run: dict[str, Any], name: str) -> None:
    """Screenshot the page, and in Chinese scan it for untranslated UI text."""
    page = run["page"]
    page.wait_for_load_state("load")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"first-hour-{run['language']}-{name}.png"), full_page=True)
    if run["language"] == "zh-hans":
        assert page.get_attribute("html", "lang") == "zh-hans"
        run["findings"][f"{name} ({page.url})"] = untranslated_words(page.content(), allowed=MACHINE_NAMES)


def test_the_first_hour_in_the_browser(run: dict[str, Any], live_server: Any) -> None:
    from django.utils import timezone

    from billing.metering import metering_tick
    from instances.models import TrainingJob

    page, base, version = run["page"], live_server.url, run["version"]
    email = f"first-hour-{run['language']}@example.com"

    # sign up, then verify through the link in the e-mail
    page.goto(f"{base}/signup/")
    _visit(run, "1-signup")
    page.fill("#id_email", email)
    page.fill("#id_name", run["name"])
    page.fill("#id_password1", "correct horse battery 9")
    page.fill("#id_password2", "correct horse battery 9")
    page.click("form button[type=submit]")
    page.wait_for_url(re.compile(r"/o/[\w-]+/$"))
    org_url = page.url.rstrip("/")
    messages = [m for m in mail.outbox if email in m.to]
    assert len(messages) == 1
    link = re.search(r"http://\S+/verify/\S+/", messages[0].body).group(0)
    page.goto(link)
    page.wait_for_url(f"{org_url}/")
    assert page.text_content("[data-testid=balance-trial]").strip() == "10.00 CNY"
    _visit(run, "2-dashboard")

    # the dataset's license, accepted in a dialog that opens where the user is looking
    page.goto(f"{org_url}/datasets/")
    _visit(run, "3-datasets")
    page.goto(f"{org_url}/datasets/{version.dataset.pk}/")
    _visit(run, "4-dataset")
    page.click("[data-testid=dataset-status] button.primary")
    dialog = page.locator("[data-testid=agreement-modal]")
    dialog.wait_for(state="visible")
    box, accept = dialog.bounding_box(), page.locator("[data-testid=agreement-modal] button[type=submit]")
    accept_box = accept.bounding_box()
    assert box is not None and accept_box is not None
    # the dialog opens inside the viewport (no scrolling to find it) and its "I accept" button is in view too
    assert 0 <= box["y"] < VIEWPORT["height"], box
    assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"], box
    assert accept_box["y"] >= 0 and accept_box["y"] + accept_box["height"] <= VIEWPORT["height"], accept_box
    _visit(run, "5-license-dialog")
    accept.click()
    page.wait_for_selector("[data-testid=dataset-status] form[action$='/mount/']")
    _visit(run, "6-license-accepted")

    # launch with the form's defaults (GPU type, count, model, engine), small explicit hyperparameters
    page.goto(f"{org_url}/jobs/new/")
    _visit(run, "7-launch")
    assert page.input_value("#id_gpu_type") == "cpu-local"
    page.fill("#id_name", run["job"])
    page.check(f"input[name=datasets][value='{version.pk}']")
    page.fill("#id_seq_len", "32")
    page.fill("#id_micro_batch", "2")
    page.fill("#id_max_steps", "100000")
    page.fill("#id_checkpoint_every_steps", "20")
    # a full-page screenshot just before the click left Chromium's layout stale (the click hit the form):
    # bring the button into view first
    page.locator("#launch-form button[type=submit]").scroll_into_view_if_needed()
    page.click("#launch-form button[type=submit]")
    try:
        page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    except Exception:  # the form came back: show why
        page.screenshot(path=str(ARTIFACTS / f"first-hour-{run['language']}-7-launch-refused.png"), full_page=True)
        jobs = list(TrainingJob.objects.values_list("name", "instance__status", "instance__status_reason"))
        raise AssertionError(f"launch refused ({page.url}, jobs {jobs}): {page.text_content('#launch-form')}") from None
    job = TrainingJob.objects.get(name=run["job"])
    assert page.url == f"{org_url}/jobs/{job.pk}/"

    # the job page (htmx refresh) shows the first step, then the first checkpoint
    page.wait_for_function("() => Number(document.querySelector('[data-testid=job-step]').textContent) >= 1")
    page.wait_for_selector(f"a[href*='/jobs/{job.pk}/rollback/']")
    _visit(run, "8-job-running")

    # stop: a final checkpoint, then stopped
    page.click(f"a[href$='/jobs/{job.pk}/stop/']")
    _visit(run, "9-stop-confirm")
    page.click("form button[type=submit].danger")
    page.wait_for_function(
        "(want) => document.querySelector('[data-testid=job-status]').textContent.trim() === want", arg=run["stopped"]
    )
    _visit(run, "10-job-stopped")
    job.refresh_from_db()
    assert (job.instance.status, job.instance.status_reason_code) == ("stopped", "stopped_checkpoint")
    assert job.checkpoints.exists()

    # the month's statement, after the minute tick beat would run, lists the instance's usage
    metering_tick(now=timezone.now())
    page.goto(f"{org_url}/wallet/")
    _visit(run, "11-wallet")
    now = timezone.localtime()
    page.click(f"a[href$='/statements/{now.year}/{now.month}/']")
    page.wait_for_selector(f"[data-testid=usage-instance-{job.instance.pk}]")  # the line names the instance
    assert "cpu-local" in page.text_content("body")
    _visit(run, "12-statement")

    report = findings_report(run["findings"])
    assert not report, "untranslated UI text on zh-hans pages:\n" + report
