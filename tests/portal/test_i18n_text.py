"""Stored English words and numbers shown in the reader's language: durations, money grouped by thousands,
ledger memos, pipeline stages, corpus languages, rental modes."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.utils import translation

from billing.pricing import PriceQuote
from portal.lib.durations import minutes_text


@pytest.mark.parametrize(
    ("language", "expected"),
    [("en", ["16 h 28 min", "45 min", "0 min", "∞"]), ("zh-hans", ["16 小时 28 分", "45 分钟", "0 分钟", "∞"])],
)
def test_durations_read_in_the_active_language(language: str, expected: list[str]) -> None:
    with translation.override(language):
        assert [minutes_text(988), minutes_text(45), minutes_text(0), minutes_text(None)] == expected
        assert PriceQuote(600_000, 600_000, 10_000_000, 988).runway_text == expected[0]


def _render(text: str, **context: object) -> str:
    return Template("{% load money i18n_text %}" + text).render(Context(context))


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_money_is_grouped_by_thousands_in_both_languages(language: str) -> None:
    from decimal import Decimal

    with translation.override(language):
        assert _render("{{ m|cny }} {{ s|cny6 }} {{ z|cny }}", m=1_738_915_200_000, s=-12_345_678_901, z=0) == (
            "1,738,915.20 -12,345.678901 0.00"
        )
        assert _render('{{ t|floatformat:"2g" }}', t=Decimal("1738915.20")) == "1,738,915.20"


@pytest.mark.parametrize(
    ("language", "expected"),
    [
        (
            "en",
            "App call: Contract review|GPU usage|Expiry of Trial credit|Custom words|deduplicating|English|Container",
        ),
        ("zh-hans", "应用调用：Contract review|GPU 用量|试用额度到期|Custom words|正在去重|英语|容器"),
    ],
)
def test_stored_english_words_are_shown_translated(language: str, expected: str) -> None:
    with translation.override(language):
        got = _render(
            "{{ a|ledger_memo }}|{{ b|ledger_memo }}|{{ c|ledger_memo }}|{{ d|ledger_memo }}"
            "|{{ stage|stage_label }}|{{ lang|language_label }}|{{ mode|mode_label }}",
            a="App call: Contract review",
            b="GPU usage",
            c="Expiry of Trial credit",
            d="Custom words",
            stage="deduplicate",
            lang="en",
            mode="container",
        )
    assert got == expected


def test_unknown_values_are_shown_as_they_are() -> None:
    with translation.override("zh-hans"):
        assert _render("{{ s|stage_label }}|{{ l|language_label }}|{{ m|mode_label }}", s="warp", l="xx", m="x") == (
            "warp|xx|x"
        )
