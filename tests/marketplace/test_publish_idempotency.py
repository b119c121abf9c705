"""``Idempotency-Key`` on ``POST /api/v1/apps/publish``: a retry answers the first result and builds nothing
again; the same key with another body is a 409; keys belong to one organization.

The build task is captured, not run (``django_capture_on_commit_callbacks(execute=False)``): the tests count
the builds enqueued. The build itself is exercised by ``test_publish_checkpoint.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_publish_checkpoint import _api, _dataset_version, _job_with_checkpoint  # the publish tests' rows


def _body(cp: Any, **over: Any) -> dict[str, Any]:
    return {
        "job_id": cp.job_id,
        "checkpoint_id": cp.pk,
        "name": "Legal drafting",
        "category": "legal",
        "price_per_call": "0.010000",
        "visibility": "private",
        **over,
    }


def test_a_retry_with_the_same_key_and_body_returns_the_first_result_and_builds_nothing_again(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, bob: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App, AppPublishRequest, AppVersion

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    api = _api(alice, alice_org)
    with django_capture_on_commit_callbacks(execute=False) as first_builds:
        first = api.post("/api/v1/apps/publish", _body(cp), format="json", HTTP_IDEMPOTENCY_KEY="pub-1")
    with django_capture_on_commit_callbacks(execute=False) as retry_builds:
        retry = api.post(
            "/api/v1/apps/publish", _body(cp, price_per_call="0.01"), format="json", HTTP_IDEMPOTENCY_KEY="pub-1"
        )  # the same amount, written differently
    from portal.choices import Role
    from portal.services import membership_add

    membership_add(organization=alice_org, user=bob, role=Role.ADMIN, acting_user=None)  # publishers: admins
    with django_capture_on_commit_callbacks(execute=False) as teammate_builds:
        teammate = _api(bob, alice_org).post(
            "/api/v1/apps/publish", _body(cp), format="json", HTTP_IDEMPOTENCY_KEY="pub-1"
        )  # the key belongs to the organization

    assert first.status_code == 202, first.json()
    assert (retry.status_code, teammate.status_code) == (200, 200)
    app = App.objects.get()
    version = AppVersion.objects.get()
    assert first.json()["replayed"] is False and retry.json()["replayed"] is True
    for response in (first, retry, teammate):
        assert response.json()["app"]["slug"] == app.slug
        assert (response.json()["version"]["number"], response.json()["version"]["status"]) == (1, "building")
    assert (len(first_builds), len(retry_builds), len(teammate_builds)) == (1, 0, 0)
    request = AppPublishRequest.objects.get()
    assert (request.organization_id, request.idempotency_key, request.version_id) == (alice_org.pk, "pub-1", version.pk)
    assert len(request.request_sha256) == 64


def test_the_same_key_with_another_body_is_refused_and_writes_nothing(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App, AppPublishRequest, AppVersion

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    api = _api(alice, alice_org)
    with django_capture_on_commit_callbacks(execute=False):
        api.post("/api/v1/apps/publish", _body(cp), format="json", HTTP_IDEMPOTENCY_KEY="pub-1")
    with django_capture_on_commit_callbacks(execute=False) as builds:
        other = api.post(
            "/api/v1/apps/publish", _body(cp, name="Another app"), format="json", HTTP_IDEMPOTENCY_KEY="pub-1"
        )

    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_key_reused"
    assert other.json()["error"]["message"] == "this Idempotency-Key was already used for a different publish request"
    assert builds == []
    assert (App.objects.count(), AppVersion.objects.count(), AppPublishRequest.objects.count()) == (1, 1, 1)
    assert App.objects.get().name == "Legal drafting"


def test_without_a_key_every_request_publishes(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App, AppPublishRequest

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    api = _api(alice, alice_org)
    with django_capture_on_commit_callbacks(execute=False) as builds:
        answers = [api.post("/api/v1/apps/publish", _body(cp), format="json") for _ in range(2)]

    assert [a.status_code for a in answers] == [202, 202]
    assert [a.json()["replayed"] for a in answers] == [False, False]
    assert sorted(App.objects.values_list("slug", flat=True)) == ["legal-drafting", "legal-drafting-2"]
    assert len(builds) == 2 and AppPublishRequest.objects.count() == 0


def test_an_outsider_using_the_same_key_string_publishes_independently(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, charlie: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App, AppPublishRequest

    settings.DATA_DIR = tmp_path
    charlie_org = charlie.organizations.get()
    alice_cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    charlie_cp = _job_with_checkpoint(
        charlie_org, charlie, _dataset_version(commercial_use=True, slug="legal-c"), location=str(tmp_path)
    )
    with django_capture_on_commit_callbacks(execute=False) as builds:
        mine = _api(alice, alice_org).post(
            "/api/v1/apps/publish", _body(alice_cp), format="json", HTTP_IDEMPOTENCY_KEY="shared-key"
        )
        _api(alice, alice_org).post(
            "/api/v1/apps/publish", _body(alice_cp, name="Alice 2"), format="json", HTTP_IDEMPOTENCY_KEY="shared-key-2"
        )
        theirs = _api(charlie, charlie_org).post(
            "/api/v1/apps/publish",
            _body(charlie_cp, name="Charlie's"),
            format="json",
            HTTP_IDEMPOTENCY_KEY="shared-key",
        )
        # alice's exact request under alice's key, sent by charlie: no replay of alice's result, a 404
        probe = _api(charlie, charlie_org).post(
            "/api/v1/apps/publish", _body(alice_cp, name="Alice 2"), format="json", HTTP_IDEMPOTENCY_KEY="shared-key-2"
        )
        alice_second = _api(alice, alice_org).post(
            "/api/v1/apps/publish", _body(alice_cp), format="json", HTTP_IDEMPOTENCY_KEY="shared-key"
        )

    assert (mine.status_code, theirs.status_code, alice_second.status_code) == (202, 202, 200)
    assert alice_second.json()["app"]["slug"] == mine.json()["app"]["slug"]
    assert probe.status_code == 404 and probe.json()["error"]["code"] == "not_found"
    assert len(builds) == 3  # alice's two publishes and charlie's one
    assert mine.json()["app"]["slug"] != theirs.json()["app"]["slug"]
    assert sorted(App.objects.values_list("publisher_id", flat=True)) == sorted(
        [alice_org.pk, alice_org.pk, charlie_org.pk]
    )
    assert sorted(AppPublishRequest.objects.values_list("organization_id", "idempotency_key")) == sorted(
        [(alice_org.pk, "shared-key"), (alice_org.pk, "shared-key-2"), (charlie_org.pk, "shared-key")]
    )


def test_a_refused_publish_records_no_key_and_a_key_over_200_characters_is_a_clear_error(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace.models import App, AppPublishRequest

    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    api = _api(alice, alice_org)
    with django_capture_on_commit_callbacks(execute=False) as builds:
        missing = api.post(
            "/api/v1/apps/publish", _body(cp, checkpoint_id=cp.pk + 100), format="json", HTTP_IDEMPOTENCY_KEY="pub-1"
        )
        too_long = api.post("/api/v1/apps/publish", _body(cp), format="json", HTTP_IDEMPOTENCY_KEY="k" * 201)
        fixed = api.post(
            "/api/v1/apps/publish", _body(cp, checkpoint_id=cp.pk), format="json", HTTP_IDEMPOTENCY_KEY="pub-1"
        )

    assert missing.status_code == 404
    assert too_long.status_code == 400
    assert too_long.json()["error"]["message"] == "an Idempotency-Key has at most 200 characters"
    assert fixed.status_code == 202 and len(builds) == 1
    assert App.objects.count() == 1 and AppPublishRequest.objects.get().idempotency_key == "pub-1"
