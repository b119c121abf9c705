"""An upload can re-use the tokenizer of a dataset version the organization can mount."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

DATA = "".join(
    json.dumps({"id": str(i), "text": f"第{i}条 合同当事人应当按照约定履行义务，编号 {i}。"}, ensure_ascii=False) + "\n"
    for i in range(30)
).encode()


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Path) -> None:
    settings.DATA_DIR = tmp_path / "data"
    settings.DATASET_UPLOAD_MAX_BYTES = 64 * 1024 * 1024


def _upload(org: Any, user: Any, capture: Any, name: str, **kwargs: Any) -> Any:
    from datasets.services import upload_create

    with capture(execute=True):
        upload = upload_create(
            organization=org,
            user=user,
            file=io.BytesIO(DATA),
            name=name,
            fmt="jsonl",
            original_filename="c.jsonl",
            **kwargs,
        )
    upload.refresh_from_db()
    return upload


def test_a_second_upload_reuses_the_first_versions_tokenizer(
    alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    first = _upload(alice_org, alice, django_capture_on_commit_callbacks, "first")
    assert first.status == "ready"
    source = first.dataset_version
    second = _upload(alice_org, alice, django_capture_on_commit_callbacks, "second", tokenizer_from=source.pk)
    assert second.status == "ready"
    assert second.report["tokenizer"]["reused_from_version"] == source.pk
    assert second.dataset_version.tokenizer_file.read_bytes() == source.tokenizer_file.read_bytes()
    assert second.dataset_version.tokens == source.tokens  # same text, same tokenizer


def test_a_tokenizer_the_organization_cannot_mount_is_refused_and_nothing_is_stored(
    settings: Any, alice: Any, alice_org: Any, charlie: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from datasets.errors import UploadRefused
    from datasets.models import Upload
    from portal.selectors import organization_for_user

    first = _upload(alice_org, alice, django_capture_on_commit_callbacks, "first")
    charlie_org = organization_for_user(user=charlie)
    with pytest.raises(UploadRefused, match="not available"):
        _upload(
            charlie_org, charlie, django_capture_on_commit_callbacks, "theirs", tokenizer_from=first.dataset_version.pk
        )
    assert Upload.objects.filter(organization=charlie_org).count() == 0
    assert [p.name for p in (Path(settings.DATA_DIR) / "uploads").iterdir()] == []


def test_the_console_offers_the_organizations_tokenizers_only(
    client: Any, alice: Any, alice_org: Any, charlie: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.selectors import organization_for_user

    first = _upload(alice_org, alice, django_capture_on_commit_callbacks, "first")
    option = f'<option value="{first.dataset_version.pk}">first v1</option>'
    client.force_login(alice)
    assert option in client.get(f"/o/{alice_org.slug}/datasets/uploads/").content.decode()
    client.force_login(charlie)
    charlie_org = organization_for_user(user=charlie)
    page = client.get(f"/o/{charlie_org.slug}/datasets/uploads/").content.decode()
    assert option not in page
    response = client.post(
        f"/o/{charlie_org.slug}/datasets/uploads/",
        {
            "file": io.BytesIO(DATA),
            "name": "x",
            "format": "jsonl",
            "domain": "other",
            "tokenizer_from": str(first.dataset_version.pk),
        },
    )
    assert response.status_code == 400
