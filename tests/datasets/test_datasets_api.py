"""Partner API and console of the datasets app: catalog, agreements, mounts, uploads, and outsiders' 404s."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from tests.datasets.factories import make_license_version, make_version


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path


def _api(user: Any, org: Any, scope: str = "write") -> APIClient:
    from portal.services import api_token_create

    created = api_token_create(user=user, organization=org, name="t", scope=scope)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {created.plaintext}")
    return client


def _charlie_org(charlie: Any) -> Any:
    from portal.selectors import organization_for_user

    return organization_for_user(user=charlie)


def _private_upload(alice: Any, alice_org: Any) -> Any:
    from datasets.services import upload_create

    return upload_create(
        organization=alice_org, user=alice, file=io.BytesIO(b'{"text": "hi"}\n'), name="mine", fmt="jsonl"
    )


def test_the_api_lists_visible_datasets_with_filters(alice: Any, alice_org: Any, charlie: Any) -> None:
    public = make_version(slug="pub", domain="legal")
    private = make_version(slug="own", publisher=alice_org, visibility="private", domain="medical")
    api = _api(alice, alice_org)
    body = api.get("/api/v1/datasets").json()
    assert [d["slug"] for d in body["results"]] == ["own", "pub"]  # newest first (cursor pagination)
    assert body["results"][1]["latest_version"]["documents"] == 3
    assert [d["slug"] for d in api.get("/api/v1/datasets?domain=medical").json()["results"]] == ["own"]
    assert [d["slug"] for d in api.get("/api/v1/datasets?q=pub").json()["results"]] == ["pub"]
    assert api.get("/api/v1/datasets?language=zh").json()["results"] == []
    versions = api.get(f"/api/v1/datasets/{public.dataset.pk}/versions").json()["results"]
    assert [v["id"] for v in versions] == [public.pk]
    charlie_api = _api(charlie, _charlie_org(charlie))
    assert [d["slug"] for d in charlie_api.get("/api/v1/datasets").json()["results"]] == ["pub"]
    for url in (
        f"/api/v1/datasets/{private.dataset.pk}",
        f"/api/v1/datasets/{private.dataset.pk}/versions",
        f"/api/v1/datasets/{private.dataset.pk}/agreements",
    ):
        response = charlie_api.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"


def test_a_mount_without_an_agreement_is_refused_by_the_api(alice: Any, alice_org: Any) -> None:
    from datasets.models import DatasetMount

    version = make_version()
    api = _api(alice, alice_org)
    response = api.post(
        "/api/v1/datasets/mounts", {"version": version.pk, "consumer": "instances.instance:1"}, format="json"
    )
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "agreement_required",
        "message": "Set test-set needs an agreement to License test-license version 1 before it can be mounted.",
        "details": None,
    }
    assert DatasetMount.objects.count() == 0


def test_an_agreement_through_the_api_records_ip_and_user_agent_then_mounts(alice: Any, alice_org: Any) -> None:
    from datasets.models import Agreement

    version = make_version()
    api = _api(alice, alice_org)
    url = f"/api/v1/datasets/{version.dataset.pk}/agreements"
    bad = api.post(url, {"text_sha256": "a" * 64}, format="json", HTTP_USER_AGENT="partner/1.0")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "text_mismatch"
    response = api.post(
        url,
        {"text_sha256": version.license_version.text_sha256},
        format="json",
        HTTP_USER_AGENT="partner/1.0",
        REMOTE_ADDR="203.0.113.9",
    )
    assert response.status_code == 201
    agreement = Agreement.objects.get()
    assert (agreement.ip, agreement.user_agent, agreement.user, agreement.organization) == (
        "203.0.113.9",
        "partner/1.0",
        alice,
        alice_org,
    )
    assert [a["id"] for a in api.get(url).json()["results"]] == [agreement.pk]
    mount = api.post(
        "/api/v1/datasets/mounts", {"version": version.pk, "consumer": "instances.instance:1"}, format="json"
    )
    assert mount.status_code == 201 and mount.json()["shard_dir"] == str(version.shard_path)


def test_a_paid_license_without_funds_is_402_through_the_api(alice: Any, alice_org: Any) -> None:
    from billing.models import LedgerTransaction

    lv = make_license_version(slug="paid", price_micros=1_000_000)
    version = make_version(license_version=lv)
    response = _api(alice, alice_org).post(
        f"/api/v1/datasets/{version.dataset.pk}/agreements", {"text_sha256": lv.text_sha256}, format="json"
    )
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "insufficient_funds"
    assert LedgerTransaction.objects.filter(kind="license_fee").count() == 0


def test_uploads_through_the_api_and_charlie_gets_404(
    alice: Any, alice_org: Any, charlie: Any, django_capture_on_commit_callbacks: Any
) -> None:
    api = _api(alice, alice_org)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            "/api/v1/uploads",
            {
                "file": SimpleUploadedFile("c.csv", "id,body\n1,第一条 合同\n2,第二条 合同\n".encode()),
                "format": "csv",
                "text_column": "body",
                "name": "合同",
            },
            format="multipart",
        )
    assert response.status_code == 201
    upload_id = response.json()["id"]
    detail = api.get(f"/api/v1/uploads/{upload_id}").json()
    assert (detail["status"], detail["percent"], detail["report"]["validate"]["documents"]) == ("ready", 100, 2)
    assert [u["id"] for u in api.get("/api/v1/uploads").json()["results"]] == [upload_id]
    charlie_api = _api(charlie, _charlie_org(charlie))
    assert charlie_api.get(f"/api/v1/uploads/{upload_id}").status_code == 404
    assert charlie_api.post(f"/api/v1/uploads/{upload_id}/retry").status_code == 404
    assert charlie_api.get("/api/v1/uploads").json()["results"] == []
    # charlie cannot name alice's organization either
    assert charlie_api.get(f"/api/v1/uploads?organization={alice_org.slug}").status_code == 404


def test_an_api_upload_over_the_limit_is_refused(settings: Any, alice: Any, alice_org: Any) -> None:
    from datasets.models import Upload

    settings.DATASET_UPLOAD_MAX_BYTES = 10
    response = _api(alice, alice_org).post(
        "/api/v1/uploads",
        {"file": SimpleUploadedFile("a.txt", b"x" * 11), "format": "txt", "name": "big"},
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "The file is larger than the upload limit of 10 bytes."
    assert Upload.objects.count() == 0


# --- console ---------------------------------------------------------------------------------------------


def test_the_console_catalog_filters_and_shows_an_empty_state(client: Any, alice: Any, alice_org: Any) -> None:
    make_version(slug="pub", domain="legal")
    client.force_login(alice)
    page = client.get(f"/o/{alice_org.slug}/datasets/")
    assert page.status_code == 200 and b"Set pub" in page.content
    partial = client.get(f"/o/{alice_org.slug}/datasets/?domain=finance", HTTP_HX_REQUEST="true")
    assert b'data-testid="catalog-empty"' in partial.content and b"<html" not in partial.content


def test_the_console_detail_shows_statistics_sample_license_and_attribution(
    client: Any, alice: Any, alice_org: Any
) -> None:
    from datasets.models import Dataset

    version = make_version(slug="pub")
    Dataset.objects.filter(pk=version.dataset.pk).update(attribution="MedQuAD — CC BY 4.0")
    client.force_login(alice)
    body = client.get(f"/o/{alice_org.slug}/datasets/{version.dataset.pk}/").content.decode()
    for text in ("MedQuAD — CC BY 4.0", "hello world", "License test-license v1", "Review and accept the license"):
        assert text in body
    modal = client.get(f"/o/{alice_org.slug}/datasets/{version.dataset.pk}/agreement/", HTTP_HX_REQUEST="true")
    assert version.license_version.text in modal.content.decode()
    assert version.license_version.text_sha256 in modal.content.decode()


def test_the_console_refuses_a_mount_without_an_agreement_then_accepts_one(
    client: Any, alice: Any, alice_org: Any
) -> None:
    from datasets.models import Agreement, DatasetMount

    version = make_version()
    client.force_login(alice)
    base = f"/o/{alice_org.slug}/datasets/{version.dataset.pk}"
    refused = client.post(f"{base}/mount/", {"version": version.pk, "consumer": "instances.instance:3"})
    assert refused.status_code == 403
    assert "needs an agreement to License test-license version 1" in refused.content.decode()
    assert DatasetMount.objects.count() == 0
    accepted = client.post(
        f"{base}/agreement/",
        {"license_version": version.license_version.pk, "text_sha256": version.license_version.text_sha256},
        HTTP_USER_AGENT="Firefox",
        HTTP_HX_REQUEST="true",
    )
    assert accepted.status_code == 204 and accepted["HX-Redirect"] == f"{base}/"
    assert Agreement.objects.get().user_agent == "Firefox"
    mounted = client.post(f"{base}/mount/", {"version": version.pk, "consumer": "instances.instance:3"})
    assert mounted.status_code == 302
    assert DatasetMount.objects.get().consumer == "instances.instance:3"


def test_charlie_gets_404_on_alices_private_dataset_and_uploads_in_the_console(
    client: Any, alice: Any, alice_org: Any, charlie: Any
) -> None:
    private = make_version(slug="own", publisher=alice_org, visibility="private")
    upload = _private_upload(alice, alice_org)
    client.force_login(charlie)
    org = _charlie_org(charlie)
    for url in (
        f"/o/{org.slug}/datasets/{private.dataset.pk}/",
        f"/o/{org.slug}/datasets/{private.dataset.pk}/agreement/",
        f"/o/{org.slug}/datasets/uploads/{upload.pk}/",
        f"/o/{alice_org.slug}/datasets/",
        f"/o/{alice_org.slug}/datasets/uploads/{upload.pk}/",
    ):
        assert client.get(url).status_code == 404, url
    assert (
        client.post(
            f"/o/{org.slug}/datasets/{private.dataset.pk}/mount/", {"version": private.pk, "consumer": "x"}
        ).status_code
        == 404
    )
    assert b"Set own" not in client.get(f"/o/{org.slug}/datasets/").content


def test_the_console_upload_form_streams_and_shows_progress(
    client: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datasets.models import Upload

    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/o/{alice_org.slug}/datasets/uploads/",
            {
                "file": SimpleUploadedFile("a.txt", "第一段。\n\n第二段。\n".encode()),
                "name": "段落",
                "format": "txt",
                "domain": "legal",
            },
        )
    upload = Upload.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/o/{alice_org.slug}/datasets/uploads/{upload.pk}/"
    partial = client.get(response["Location"], HTTP_HX_REQUEST="true").content.decode()
    assert "Ready" in partial and "2 documents" in partial and "hx-trigger" not in partial


def test_the_console_refuses_an_upload_over_the_limit(client: Any, settings: Any, alice: Any, alice_org: Any) -> None:
    from datasets.models import Upload

    settings.DATASET_UPLOAD_MAX_BYTES = 100
    client.force_login(alice)
    response = client.post(
        f"/o/{alice_org.slug}/datasets/uploads/",
        {"file": SimpleUploadedFile("a.txt", b"x" * 5000), "name": "big", "format": "txt", "domain": "other"},
    )
    assert response.status_code == 413
    assert "larger than the upload limit of 100 bytes" in response.content.decode()
    assert Upload.objects.count() == 0
