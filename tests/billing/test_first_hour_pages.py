"""First-hour polish of the pricing, wallet and app pages (issue 18): the CPU slot the launch page starts on is
in the price table, TCO figures have thousands separators and linked sources, the cost chart names its dates,
and a new app's empty charts show no made-up scale."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from billing.pricing import gpu_price_set, seed_price_book

pytestmark = pytest.mark.django_db
TCO = {
    "gpu_type": "A100-80G-SXM",
    "gpus": 8,
    "months": 36,
    "utilization": 60,
    "server_overhead": 35,
    "pue": "1.5",
    "power_price": "0.80",
    "staff_monthly": 20000,
}


def test_the_price_table_lists_the_cpu_slot_but_the_calculator_compares_gpus_only(client):
    seed_price_book()
    gpu_price_set(gpu_type="cpu-local", mode="container", price="0.60")
    html = client.get(reverse("pricing")).content.decode()
    assert '<td>cpu-local</td><td class="num" data-testid="price-cpu-local">0.60</td>' in html
    assert '<option value="cpu-local"' not in html  # no card price to compare renting with
    assert '<option value="A100-80G-SXM"' in html


def test_tco_figures_have_thousands_separators_and_the_sources_are_links(client):
    seed_price_book()
    html = client.get(reverse("pricing"), TCO).content.decode()
    buy = re.search(r'data-testid="tco-buy">([^<]+)<', html)
    rent = re.search(r'data-testid="tco-rent">([^<]+)<', html)
    assert buy is not None and rent is not None
    assert re.fullmatch(r"\d{1,3}(,\d{3})+\.\d\d CNY", buy.group(1)), buy.group(1)
    assert re.fullmatch(r"\d{1,3}(,\d{3})+\.\d\d CNY", rent.group(1)), rent.group(1)
    links = re.findall(r'<a href="(https://[^"]+)" rel="noopener" data-testid="tco-source">', html)
    assert links[0] == "https://www.nvidia.com/en-us/data-center/a100/" and len(links) == 5


def test_bad_tco_input_is_refused_with_a_message(client):
    seed_price_book()
    resp = client.get(reverse("pricing"), {**TCO, "gpu_type": "cpu-local"})
    assert resp.status_code == 400 and "Select a valid choice." in resp.content.decode()


def test_the_cost_chart_names_its_first_and_last_day(client, alice, alice_org, time_machine):
    time_machine.move_to(datetime(2026, 11, 30, 20, 0, tzinfo=UTC))  # 2026-12-01 04:00 in Shanghai
    client.force_login(alice)
    html = client.get(reverse("wallet", args=[alice_org.slug])).content.decode()
    dates = '<p class="muted chart-dates" data-testid="cost-chart-dates">'
    assert dates + "<span>2026-11-02</span> – <span>2026-12-01</span></p>" in html


def test_a_new_apps_empty_charts_show_no_scale(client, alice, alice_org):
    from portal.marketplace import services

    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Contract review",
        category="legal",
        description="",
        input_schema={"type": "object"},
        output_schema={"type": "object"},
        price_per_call_micros=10_000,
    )
    client.force_login(alice)
    html = client.get(f"/o/{alice_org.slug}/apps/{app.slug}/").content.decode()
    assert 'data-testid="calls_chart-empty">No calls yet.</text>' in html
    assert 'data-testid="revenue_chart-empty">No revenue yet.</text>' in html
    assert '<text x="4" y="12" class="axis">1</text>' not in html
    assert '<text x="4" y="12" class="axis">1.00</text>' not in html


def test_bar_chart_keeps_its_scale_when_there_is_data():
    from portal.lib.charts import bar_chart

    chart = bar_chart([("d1", 0.0), ("d2", 2.5)])
    assert (chart.max_label, chart.empty) == ("2.50", False)
    assert (bar_chart([("d1", 0.0)]).max_label, bar_chart([]).empty) == ("", True)
