"""The engine of stored texts as codes with parameters (``portal.lib.coded_text``): English text, rendering in
the active language with nested texts and lists, falling back to the stored text, and reading English back."""

from __future__ import annotations

import pytest
from django.utils import translation

from portal.lib.coded_text import CodedText, TextCodes, coded_fields

CODES = TextCodes(
    {
        "fixed": "Top-up",
        "named": "App call: %(name)s",
        "expiry": "Expiry of %(name)s",
        "counted": "Volume %(name)s (%(size)d GB), hour %(hour)d",
        "listed": "A public or paid app cannot be published: %(p)s",
        "kind": "Trial credit",
    },
    nested={"expiry": ("name",), "listed": ("p",)},
    max_length=40,
)


def test_a_coded_text_is_its_english_with_code_and_params_and_plain_text_has_none() -> None:
    made = CODES.coded("expiry", name=CODES.coded("kind"))
    assert (str(made), made.code, made.params) == (
        "Expiry of Trial credit",
        "expiry",
        {"name": {"code": "kind", "params": {}}},
    )
    assert coded_fields(made) == ("expiry", {"name": {"code": "kind", "params": {}}})
    assert coded_fields("typed by a person") == ("", {})
    listed = CODES.coded("listed", p=[CODES.coded("kind"), "raw words"])
    assert str(listed) == "A public or paid app cannot be published: Trial credit; raw words"[:40]  # max_length
    assert listed.params == {"p": [{"code": "kind", "params": {}}, "raw words"]}
    with translation.override("zh-hans"):
        assert CODES.render(code=listed.code, params=listed.params, fallback="") == (
            "公开或付费应用无法上架：试用额度; raw words"
        )
    assert isinstance(CODES.coded("fixed"), CodedText)


def test_it_renders_in_the_active_language_and_falls_back_to_the_stored_text() -> None:
    with translation.override("zh-hans"):
        assert CODES.render(code="expiry", params={"name": {"code": "kind", "params": {}}}, fallback="x") == (
            "试用额度到期"
        )
        assert CODES.render(code="fixed", params={}, fallback="x") == "充值"
        assert CODES.render(code="", params={}, fallback="as stored") == "as stored"
        assert CODES.render(code="missing", params={}, fallback="as stored") == "as stored"
        assert CODES.render(code="counted", params={"name": "w", "size": "five"}, fallback="as stored") == "as stored"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("Top-up", ("fixed", {})),
        ("App call: Top-up", ("named", {"name": "Top-up"})),  # user data that reads like a code stays as written
        ("Expiry of Trial credit", ("expiry", {"name": {"code": "kind", "params": {}}})),
        ("Expiry of Gift", ("expiry", {"name": "Gift"})),
        ("Volume a (b) (5 GB), hour 12", ("counted", {"name": "a (b)", "size": 5, "hour": 12})),
        ("Volume a (x GB), hour 1", None),
        ("Top-up!", None),
        ("", None),
    ],
)
def test_it_reads_an_english_text_back_to_its_code_whole_or_not_at_all(text: str, parsed: tuple | None) -> None:
    assert CODES.parse(text) == parsed
