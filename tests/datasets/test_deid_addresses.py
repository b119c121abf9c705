"""Postal addresses of the UK, the US, India and Germany, anchored at their postcodes, and Chinese ones after
``地址是`` or with a road section (issue 28)."""

from __future__ import annotations

import pytest

from datasets.deid import find_pii


@pytest.mark.parametrize(
    ("text", "address", "rule"),
    [
        (
            "Re: account, 14 Marlborough Road, Sheffield, S10 1DB\n",
            "14 Marlborough Road, Sheffield, S10 1DB",
            "address:uk-postcode",
        ),
        (
            "agreement for Flat 23, 239 Johnson Flats, South Harrietside, W7S 1UX. Please",
            "Flat 23, 239 Johnson Flats, South Harrietside, W7S 1UX",
            "address:uk-postcode",
        ),
        (
            "Ship to: Kim Ward, 106 Ramirez Motorway, Scottstad, NE 77397. Phone",
            "106 Ramirez Motorway, Scottstad, NE 77397",
            "address:us-zip",
        ),
        (
            "residing at No. 45, 5th Cross, Koramangala, Bengaluru - 560034, lost",
            "No. 45, 5th Cross, Koramangala, Bengaluru - 560034",
            "address:in-pin",
        ),
        (
            "permanent address H.No. 12-2-831, Mehdipatnam, Hyderabad - 500028, mobile",
            "H.No. 12-2-831, Mehdipatnam, Hyderabad - 500028",
            "address:in-pin",
        ),
        ("Anschrift: Lindenstraße 23, 10969 Berlin\nTelefon", "Lindenstraße 23, 10969 Berlin", "address:de-plz"),
        (
            "die Wohnung Goethestraße 8a, 60313 Frankfurt am Main. Die Nachzahlung",
            "Goethestraße 8a, 60313 Frankfurt am Main",
            "address:de-plz",
        ),
        (
            "Anschrift: Beyerallee 61, 17611 Leipziger Land\nTelefon",
            "Beyerallee 61, 17611 Leipziger Land",
            "address:de-plz",
        ),
        ("Kunde: Anna Berg, Alte Landstraße 5, 04109 Leipzig\n", "Alte Landstraße 5, 04109 Leipzig", "address:de-plz"),
        (
            "在的，地址是广东省广州市天河区体育东路118号3栋502室，到了打电话",
            "广东省广州市天河区体育东路118号3栋502室",
            "address:cn-pattern",
        ),
        ("乙方搬离四川省成都市金牛区人民北路二段168号。", "四川省成都市金牛区人民北路二段168号", "address:cn-pattern"),
    ],
    ids=[
        "uk",
        "uk-flat",
        "us",
        "india",
        "india-house-number",
        "germany",
        "germany-am-main",
        "germany-two-word-town",
        "germany-two-word-street",
        "china-after-shi",
        "china-road-section",
    ],
)
def test_addresses_down_to_the_house_number(text: str, address: str, rule: str) -> None:
    assert [(f.type, f.value, f.rule) for f in find_pii(text) if f.type == "ADDRESS"] == [("ADDRESS", address, rule)]


def test_a_german_noun_before_the_street_is_not_part_of_the_address() -> None:
    text = "hiermit kündige ich die Wohnung Strohring 106, 37939 Hildburghausen fristgerecht."
    assert [f.value for f in find_pii(text)] == ["Strohring 106, 37939 Hildburghausen"]


def test_region_names_and_numbers_without_a_street_stay() -> None:
    assert find_pii("Die Sitzung in 10115 Berlin begann um 18:05 Uhr.") == []
    assert find_pii("See section 12, Part 3, Volume 2 - 123456 pages.") == []
    assert find_pii("北京市海淀区人民政府") == []
