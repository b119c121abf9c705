"""Ledger memos are stored as a code with parameters beside their English text (issue 25) and shown in the
reader's language; lines written before codes get theirs from their text (migration ``billing.0012``), and a
memo typed by a person, or one no code knows, is shown as stored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.utils import timezone, translation

from billing.choices import GrantKind, SystemAccount, TransactionKind
from billing.memos import MEMOS, memo, memo_display, memo_of_text
from billing.models import LedgerEntry, LedgerTransaction
from billing.services import (
    BulkPosting,
    Posting,
    credit_grant_create,
    credit_grant_expire,
    ledger_post,
    ledger_post_many,
    system_account,
    wallet_create,
    wallet_spend,
    wallet_top_up,
)

# one sample of every code: (code, params, English, Chinese)
SAMPLES = [
    ("gpu_usage", {}, "GPU usage", "GPU 用量"),
    ("gpu_usage_uncovered", {}, "GPU usage (partly uncovered)", "GPU 用量（部分未能扣费）"),
    ("volume_hour", {"name": "work", "size_gb": 5, "hour": 1}, "Volume work (5 GB), hour 1",
     "数据卷 work（5 GB），第 1 小时"),
    ("app_call", {"name": "Contract review"}, "App call: Contract review", "应用调用：Contract review"),
    ("license_fee", {"name": "Corpus license v1"}, "License fee: Corpus license v1", None),
    ("grant_trial", {}, "Trial credit", None),
    ("grant_promotional", {}, "Promotional credit", None),
    ("grant_staff", {}, "Credit from staff", None),
    ("grant_expiry", {"name": {"code": "grant_trial", "params": {}}}, "Expiry of Trial credit", "试用额度到期"),
    ("top_up", {}, "Top-up", "充值"),
    ("stripe_top_up", {}, "Stripe top-up", "Stripe 充值"),
    ("stripe_refund", {}, "Stripe refund", "Stripe 退款"),
    ("stripe_dispute", {}, "Stripe dispute", "Stripe 争议扣款"),
    ("stripe_dispute_won", {}, "Stripe dispute won: amount credited back", "Stripe 争议胜诉：金额已退回"),
]  # fmt: skip


def test_every_code_has_a_sample_here() -> None:
    assert sorted(code for code, *_ in SAMPLES) == sorted(MEMOS.texts)


@pytest.mark.parametrize(("code", "params", "english", "chinese"), SAMPLES)
def test_a_memo_reads_in_each_language_and_its_text_reads_back_to_its_code(
    code: str, params: dict, english: str, chinese: str | None
) -> None:
    made = MEMOS.coded(code, **params)
    assert (str(made), made.code, made.params) == (english, code, params)
    assert MEMOS.parse(english) == (code, params)
    with translation.override("en"):
        assert memo_display(code=code, params=params, text="stored") == english
    with translation.override("zh-hans"):
        shown = memo_display(code=code, params=params, text="stored")
        assert shown != english
        if chinese is not None:
            assert shown == chinese


def test_a_memo_with_no_code_an_unknown_code_or_params_that_do_not_fit_shows_the_stored_text() -> None:
    with translation.override("zh-hans"):
        assert memo_display(code="", params={}, text="补偿停机") == "补偿停机"
        assert memo_display(code="gone_code", params={}, text="Old words") == "Old words"
        assert memo_display(code="volume_hour", params={"name": "w"}, text="Volume w") == "Volume w"
        assert memo_of_text("Custom words") == "Custom words"
        assert memo_of_text("Volume work (5 GB), hour 1") == "数据卷 work（5 GB），第 1 小时"


def test_an_unknown_code_is_refused_when_posting() -> None:
    with pytest.raises(KeyError, match="unknown text code 'volume_hours'"):
        memo("volume_hours", name="w")


def test_text_that_only_resembles_a_memo_is_not_given_a_code() -> None:
    assert MEMOS.parse("Volume work (five GB), hour 1") is None  # %(size_gb)d takes digits only
    assert MEMOS.parse("GPU usage today") is None  # whole text only
    assert MEMOS.parse("") is None


@pytest.mark.django_db
def test_each_posting_path_stores_the_code_and_params_beside_the_english_text(alice_org) -> None:
    """``ledger_post`` (a grant, its expiry, a top-up), ``wallet_spend`` and ``ledger_post_many`` (the metering
    tick's bulk path) all store the memo's code; a typed memo stores none."""
    now = timezone.now()
    grant = credit_grant_create(organization=alice_org, amount_micros=2_000_000, expires_at=now + timedelta(hours=1),
                                kind=GrantKind.PROMOTIONAL, idempotency_key="g1")  # fmt: skip
    credit_grant_create(organization=alice_org, amount_micros=1_000_000, expires_at=now + timedelta(days=2),
                        kind=GrantKind.STAFF, idempotency_key="g2", reason="补偿停机")  # fmt: skip
    wallet_top_up(organization=alice_org, amount_micros=3_000_000, idempotency_key="t1")
    wallet_spend(organization=alice_org, amount_micros=500_000, idempotency_key="s1", kind=TransactionKind.STORAGE,
                 memo=memo("volume_hour", name="work", size_gb=5, hour=1))  # fmt: skip
    credit_grant_expire(grant=grant, now=now + timedelta(hours=2))
    wallet = wallet_create(organization=alice_org)
    revenue = system_account(SystemAccount.REVENUE)
    ledger_post_many(
        postings=[BulkPosting(idempotency_key="b1", kind=TransactionKind.USAGE, organization_id=alice_org.pk,
                              memo=memo("gpu_usage_uncovered"), metadata={}, created_at=now,
                              legs=((wallet.paid_account_id, -100_000), (revenue.pk, 100_000)))],
        tracked_account_ids={wallet.paid_account_id},
    )  # fmt: skip
    rows = {
        t.idempotency_key: (t.memo, t.memo_code, t.memo_params)
        for t in LedgerTransaction.objects.filter(organization=alice_org)
    }
    assert rows == {
        "g1": ("Promotional credit", "grant_promotional", {}),
        "g2": ("补偿停机", "", {}),
        "t1": ("Top-up", "top_up", {}),
        "s1": ("Volume work (5 GB), hour 1", "volume_hour", {"name": "work", "size_gb": 5, "hour": 1}),
        f"grant-expiry:{grant.pk}": (
            "Expiry of Promotional credit",
            "grant_expiry",
            {"name": {"code": "grant_promotional", "params": {}}},
        ),
        "b1": ("GPU usage (partly uncovered)", "gpu_usage_uncovered", {}),
    }


@pytest.mark.django_db
def test_the_migration_gives_lines_written_before_codes_their_code_and_touches_nothing_else(alice_org) -> None:
    """Rows as the ledger wrote them before codes (plain English memos): recognised ones get their code and
    params, a typed one stays without; amounts, texts and keys are the same before and after."""
    from importlib import import_module

    backfill = import_module("billing.migrations.0012_memo_codes").memo_codes_from_text
    wallet = wallet_create(organization=alice_org)
    stripe = system_account(SystemAccount.STRIPE)
    legacy = ["Volume work (5 GB), hour 1", "Expiry of Trial credit", "Stripe top-up", "App call: Contract review",
              "人工调整", "Something else"]  # fmt: skip
    for i, text in enumerate(legacy):
        ledger_post(idempotency_key=f"old-{i}", kind=TransactionKind.ADJUSTMENT, organization=alice_org, memo=text,
                    postings=[Posting(wallet.paid_account, 1_000 + i), Posting(stripe, -1_000 - i)])  # fmt: skip
    before = list(LedgerEntry.objects.order_by("id").values_list("transaction__idempotency_key", "amount_micros"))
    assert set(LedgerTransaction.objects.values_list("memo_code", flat=True)) == {""}

    backfill(django_apps, None)

    after = {t.memo: (t.memo_code, t.memo_params) for t in LedgerTransaction.objects.all()}
    assert after == {
        "Volume work (5 GB), hour 1": ("volume_hour", {"name": "work", "size_gb": 5, "hour": 1}),
        "Expiry of Trial credit": ("grant_expiry", {"name": {"code": "grant_trial", "params": {}}}),
        "Stripe top-up": ("stripe_top_up", {}),
        "App call: Contract review": ("app_call", {"name": "Contract review"}),
        "人工调整": ("", {}),
        "Something else": ("", {}),
    }
    assert list(LedgerEntry.objects.order_by("id").values_list("transaction__idempotency_key", "amount_micros")) == (
        before
    )
    with translation.override("zh-hans"):
        shown = {t.memo: t.memo_display for t in LedgerTransaction.objects.all()}
    assert shown["Volume work (5 GB), hour 1"] == "数据卷 work（5 GB），第 1 小时"
    assert shown["Expiry of Trial credit"] == "试用额度到期"
    assert (shown["人工调整"], shown["Something else"]) == ("人工调整", "Something else")


def test_every_grant_kind_has_a_memo_that_reads_as_its_label() -> None:
    """The grant memos copy ``GrantKind``'s labels (the registry must stay free of model imports): a new kind
    without a memo, or a label changed on one side only, fails here instead of in ``credit_grant_create``."""
    from billing.memos import grant_memo

    with translation.override("en"):
        assert {k.value: str(grant_memo(k)) for k in GrantKind} == {k.value: str(k.label) for k in GrantKind}
    with translation.override("zh-hans"):
        assert [memo_display(code=grant_memo(k).code, params={}, text="") for k in GrantKind] == [
            str(k.label) for k in GrantKind
        ]
