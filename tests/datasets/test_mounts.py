"""Mount interface used by instances: refused without a current agreement, recorded for lineage."""

from __future__ import annotations

from typing import Any

import pytest

from tests.datasets.factories import make_license_version, make_version


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path


def _accept(org: Any, user: Any, lv: Any, dataset: Any = None) -> Any:
    from datasets.services import agreement_accept

    return agreement_accept(
        organization=org,
        user=user,
        license_version=lv,
        shown_text_sha256=lv.text_sha256,
        ip="203.0.113.5",
        user_agent="pytest",
        dataset=dataset,
    )


def test_a_mount_without_an_agreement_is_refused_and_names_dataset_and_license(alice: Any, alice_org: Any) -> None:
    from datasets.models import DatasetMount
    from datasets.services import AgreementRequired, mount_attach

    version = make_version()
    with pytest.raises(AgreementRequired) as exc:
        mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="instances.trainingjob:1")
    assert str(exc.value) == (
        "Set test-set needs an agreement to License test-license version 1 before it can be mounted."
    )
    assert DatasetMount.objects.count() == 0


def test_a_mount_with_an_agreement_is_recorded_for_lineage(alice: Any, alice_org: Any) -> None:
    from datasets.selectors import mounts_for_consumer, versions_mountable_by
    from datasets.services import mount_attach
    from portal.models import AuditEvent

    version = make_version()
    assert list(versions_mountable_by(alice_org)) == []
    agreement = _accept(alice_org, alice, version.license_version, version.dataset)
    assert list(versions_mountable_by(alice_org)) == [version]
    mount = mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="instances.trainingjob:7")
    assert mount.version == version
    assert mount.agreement == agreement
    assert mount.shard_dir == version.shard_path
    assert (mount.shard_dir / "index.json").is_file()
    assert list(mounts_for_consumer("instances.trainingjob:7")) == [mount]
    assert list(mounts_for_consumer("instances.trainingjob:8")) == []
    assert AuditEvent.objects.filter(action="datasets.mount_attach", object_id=str(mount.pk)).count() == 1


def test_a_new_license_version_needs_a_new_agreement(alice: Any, alice_org: Any) -> None:
    from datasets.services import AgreementRequired, mount_attach

    version = make_version()
    _accept(alice_org, alice, version.license_version)
    lv2 = make_license_version(text="Test license text, version two.")
    assert lv2.number == 2
    with pytest.raises(AgreementRequired, match="License test-license version 2"):
        mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="c:1")
    _accept(alice_org, alice, lv2)
    assert mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="c:1").pk


def test_an_outsider_cannot_see_a_private_version(alice: Any, alice_org: Any, charlie: Any) -> None:
    from datasets.selectors import dataset_version_for_org
    from datasets.services import DatasetNotFound, mount_attach
    from portal.selectors import organization_for_user

    version = make_version(slug="own", publisher=alice_org, visibility="private")
    charlie_org = organization_for_user(user=charlie)
    with pytest.raises(DatasetNotFound):
        dataset_version_for_org(charlie_org, version.pk)
    with pytest.raises(DatasetNotFound):
        mount_attach(organization=charlie_org, user=charlie, version_id=version.pk, consumer="c:1")
    # charlie cannot act for alice's organization either
    with pytest.raises(DatasetNotFound):
        mount_attach(organization=alice_org, user=charlie, version_id=version.pk, consumer="c:1")
    # alice's own private dataset needs no agreement
    mount = mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="c:2")
    assert mount.version == version


def test_a_revoked_organization_cannot_mount(alice: Any, alice_org: Any) -> None:
    from datasets.models import AccessRevocation
    from datasets.selectors import versions_mountable_by
    from datasets.services import AccessRevoked, access_revoke, mount_attach

    version = make_version()
    _accept(alice_org, alice, version.license_version, version.dataset)
    revocation = access_revoke(
        organization=alice_org, dataset=version.dataset, reason="breach of terms", acting_user=None
    )
    assert AccessRevocation.objects.get() == revocation
    assert list(versions_mountable_by(alice_org)) == []
    with pytest.raises(AccessRevoked):
        mount_attach(organization=alice_org, user=alice, version_id=version.pk, consumer="c:1")
    with pytest.raises(AccessRevoked):
        _accept(alice_org, alice, version.license_version, version.dataset)
