"""'Publish as app' in one step (issue 18): a private app made from a checkpoint goes live by itself when its
first version is built; a public app still waits for review, a paid one whose training data forbids it stays a
draft with the reason, and a version added to an existing app leaves the app's state alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.utils import translation

from tests.marketplace.test_publish_checkpoint import _dataset_version, _job_with_checkpoint


def _publish(org: Any, user: Any, cp: Any, **kw: Any) -> Any:
    from portal.marketplace import services

    return services.app_publish_from_checkpoint(
        organization=org, user=user, job_id=cp.job_id, checkpoint_id=cp.pk, category="legal", **kw
    )


def _built(app: Any) -> Any:
    """What the build task does once the model server answers: activate the new version."""
    from portal.marketplace.deployments import checkpoint_version_activate
    from portal.marketplace.models import App

    checkpoint_version_activate(version_id=app.versions.order_by("-number").first().pk)
    return App.objects.get(pk=app.pk)


@pytest.fixture
def cp(settings: Any, tmp_path: Path, alice: Any, alice_org: Any) -> Any:
    settings.DATA_DIR = tmp_path
    return _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=False), location=str(tmp_path))


def test_a_private_app_goes_live_with_its_first_built_version(
    alice: Any, alice_org: Any, cp: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.models import AuditEvent

    with django_capture_on_commit_callbacks(execute=False):
        app = _publish(alice_org, alice, cp, name="Legal drafting", visibility="private")
    assert (app.state, app.versions.get().deployment) == ("draft", {"stage": "queued", "publish_when_ready": True})
    app = _built(app)
    assert (app.state, app.state_reason) == ("published", "published when its first version was built")
    assert (app.state_reason_code, app.state_reason_params) == ("published_first_version", {})
    with translation.override("zh-hans"):
        assert app.state_reason_display == "首个版本构建完成后已自动上架"
    event = AuditEvent.objects.get(action="marketplace.app_transition")
    assert (event.actor, event.extra["from"], event.extra["to"]) == (None, "draft", "published")
    # a second delivery of the activation publishes nothing twice
    app = _built(app)
    assert app.state == "published" and AuditEvent.objects.filter(action="marketplace.app_transition").count() == 1


def test_a_public_app_still_waits_for_review_and_a_forbidden_paid_one_stays_a_draft_with_the_reason(
    alice: Any, alice_org: Any, cp: Any, django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        public = _publish(alice_org, alice, cp, name="Legal public", visibility="public")
        paid = _publish(alice_org, alice, cp, name="Legal paid", visibility="private", price_per_call_micros=10_000)
    assert public.versions.get().deployment == {"stage": "queued"}
    assert _built(public).state == "draft"
    paid = _built(paid)
    assert (paid.state, paid.state_reason) == (
        "draft",
        "A public or paid app cannot be published: Chinese laws (Legal corpus license) does not allow commercial use",
    )
    label = "Chinese laws (Legal corpus license)"
    assert (paid.state_reason_code, paid.state_reason_params) == (
        "license_forbids",
        {"p": [{"code": "license_no_commercial", "params": {"label": label}}]},
    )
    with translation.override("zh-hans"):
        assert paid.state_reason_display == f"公开或付费应用无法上架：{label} 不允许商业使用"


def test_a_new_version_of_an_app_unpublished_by_its_owner_leaves_it_unpublished(
    alice: Any, alice_org: Any, cp: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace import services

    with django_capture_on_commit_callbacks(execute=False):
        app = _publish(alice_org, alice, cp, name="Legal drafting", visibility="private")
    app = _built(app)
    app = services.app_transition(app=app, to="draft", acting_user=alice)
    with django_capture_on_commit_callbacks(execute=False):
        _publish(alice_org, alice, cp, app_slug=app.slug)
    assert app.versions.get(number=2).deployment == {"stage": "queued"}
    assert _built(app).state == "draft"


def test_the_console_says_a_private_app_goes_live_by_itself(
    client: Any, alice: Any, alice_org: Any, cp: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App

    client.force_login(alice)
    url = f"/o/{alice_org.slug}/apps/publish/{cp.job_id}/{cp.pk}/"
    with django_capture_on_commit_callbacks(execute=False):
        resp = client.post(
            url,
            {
                "name": "Legal drafting",
                "category": "legal",
                "visibility": "private",
                "price_per_call": "0",
                "price_per_1k_tokens": "0",
            },
            follow=True,
        )
    assert "the app goes live by itself when it is ready" in resp.content.decode()
    assert App.objects.get().versions.get().deployment["publish_when_ready"] is True


def test_bad_input_publishes_nothing(alice: Any, alice_org: Any, cp: Any) -> None:
    from portal.marketplace import services
    from portal.marketplace.models import App

    with pytest.raises(services.MarketplaceError, match=r"An app needs a name\."):
        _publish(alice_org, alice, cp, name="  ", visibility="private")
    assert App.objects.count() == 0
