"""Server-rendered chart geometry: stacked columns scaled to the largest total, amounts formatted from integers."""

from __future__ import annotations

import pytest

from billing.money import format_cny
from portal.lib.charts import Segment, stacked_bar_chart

SERIES = [("usage", "GPU usage"), ("app_call", "App call")]


def test_columns_stack_bottom_up_scaled_to_the_largest_total():
    chart = stacked_bar_chart(
        [("d1", [1_000_000, 3_000_000]), ("d2", [0, 0]), ("d3", [0, 2_000_000])],
        series=SERIES,
        fmt=format_cny,
        unit="CNY",
        total_label="Total",
        width=300,
        height=60,
    )
    # drawing height 60 - 20 = 40 for 4.00 CNY; the base line is at y = 60 - 14 = 46; slots of 100, bars of 80
    assert chart.segments == [
        Segment(x=10, y=36, width=80, height=10, series="usage", title="d1 · GPU usage: 1.00 CNY (Total 4.00 CNY)"),
        Segment(x=10, y=6, width=80, height=30, series="app_call", title="d1 · App call: 3.00 CNY (Total 4.00 CNY)"),
        Segment(x=210, y=26, width=80, height=20, series="app_call", title="d3 · App call: 2.00 CNY (Total 2.00 CNY)"),
    ]
    assert chart.legend == SERIES and chart.max_label == "4.00 CNY"


def test_no_spend_gives_an_empty_chart_and_bad_columns_are_refused():
    empty = stacked_bar_chart([("d1", [0, 0])], series=SERIES, fmt=format_cny)
    assert (empty.segments, empty.max_label) == ([], "0.00")
    with pytest.raises(ValueError, match="expected 2 values"):
        stacked_bar_chart([("d1", [1])], series=SERIES, fmt=format_cny)
    with pytest.raises(ValueError, match="expected 2 values"):
        stacked_bar_chart([("d1", [1, -1])], series=SERIES, fmt=format_cny)
