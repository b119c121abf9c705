"""Why an app is in its state, and why a version's model server is unhealthy, are stored as codes with
parameters (issue 25) and shown in the reader's language; a reason typed by staff is shown as typed, and apps
written before codes get theirs from their text (migration ``marketplace.0003``)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.urls import reverse
from django.utils import translation

pytestmark = pytest.mark.django_db


@pytest.fixture
def app(alice: Any, alice_org: Any) -> Any:
    from portal.marketplace import services
    from portal.marketplace.choices import AppVisibility, ServingKind

    app = services.app_create(publisher=alice_org, user=alice, name="Contract review", category="legal",
                              description="", input_schema={}, output_schema={}, price_per_call_micros=0,
                              visibility=AppVisibility.PRIVATE)  # fmt: skip
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO, endpoint_url="", lineage=None)
    return app


def test_a_coded_reason_is_stored_with_its_code_and_a_typed_one_as_plain_text(alice: Any, app: Any) -> None:
    from portal.marketplace import services
    from portal.marketplace.reasons import app_reason

    published = services.app_transition(
        app=app, to="published", reason=app_reason("approved_by_staff"), acting_user=None, staff=True
    )
    assert (published.state_reason, published.state_reason_code, published.state_reason_params) == (
        "approved by staff", "approved_by_staff", {}
    )  # fmt: skip
    with translation.override("zh-hans"):
        assert published.state_reason_display == "已由工作人员批准"
    typed = services.app_transition(app=app, to="suspended", reason="合规复查中", acting_user=None, staff=True)
    assert (typed.state_reason, typed.state_reason_code, typed.state_reason_params) == ("合规复查中", "", {})
    with translation.override("zh-hans"):
        assert typed.state_reason_display == "合规复查中"


def test_the_app_page_shows_the_reason_and_an_unhealthy_server_in_chinese_and_charlie_gets_404(
    client: Any, alice: Any, charlie: Any, app: Any
) -> None:
    from portal.marketplace import services
    from portal.marketplace.models import AppVersion
    from portal.marketplace.reasons import app_reason

    services.app_transition(app=app, to="published", reason=app_reason("published_first_version"), acting_user=None)
    AppVersion.objects.filter(app=app).update(deployment={
        "stage": "unhealthy", "restart_failures": 2, "unhealthy_code": "restarts_failed",
        "unhealthy_reason": "2 restarts in a row failed; last: OSError: port in use",
        "last_error": "OSError: port in use",
    })  # fmt: skip
    url = reverse("app_detail", kwargs={"org": app.publisher.slug, "slug": app.slug})
    client.force_login(alice)
    html = client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert '<p class="muted" data-testid="app-state-reason">首个版本构建完成后已自动上架</p>' in html
    assert "连续 2 次重启失败；最近一次错误： <code>OSError: port in use</code>" in html
    english = client.get(url, HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert '<p class="muted" data-testid="app-state-reason">published when its first version was built</p>' in english
    client.force_login(charlie)
    assert client.get(url, HTTP_ACCEPT_LANGUAGE="zh-hans").status_code == 404


def test_the_migration_gives_apps_written_before_codes_their_code(alice_org: Any, app: Any) -> None:
    from portal.marketplace.models import App

    backfill = import_module("portal.marketplace.migrations.0003_state_reason_codes").state_reason_codes_from_text
    label = "Chinese laws (Legal corpus license)"
    old = {
        "published when its first version was built": ("published_first_version", {}),
        "approved by staff": ("approved_by_staff", {}),
        f"A public or paid app cannot be published: {label} does not allow derivative models; {label} does not "
        "allow commercial use": (
            "license_forbids",
            {"p": [{"code": "license_no_derivatives", "params": {"label": label}},
                   {"code": "license_no_commercial", "params": {"label": label}}]},
        ),
        "合规复查中": ("", {}),
    }  # fmt: skip
    apps = [app]
    for i in range(len(old) - 1):
        apps.append(App.objects.create(publisher=alice_org, name=f"App {i}", slug=f"app-{i}", category="legal"))
    for a, text in zip(apps, old, strict=True):
        App.objects.filter(pk=a.pk).update(state_reason=text)

    backfill(django_apps, None)

    got = {a.state_reason: (a.state_reason_code, a.state_reason_params) for a in App.objects.all()}
    assert got == old
    with translation.override("zh-hans"):
        shown = {a.state_reason_code: a.state_reason_display for a in App.objects.all()}
    assert shown["license_forbids"] == f"公开或付费应用无法上架：{label} 不允许衍生模型; {label} 不允许商业使用"
    assert shown[""] == "合规复查中"
