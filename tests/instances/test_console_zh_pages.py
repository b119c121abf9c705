"""Every console page reads in Chinese: each page a logged-in owner can open (and the anonymous ones) is
rendered in zh-hans with data on it (a running job with steps and a checkpoint, a crashed one, metered usage,
an app and a call to it, an upload, a token, a webhook endpoint with deliveries, a teammate, a statement), and
its visible text may hold no ASCII word outside the allow-list of product names and units
(``portal.lib.i18n_scan``) and the names this test gave its own objects.

Stored texts are part of the data (issue 25): the wallet holds a ledger line of every memo code of
``billing.memos`` (volume hours, Stripe top-ups, refunds and disputes, grants and their expiry, a license fee,
an adjustment and a staff grant typed by a person), the app was published "when its first version was built"
and has a version whose model server gave up restarting, and the crashed job's runtime said why it exited (its
page is scanned as well: the crash's summary beside its last log lines).

The routes come from the URLconf: a page without parameters other than ``org`` is scanned as soon as it
exists; a new route with other parameters fails this test until it is given values below (or listed as an
action that has no page of its own).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from instances_support import FakeBackend

# Routes that are not pages, each with the reason it is skipped: POST-only actions, redirects, machine endpoints,
# one-time links. Every other route of the URLconf (outside admin/ and api/) is requested.
NOT_PAGES: dict[str | None, str] = {
    "logout": "POST only",
    "verify_email": "a one-time link (its page is the dashboard it redirects to)",
    "resend_verification": "POST only",
    "password_reset_confirm": "a one-time link",
    "api_token_revoke": "POST only",
    "member_remove": "POST only",
    "job_checkpoint_now": "POST only",
    "job_checkpoint_pin": "POST only",
    "dataset_mount": "POST only",
    "app_state": "POST only",
    "app_try": "POST only (the result fragment of the app page)",
    "webhook_endpoint_delete": "POST only",
    "webhook_endpoint_rotate": "POST only",
    "webhook_delivery_redeliver": "POST only",
    "topup_start": "POST only (redirects to Stripe Checkout)",
    "stripe_webhook": "Stripe's endpoint",
    "set_language": "POST only",
    "launch_quote": "an htmx fragment of the launch forms (scanned with them)",
    "volume_quote": "an htmx fragment of the Volumes page (scanned with it)",
    "instance_jupyter_panel": "an htmx fragment of the instance page (scanned with it)",
    "instance_access": "an htmx fragment of the instance page: SSH command and utilization (scanned with it)",
    "instance_jupyter": "the door: a page that POSTs a ticket to the JupyterLab server, or a redirect",
    "instance_keep_running": "POST only",
    "ssh_key_revoke": "POST only",
    "instance_share_remove": "POST only",
    "volume_share_remove": "POST only",
    None: "favicon",
}
# Memo codes no ledger line of this data set carries, each with the reason (tests/billing/test_memos.py renders it).
MEMOS_NOT_POSTED = {"gpu_usage_uncovered": "needs a wallet that runs dry in the middle of a metering tick"}
ANONYMOUS = ["home", "signup", "login", "password_reset", "password_reset_done", "password_reset_complete", "pricing"]
# The names this test gives its objects (user data is not UI text).
OWN_WORDS = {"alice", "bob", "A", "Corpus", "corpus", "license", "Use", "it", "for", "training", "legal",
             "crashy", "local", "Contract", "review", "Finds", "risky", "clauses", "notes", "ci", "hook", "example",
             "shell", "sleep", "box", "data1", "laptop", "v1"}  # fmt: skip
# A valid public key for alice's SSH keys page (made with ssh-keygen -t ed25519; the private half was discarded).
ED25519_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICnsBniNCIT3LucBYZyH5D1s+7s3OpAViRvaujgJnLnm laptop"


def _routes() -> list[tuple[str | None, str, list[str]]]:
    from django.urls import URLPattern, URLResolver, get_resolver

    found: list[tuple[str | None, str, list[str]]] = []

    def walk(patterns: Any, prefix: str, outer: list[str]) -> None:
        for p in patterns:
            params = outer + list(p.pattern.regex.groupindex)
            if isinstance(p, URLResolver):
                route = str(p.pattern)
                if not route.startswith(("admin/", "api/")):
                    walk(p.url_patterns, prefix + route, params)
            elif isinstance(p, URLPattern):
                found.append((p.name, prefix + str(p.pattern), params))

    walk(get_resolver().url_patterns, "", [])
    return found


@pytest.fixture
def world(
    alice: Any,
    bob: Any,
    funded: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> dict[str, Any]:
    """alice's organization with something on every page; returns the values of the routes' parameters."""
    from django.utils import timezone

    from billing.metering import metering_tick
    from billing.services import wallet_top_up
    from instances.backends.base import JobStatus, state_for_exit_code
    from instances.models import Checkpoint, JobEvent, JobLogArchive, JobMetric
    from instances.services import LaunchSpec, attempt_observe, instance_launch
    from portal.choices import TokenScope
    from portal.marketplace import calls
    from portal.marketplace import services as apps
    from portal.marketplace.choices import AppState, AppVisibility, ServingKind
    from portal.marketplace.models import AppVersion
    from portal.marketplace.reasons import app_reason
    from portal.services import api_token_create
    from portal.webhooks.services import webhook_endpoint_create

    settings.APP_ALLOW_HTTP_ENDPOINTS = True  # no DNS here: the endpoint check is lifted, as in the webhook tests
    wallet_top_up(organization=funded, amount_micros=25_000_000, idempotency_key="zh-topup")
    webhook_endpoint_create(
        organization=funded, user=alice, url="http://127.0.0.1:9/hook", event_types=["instance.state_changed"]
    )
    api_token_create(user=alice, organization=funded, name="ci", scope=TokenScope.READ)
    jobs = []
    for name in ("legal-tiny", "crashy"):
        with django_capture_on_commit_callbacks(execute=True):
            inst = instance_launch(
                organization=funded,
                user=alice,
                spec=LaunchSpec(
                    name=name,
                    gpu_type="cpu-local",
                    gpu_count=1,
                    dataset_version_ids=[licensed.pk],
                    hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 10},
                ),
            )
        attempt = inst.job.attempts.get()
        attempt_observe(attempt=attempt, status=JobStatus("running"))
        jobs.append(inst.job)
    job, crashy = jobs
    attempt = job.attempts.get()
    for step, loss in ((1, 7.5), (2, 7.0), (3, 6.5)):
        JobMetric.objects.create(job=job, attempt=attempt, step=step, loss=loss, lr=1e-4, tokens_per_s=1000.0 + step)
    cp = Checkpoint.objects.create(job=job, attempt=attempt, step=2, location="/c/step-2", size_bytes=2048, loss=7.0)
    Checkpoint.objects.create(  # one pruned by keep-last-K, shown as such
        job=job, attempt=attempt, step=1, location="/c/step-1", size_bytes=2048, loss=7.5, deleted_at=timezone.now()
    )
    metering_tick(now=timezone.now() + timedelta(minutes=3))
    state, message = state_for_exit_code(87)
    crashed = crashy.attempts.get()
    JobEvent.objects.create(  # what the runtime said as it exited (issue 25, item 2's refusal)
        job=crashy, attempt=crashed.number, seq=99, type="exit",
        payload={"reason": "failed", "exit_code": 87, "step": 0,
                 "message": "resume_step 320: no complete checkpoint at that step"},
    )  # fmt: skip
    JobLogArchive.objects.create(
        attempt=crashed, rank=0, text="step 0: resuming\nexit failed (87) at step 0: resume_step 320: no complete\n"
    )
    attempt_observe(attempt=crashed, status=JobStatus(state, 87, message))

    app = apps.app_create(
        publisher=funded,
        user=alice,
        name="Contract review",
        category="legal",
        description="Finds risky clauses.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        output_schema={"type": "object"},
        price_per_call_micros=500_000,
        visibility=AppVisibility.PRIVATE,
    )
    first, _secret = apps.app_version_add(app=app, user=alice, kind=ServingKind.ECHO, endpoint_url="", lineage=None)
    apps.app_version_add(app=app, user=alice, kind=ServingKind.ECHO, endpoint_url="", lineage=None)
    AppVersion.objects.filter(pk=first.pk).update(  # a model server the health check gave up restarting
        deployment={"stage": "unhealthy", "restart_failures": 3, "unhealthy_code": "restarts_failed",
                    "unhealthy_reason": "3 restarts in a row failed; last: RuntimeError: exited with code 1",
                    "last_error": "RuntimeError: exited with code 1"}
    )  # fmt: skip
    apps.app_transition(app=app, to=AppState.PUBLISHED, reason=app_reason("published_first_version"), acting_user=None)
    calls.app_invoke(app=app, caller=funded, user=alice, payload={"text": "合同"}, idempotency_key="zh-call")

    from datasets.services.uploads import upload_create

    upload = upload_create(
        organization=funded,
        user=alice,
        file=SimpleUploadedFile("notes.jsonl", '{"text": "第一条"}\n'.encode()),
        name="notes",
        fmt="jsonl",
    )
    from instances.interactive.volumes import volume_create
    from portal.sshkeys import ssh_key_add

    with django_capture_on_commit_callbacks(execute=True):
        box = instance_launch(
            organization=funded,
            user=alice,
            spec=LaunchSpec(name="box", kind="interactive", gpu_type="cpu-local", gpu_count=1, command=["sleep", "60"]),
        )
    attempt_observe(attempt=box.attempts.get(), status=JobStatus("running"))
    volume = volume_create(organization=funded, user=alice, name="data1", size_gb=1)
    ssh_key_add(user=alice, name="laptop", public_key=ED25519_KEY)
    _ledger_lines_of_every_kind(funded, alice)
    now = timezone.localtime()
    return {
        "org": funded.slug,
        "pk": {
            "instance_detail": job.instance.pk,
            "instance_stop": job.instance.pk,
            "job_detail": job.pk,
            "job_stop": job.pk,
            "job_restart": job.pk,
            "job_logs": job.pk,
            "job_rollback": job.pk,
            "dataset_detail": licensed.dataset.pk,
            "dataset_agreement": licensed.dataset.pk,
            "upload_detail": upload.pk,
            "volume_delete": volume.pk,
            "instance_shares": box.pk,
            "volume_shares": volume.pk,
        },
        "checkpoint": cp.pk,
        "job_id": job.pk,
        "checkpoint_id": cp.pk,
        "slug": app.slug,
        "year": now.year,
        "month": now.month,
        "crashy": crashy,
    }


def _ledger_lines_of_every_kind(org: Any, alice: Any) -> None:
    """The ledger lines the GPU metering, the app call and the license agreement did not already post: a volume's
    first hour (the volume tick), top-ups, a Stripe refund, dispute and won dispute, a promotional grant and its
    expiry, staff grants (one with the kind's words, one with a reason typed in Chinese) and an adjustment."""
    from django.utils import timezone

    from billing.choices import GrantKind, SystemAccount, TransactionKind
    from billing.memos import memo
    from billing.models import Wallet
    from billing.services import (
        Posting,
        credit_grant_create,
        credit_grant_expire,
        ledger_adjust,
        ledger_post,
        system_account,
        wallet_spend,
        wallet_top_up,
    )
    from billing.volume_metering import volume_metering_tick

    now = timezone.now()
    volume_metering_tick(now=now + timedelta(minutes=1))
    wallet_top_up(organization=org, amount_micros=5_000_000, idempotency_key="zh-stripe", memo=memo("stripe_top_up"))
    paid, stripe = Wallet.objects.get(organization=org).paid_account, system_account(SystemAccount.STRIPE)
    for code, micros in (("stripe_refund", -1_000_000), ("stripe_dispute", -500_000), ("stripe_dispute_won", 500_000)):
        ledger_post(idempotency_key=f"zh-{code}", kind=TransactionKind.REFUND, organization=org, memo=memo(code),
                    postings=[Posting(paid, micros), Posting(stripe, -micros)])  # fmt: skip
    promo = credit_grant_create(organization=org, amount_micros=1_000_000, expires_at=now + timedelta(hours=1),
                                kind=GrantKind.PROMOTIONAL, idempotency_key="zh-promo")  # fmt: skip
    credit_grant_expire(grant=promo, now=now + timedelta(hours=2))
    credit_grant_create(organization=org, amount_micros=1_000_000, expires_at=now + timedelta(days=9),
                        kind=GrantKind.STAFF, idempotency_key="zh-staff")  # fmt: skip
    credit_grant_create(organization=org, amount_micros=1_000_000, expires_at=now + timedelta(days=9),
                        kind=GrantKind.STAFF, idempotency_key="zh-staff-typed", reason="补偿停机")  # fmt: skip
    ledger_adjust(
        organization=org, amount_micros=200_000, reason="人工调整", staff_user=alice, idempotency_key="zh-adj"
    )
    wallet_spend(organization=org, amount_micros=300_000, idempotency_key="zh-license",
                 kind=TransactionKind.LICENSE_FEE, memo=memo("license_fee", name="Corpus license v1"))  # fmt: skip


def _url(name: str, route: str, params: list[str], world: dict[str, Any]) -> str:
    from django.urls import reverse

    kwargs: dict[str, Any] = {}
    for p in params:
        value = world["pk"].get(name) if p == "pk" else world.get(p)
        if value is None:
            pytest.fail(f"route {name!r} ({route}) has a parameter {p!r} this test has no value for: add it")
        kwargs[p] = value
    return reverse(name, kwargs=kwargs)


def _scan(client: Any, url: str) -> list[Any]:
    from portal.lib.i18n_scan import untranslated_words

    response = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 200, f"{url}: {response.status_code}"
    html = response.content.decode()
    assert '<html lang="zh-hans">' in html, url
    return untranslated_words(html, allowed=OWN_WORDS)


def test_every_console_page_reads_in_chinese(client: Any, alice: Any, world: dict[str, Any]) -> None:
    from portal.lib.i18n_scan import findings_report

    findings: dict[str, list[Any]] = {}
    for name in ANONYMOUS:
        from django.urls import reverse

        findings[f"(anonymous) {name}"] = _scan(client, reverse(name))
    client.force_login(alice)
    scanned = 0
    for name, route, params in _routes():
        if name in NOT_PAGES or name in ANONYMOUS:
            continue
        assert name is not None
        url = _url(name, route, params, world)
        findings[url] = _scan(client, url)
        scanned += 1
    # the crashed job's page too: the runtime's exit reason in words beside its last log lines
    crash_page = reverse("job_detail", kwargs={"org": world["org"], "pk": world["crashy"].pk})
    findings[crash_page] = _scan(client, crash_page)
    assert scanned >= 25
    report = findings_report(findings)
    assert not report, "untranslated UI text on zh-hans pages:\n" + report
    _stored_texts_read_in_chinese(client, alice, world)


def _stored_texts_read_in_chinese(client: Any, alice: Any, world: dict[str, Any]) -> None:
    """The data set really holds every kind of stored text the scan is meant to cover, and each reads in
    Chinese: every memo code (but those listed in ``MEMOS_NOT_POSTED``), the app's state reason, the unhealthy
    version, the crash summary. (Part of the scan's test: one data set per module.)"""
    from django.urls import reverse

    from billing.memos import MEMOS
    from billing.models import LedgerTransaction

    posted = set(LedgerTransaction.objects.filter(organization__slug=world["org"]).values_list("memo_code", flat=True))
    assert set(MEMOS.texts) - posted == set(MEMOS_NOT_POSTED)
    client.force_login(alice)
    org = world["org"]

    def page(name: str, **kwargs: Any) -> str:
        return client.get(reverse(name, kwargs={"org": org, **kwargs}), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()

    wallet = page("wallet")
    for text in ("数据卷 data1（1 GB），第 1 小时", "Stripe 充值", "Stripe 退款", "Stripe 争议扣款",
                 "Stripe 争议胜诉：金额已退回", "补偿停机", "人工调整", "应用调用：Contract review"):  # fmt: skip
        assert f"<td>{text}</td>" in wallet, text
    app = page("app_detail", slug=world["slug"])
    assert '<p class="muted" data-testid="app-state-reason">首个版本构建完成后已自动上架</p>' in app
    assert "连续 3 次重启失败；最近一次错误： <code>RuntimeError: exited with code 1</code>" in app
    crash = page("job_detail", pk=world["crashy"].pk)
    summary = "训练程序无法从给定的检查点精确恢复：未进行任何训练（不会重试）；请回滚到另一个检查点"
    assert f'<p data-testid="crash-summary">{summary}</p>' in crash
    assert '<code data-testid="crash-message">resume_step 320: no complete checkpoint at that step</code>' in crash
    assert "exit failed (87) at step 0: resume_step 320: no complete\n</pre>" in crash


def test_the_scanner_reads_text_only_and_reports_english_words() -> None:
    from portal.lib.i18n_scan import untranslated_words

    html = """<html><head><title>概览</title><style>.a{color:red}</style></head><body>
      <p class="Running">运行中 <b>Running</b> 16 h 28 min</p>
      <script>var Running = 1;</script><code>Authorization: Bearer gp_x</code>
      <p>alice@example.com corpus.jsonl v1.2 A100-80G-SXM 0.60 CNY · 8 GPU <span translate="no">my-job</span></p>
      <p>步骤 12 / 1000<br>tokens/s</p></body></html>"""
    assert [f.word for f in untranslated_words(html)] == ["Running", "h", "min", "s"]
    assert untranslated_words("<p>Step 3</p>", allowed={"Step"}) == []
    # what a reader sees as a tooltip or placeholder, or hears from a screen reader, is read too
    attributes = """<p><input placeholder="Search jobs" name="q"><button title="Stop now" aria-label="停止">x</button>
      <img alt="Loss chart" src="a.png"/><input type="submit" value="Launch"><input type="text" value="legal">
      <span translate="no" title="my title">名</span><a href="/Login" class="Nav">登录</a></p>"""
    found = [f.word for f in untranslated_words(attributes)]
    assert found == ["Search", "jobs", "Stop", "now", "x", "Loss", "chart", "Launch"]


def test_no_chinese_translation_holds_untranslated_words() -> None:
    """Every msgstr of the zh_Hans catalogue passes the scanner (placeholders and markup aside)."""
    import gettext
    import re
    from pathlib import Path

    from django.conf import settings

    from portal.lib.i18n_scan import untranslated_words

    mo = Path(settings.LOCALE_PATHS[0]) / "zh_Hans" / "LC_MESSAGES" / "django.mo"
    with open(mo, "rb") as f:
        catalog = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    bad = {}
    for msgid, msgstr in catalog.items():
        if not msgid or not isinstance(msgstr, str):
            continue  # the header
        text = re.sub(r"%\(\w+\)[sd]|%[sd]", "0", msgstr)
        words = [f.word for f in untranslated_words(f"<p>{text}</p>")]
        if words:
            bad[msgstr] = words
    assert bad == {}
