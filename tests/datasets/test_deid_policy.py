"""The organization's de-identification policy (placeholder style, allow-list), applied to uploads, and the
upload's de-identification report (counts per type, sampled contexts without values)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

DOC = "原告王小明，电话13912345678，客服热线13800001111；身份证号：110105194912310021。"


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path / "data"
    settings.DATASET_UPLOAD_MAX_BYTES = 64 * 1024 * 1024


def _upload(org: Any, user: Any, data: bytes, capture: Any) -> Any:
    from datasets.services import upload_create

    with capture(execute=True):
        upload = upload_create(
            organization=org, user=user, file=io.BytesIO(data), name="policy", fmt="jsonl", original_filename="c.jsonl"
        )
    upload.refresh_from_db()
    return upload


def test_an_upload_applies_the_policy_and_reports_counts_and_samples_without_values(
    alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datasets.policy import deid_policy_update

    deid_policy_update(
        organization=alice_org, user=alice, placeholder_style="pseudonym", allow_list="138-0000-1111\n\n"
    )
    data = "".join(json.dumps({"id": str(i), "text": f"{DOC}第{i}份"}, ensure_ascii=False) + "\n" for i in range(3))
    upload = _upload(alice_org, alice, data.encode(), django_capture_on_commit_callbacks)
    assert upload.status == "ready"
    report = upload.report["deidentify"]
    assert {k: v for k, v in report["replacements"].items() if v} == {"NAME": 3, "PHONE": 3, "ID_NUMBER": 3}
    assert (report["allowed"], report["style"], report["notes"]) == (3, "pseudonym", {"invalid check digit": 3})
    assert report["samples"]["ID_NUMBER"][0] == {
        "context": "1]，客服热线13800001111；身份证号：[ID_NUMBER_1]。第0份",
        "placeholder": "[ID_NUMBER_1]",
        "rule": "id18:label",
        "confidence": 0.75,
        "note": "invalid check digit",
    }
    dumped = json.dumps(upload.report, ensure_ascii=False)
    assert "13912345678" not in dumped and "王小明" not in dumped and "110105194912310021" not in dumped
    text = (upload.workdir / "deduplicated.jsonl").read_text(encoding="utf-8")
    assert "原告[NAME_1]，电话[PHONE_1]，客服热线13800001111" in text


def test_a_member_cannot_change_the_policy_and_nothing_is_written(bob: Any, alice_org: Any) -> None:
    from datasets.models import DeidPolicy
    from datasets.policy import PolicyRefused, deid_policy_update

    with pytest.raises(PolicyRefused, match="Only owners and admins"):
        deid_policy_update(organization=alice_org, user=bob, placeholder_style="hash", allow_list="")
    assert DeidPolicy.objects.count() == 0


@pytest.mark.parametrize(
    ("style", "allow", "message"),
    [
        ("stars", "", "Unknown placeholder style stars."),
        ("typed", "x" * 121, "longer than 120 characters"),
        ("typed", "1\n" * 201, "At most 200 allow-list entries."),
    ],
    ids=["style", "long-entry", "too-many"],
)
def test_a_bad_policy_is_refused(alice: Any, alice_org: Any, style: str, allow: str, message: str) -> None:
    from datasets.models import DeidPolicy
    from datasets.policy import PolicyRefused, deid_policy_update

    with pytest.raises(PolicyRefused, match=message):
        deid_policy_update(organization=alice_org, user=alice, placeholder_style=style, allow_list=allow)
    assert DeidPolicy.objects.count() == 0


def test_the_console_form_saves_for_the_owner_refuses_a_member_and_hides_from_outsiders(
    client: Any, alice: Any, alice_org: Any, bob: Any, charlie: Any
) -> None:
    from datasets.models import DeidPolicy
    from portal.models import AuditEvent

    url = f"/o/{alice_org.slug}/datasets/deid-settings/"
    client.force_login(alice)
    assert client.get(url).status_code == 200
    response = client.post(url, {"placeholder_style": "hash", "allow_list": "400-810-1234\nhelp@example.com"})
    assert response.status_code == 302
    policy = DeidPolicy.objects.get(organization=alice_org)
    assert (policy.placeholder_style, policy.allow_entries) == ("hash", ["400-810-1234", "help@example.com"])
    assert AuditEvent.objects.filter(action="datasets.deid_policy_update").count() == 1
    client.force_login(bob)
    assert client.post(url, {"placeholder_style": "typed", "allow_list": ""}).status_code == 403
    assert DeidPolicy.objects.get(organization=alice_org).placeholder_style == "hash"
    client.force_login(charlie)
    assert client.get(url).status_code == 404


def test_a_file_with_mixed_encodings_is_refused_with_the_line(
    settings: Any, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    data = '{"text": "第一行 UTF-8"}\n'.encode() + '{"text": "第二行 GBK"}\n'.encode("gbk")
    upload = _upload(alice_org, alice, data, django_capture_on_commit_callbacks)
    assert (upload.status, upload.error["stage"], upload.error["code"], upload.error["line"]) == (
        "failed",
        "validate",
        "encoding",
        2,
    )
    assert not upload.workdir.exists()
