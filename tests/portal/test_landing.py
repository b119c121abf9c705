"""The anonymous front page says what the product is and leads to sign-up; signed-in users go to their dashboard."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_an_anonymous_visitor_sees_the_landing_page_with_the_trial_offer(client, settings):
    settings.TRIAL_CREDIT, settings.TRIAL_CREDIT_DAYS = "10.00", 30
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-testid="landing"' in page
    assert "10.00 CNY of trial credit for 30 days" in page
    for url in ("/signup/", "/login/", "/pricing/", "/api/v1/docs"):
        assert f'href="{url}"' in page


def test_the_landing_page_reads_in_chinese(client):
    response = client.get("/", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert response.status_code == 200
    page = response.content.decode()
    assert "从零到一训练你的行业模型" in page and "注册" in page


def test_a_signed_in_user_goes_to_the_dashboard(client, alice, alice_org):
    client.force_login(alice)
    response = client.get("/")
    assert (response.status_code, response["Location"]) == (302, f"/o/{alice_org.slug}/")


def test_the_signup_form_shows_a_working_state_and_sends_once(client):
    page = client.get("/signup/").content.decode()
    assert "data-busy" in page and "data-busy-text" in page
    from django.contrib.staticfiles import finders

    with open(finders.find("portal/app.js"), encoding="utf-8") as script:
        assert "button.disabled = true" in script.read()
