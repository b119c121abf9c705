"""Persistent volumes: create within the quota, attach at launch (one writer), delete, and the console and API
(charlie, the outsider, gets 404 everywhere). The local backend's real processes are in
test_volumes_local.py, the metering in tests/billing/test_volume_metering.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from instances_support import FakeBackend


@pytest.fixture(autouse=True)
def _english() -> Any:
    """Each test starts in English (a zh-hans request leaves its language active in the thread)."""
    from django.utils import translation

    with translation.override("en"):
        yield


@pytest.fixture
def vroot(settings: Any, tmp_path: Path) -> Path:
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    settings.INSTANCES_VOLUME_QUOTA_GB = 50
    return tmp_path / "volumes"


@pytest.fixture
def volume(vroot: Path, funded: Any, alice: Any, django_capture_on_commit_callbacks: Any) -> Any:
    from instances.interactive.volumes import volume_create

    with django_capture_on_commit_callbacks(execute=True):
        return volume_create(organization=funded, user=alice, name="data", size_gb=10)


def launch(org: Any, user: Any, volumes: list[str], capture: Any, name: str = "dev") -> Any:
    from instances.services import LaunchSpec, instance_launch

    with capture(execute=True):
        return instance_launch(
            organization=org,
            user=user,
            spec=LaunchSpec(
                name=name,
                kind="interactive",
                gpu_type="cpu-local",
                gpu_count=1,
                command=[sys.executable, "-c", "pass"],
                volumes=volumes,
            ),
        )


def test_a_volume_is_created_with_its_folder_and_an_audit_row(volume: Any, vroot: Path, alice: Any) -> None:
    from portal.models import AuditEvent

    assert (volume.name, volume.size_gb, volume.created_by, volume.deleted_at) == ("data", 10, alice, None)
    assert (vroot / f"vol-{volume.pk}").is_dir()
    event = AuditEvent.objects.get(action="instances.volume.create")
    assert (event.actor, event.object_id, event.extra) == (alice, str(volume.pk), {"name": "data", "size_gb": 10})


def test_a_volume_over_the_quota_is_refused_with_a_clear_message_and_nothing_written(
    volume: Any, funded: Any, alice: Any
) -> None:
    from instances.interactive.volumes import VolumeError, volume_create
    from instances.models import Volume, VolumeQuota
    from portal.models import AuditEvent

    with pytest.raises(VolumeError) as refused:
        volume_create(organization=funded, user=alice, name="more", size_gb=41)
    assert refused.value.code == "exceeds_quota"
    assert str(refused.value) == (
        "A 41 GB volume exceeds your organization's volume quota: 10 of 50 GB are in use, 40 GB left. "
        "Delete a volume or ask for a larger quota."
    )
    assert list(Volume.objects.values_list("name", flat=True)) == ["data"]
    assert AuditEvent.objects.filter(action="instances.volume.create").count() == 1
    assert volume_create(organization=funded, user=alice, name="more", size_gb=40).size_gb == 40  # exactly full
    VolumeQuota.objects.create(organization=funded, gb=60)  # the per-organization override
    assert volume_create(organization=funded, user=alice, name="extra", size_gb=10).size_gb == 10


@pytest.mark.parametrize(
    ("name", "size", "code"),
    [
        ("Data", 1, "invalid_name"),
        ("-x", 1, "invalid_name"),
        ("a" * 41, 1, "invalid_name"),
        ("../etc", 1, "invalid_name"),
        ("data\n", 1, "invalid_name"),  # a trailing newline (re's $ would let it through)
        ("ok", 0, "invalid_size"),
        ("ok", True, "invalid_size"),
        ("data", 1, "name_taken"),
    ],
)
def test_bad_names_and_sizes_are_refused_and_nothing_is_written(
    volume: Any, funded: Any, alice: Any, name: str, size: Any, code: str
) -> None:
    from instances.interactive.volumes import VolumeError, volume_create
    from instances.models import Volume

    with pytest.raises(VolumeError) as refused:
        volume_create(organization=funded, user=alice, name=name, size_gb=size)
    assert refused.value.code == code
    assert Volume.objects.count() == 1


def test_launch_attaches_the_volume_and_the_backend_mounts_it_read_write(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.backends.base import VolumeMount

    inst = launch(funded, alice, ["data"], django_capture_on_commit_callbacks)
    assert inst.status == "provisioning"
    assert list(inst.volume_attachments.values_list("volume__name", flat=True)) == ["data"]
    (spec,) = fake_backend.submitted
    assert spec.volume_mounts == (VolumeMount("data", str(vroot / f"vol-{volume.pk}"), "/volumes/data", 10),)


def test_attaching_a_volume_in_use_is_refused_nothing_half_made_nothing_billed(
    volume: Any,
    funded: Any,
    alice: Any,
    bob: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from billing.metering import metering_tick
    from billing.models import UsageRecord
    from instances.models import Instance, VolumeAttachment
    from instances.services import LaunchError, instance_stop

    funded.members_enter_any_instance = True  # bob may use alice's volumes (test_access_doors.py: by default not)
    funded.save(update_fields=["members_enter_any_instance"])
    first = launch(funded, alice, ["data"], django_capture_on_commit_callbacks)
    with pytest.raises(LaunchError) as refused:
        launch(funded, bob, ["data"], django_capture_on_commit_callbacks, name="second")
    assert refused.value.code == "volume_in_use"
    assert str(refused.value) == (
        f"Volume data is attached to instance #{first.pk}, which is active: one instance writes to a volume at a "
        "time. Stop that instance first."
    )
    assert list(Instance.objects.values_list("name", flat=True)) == ["dev"]
    assert VolumeAttachment.objects.count() == 1
    assert len(fake_backend.submitted) == 1
    metering_tick()
    assert set(UsageRecord.objects.values_list("instance_id", flat=True)) <= {first.pk}
    with django_capture_on_commit_callbacks(execute=True):  # stopped and released: the next instance may take it
        instance_stop(instance=first, reason="done", acting_user=alice)
    assert Instance.objects.get(pk=first.pk).status == "stopped"
    second = launch(funded, bob, ["data"], django_capture_on_commit_callbacks, name="second")
    assert list(second.volume_attachments.values_list("volume_id", flat=True)) == [volume.pk]


def test_another_organizations_volume_is_not_found_at_launch(
    vroot: Path,
    funded: Any,
    alice: Any,
    charlie: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.interactive.volumes import volume_create
    from instances.models import Instance
    from instances.services import LaunchError
    from portal.selectors import organization_for_user

    volume_create(organization=organization_for_user(user=charlie), user=charlie, name="secret", size_gb=1)
    with pytest.raises(LaunchError) as refused:
        launch(funded, alice, ["secret"], django_capture_on_commit_callbacks)
    assert (refused.value.code, str(refused.value)) == ("volume_not_found", "No volume named secret.")
    assert Instance.objects.count() == 0


def test_an_attached_volume_cannot_be_deleted_until_its_instance_stops(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.interactive.volumes import VolumeError, volume_delete, volume_mounts_for
    from instances.models import Volume
    from instances.services import instance_stop
    from portal.models import AuditEvent

    inst = launch(funded, alice, ["data"], django_capture_on_commit_callbacks)
    with pytest.raises(VolumeError) as refused:
        volume_delete(volume=volume, user=alice)
    assert str(refused.value) == f"Volume data is attached to instance #{inst.pk}, which is active: stop it first."
    assert Volume.objects.get(pk=volume.pk).deleted_at is None
    with django_capture_on_commit_callbacks(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    with django_capture_on_commit_callbacks(execute=True):
        deleted = volume_delete(volume=volume, user=alice)
    assert deleted.deleted_at is not None
    assert not (vroot / f"vol-{volume.pk}").exists()
    assert AuditEvent.objects.get(action="instances.volume.delete").extra == {
        "name": "data",
        "size_gb": 10,
        "used_bytes": 0,
    }
    from instances.backends.base import BackendError

    with pytest.raises(BackendError, match=r"Volume data was deleted\."):  # a restart of the old instance
        volume_mounts_for(inst)


def test_the_volume_api_lists_creates_and_deletes_and_launch_takes_a_volumes_field(
    vroot: Path, funded: Any, alice: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Volume

    api = APIClient()
    api.force_authenticate(alice)
    with django_capture_on_commit_callbacks(execute=True):
        made = api.post("/api/v1/volumes", {"name": "data", "size_gb": 4}, format="json")
    assert made.status_code == 201
    body = made.json()
    assert {k: body[k] for k in ("name", "size_gb", "attached_to", "cost_micros", "price_per_hour_micros")} == {
        "name": "data",
        "size_gb": 4,
        "attached_to": None,
        "cost_micros": 0,
        "price_per_hour_micros": 2000,  # 4 GB at 0.0005 CNY per GB-hour
    }
    too_big = api.post("/api/v1/volumes", {"name": "big", "size_gb": 47}, format="json")
    assert (too_big.status_code, too_big.json()["error"]["code"]) == (403, "exceeds_quota")
    cmd = [sys.executable, "-c", "pass"]
    with django_capture_on_commit_callbacks(execute=True):
        inst = api.post(
            "/api/v1/instances",
            {"gpu_type": "cpu-local", "gpu_count": 1, "command": cmd, "volumes": ["data"]},
            format="json",
        )
    assert inst.status_code == 201
    busy = api.post(
        "/api/v1/instances",
        {"gpu_type": "cpu-local", "gpu_count": 1, "command": cmd, "volumes": ["data"]},
        format="json",
    )
    assert (busy.status_code, busy.json()["error"]["code"]) == (409, "volume_in_use")
    (listed,) = api.get("/api/v1/volumes").json()["results"]
    assert listed["attached_to"] == inst.json()["id"]
    refused = api.delete(f"/api/v1/volumes/{body['id']}")
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "in_use")
    with django_capture_on_commit_callbacks(execute=True):
        api.post(f"/api/v1/instances/{inst.json()['id']}/stop")
    assert api.delete(f"/api/v1/volumes/{body['id']}").status_code == 204
    assert Volume.objects.get(pk=body["id"]).deleted_at is not None
    assert api.get("/api/v1/volumes").json()["results"] == []


def test_charlie_gets_404_for_alices_volume_in_the_api_and_the_console(
    volume: Any, client: Any, funded: Any, charlie: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Volume
    from portal.selectors import organization_for_user

    api = APIClient()
    api.force_authenticate(charlie)
    assert api.get(f"/api/v1/volumes/{volume.pk}").status_code == 404
    assert api.delete(f"/api/v1/volumes/{volume.pk}").status_code == 404
    assert api.get("/api/v1/volumes").json()["results"] == []
    client.force_login(charlie)
    own = organization_for_user(user=charlie).slug
    for org in (funded.slug, own):
        assert client.get(f"/o/{org}/volumes/{volume.pk}/delete/").status_code == 404
        assert client.post(f"/o/{org}/volumes/{volume.pk}/delete/").status_code == 404
    assert client.get(f"/o/{funded.slug}/volumes/").status_code == 404
    assert client.post(f"/o/{funded.slug}/volumes/", {"name": "x", "size_gb": 1}).status_code == 404
    assert Volume.objects.get(pk=volume.pk).deleted_at is None
    assert Volume.objects.count() == 1


def test_the_volumes_page_shows_cost_the_price_before_creating_and_deletes_after_confirmation(
    volume: Any, client: Any, funded: Any, alice: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.models import Volume

    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/volumes/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-testid="volume-data"' in html
    assert "10 of 50 GB of your quota in use." in html
    assert "10 GB costs 0.005000 CNY per hour" in html  # the create form's initial size
    quote = client.get(f"/o/{funded.slug}/volumes/quote/", {"size_gb": "3"}, HTTP_HX_REQUEST="true")
    assert "3 GB costs 0.001500 CNY per hour" in quote.content.decode()
    over = client.post(f"/o/{funded.slug}/volumes/", {"name": "big", "size_gb": "41"})
    assert over.status_code == 400
    assert "exceeds your organization&#x27;s volume quota" in over.content.decode()
    assert Volume.objects.count() == 1
    confirm = client.get(f"/o/{funded.slug}/volumes/{volume.pk}/delete/")
    assert "Delete volume data?" in confirm.content.decode()
    assert Volume.objects.get(pk=volume.pk).deleted_at is None  # a GET deletes nothing
    with django_capture_on_commit_callbacks(execute=True):
        done = client.post(f"/o/{funded.slug}/volumes/{volume.pk}/delete/")
    assert done.status_code == 302
    assert Volume.objects.get(pk=volume.pk).deleted_at is not None


def test_the_instance_page_lists_its_volumes(
    volume: Any,
    client: Any,
    funded: Any,
    alice: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    inst = launch(funded, alice, ["data"], django_capture_on_commit_callbacks)
    client.force_login(alice)
    html = client.get(f"/o/{funded.slug}/instances/{inst.pk}/").content.decode()
    assert 'data-testid="instance-volumes"' in html
    assert "<code>volumes/data</code>" in html


def test_the_volumes_page_and_its_refusals_speak_chinese(volume: Any, client: Any, funded: Any, alice: Any) -> None:
    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/volumes/", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "配额 50 GB，已使用 10 GB。" in page
    assert "10 GB 每小时 0.005000 元" in page
    over = client.post(f"/o/{funded.slug}/volumes/", {"name": "big", "size_gb": "41"}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "41 GB 的数据卷超出了组织的数据卷配额：已使用 10 / 50 GB，剩余 40 GB。" in over.content.decode()


def test_a_training_job_gets_the_volume_and_a_restart_never_makes_a_second_writer(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.backends.base import BackendError
    from instances.interactive.volumes import volume_mounts_for
    from instances.services import LaunchSpec, instance_launch, instance_stop

    with django_capture_on_commit_callbacks(execute=True):
        job = instance_launch(
            organization=funded,
            user=alice,
            spec=LaunchSpec(
                name="train",
                gpu_type="cpu-local",
                gpu_count=1,
                dataset_version_ids=[licensed.pk],
                hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 10},
                volumes=["data"],
            ),
        )
    (spec,) = fake_backend.submitted
    assert [(m.name, m.mount_path) for m in spec.volume_mounts] == [("data", "/volumes/data")]
    with django_capture_on_commit_callbacks(execute=True):
        instance_stop(instance=job, reason="done", acting_user=alice)
    other = launch(funded, alice, ["data"], django_capture_on_commit_callbacks)  # the volume is free again
    with pytest.raises(BackendError) as refused:  # restarting the stopped job now would be a second writer
        volume_mounts_for(job)
    assert str(refused.value) == "Volume data is in use by another instance."
    assert volume_mounts_for(other)[0].source == str(vroot / f"vol-{volume.pk}")


def test_the_console_launch_form_attaches_volumes_and_shows_a_refusal_on_the_form(
    volume: Any, client: Any, funded: Any, alice: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from instances.models import Instance

    client.force_login(alice)
    form = {"gpu_type": "cpu-local", "gpu_count": "1", "mode": "container", "command": "python -c pass"}
    bad = client.post(f"/o/{funded.slug}/instances/new/", {**form, "volumes": "data, nope"})
    assert bad.status_code == 400
    assert "No volume named nope." in bad.content.decode()
    assert Instance.objects.count() == 0
    good = client.post(f"/o/{funded.slug}/instances/new/", {**form, "volumes": "data"})
    assert good.status_code == 302
    assert list(Instance.objects.get().volume_attachments.values_list("volume__name", flat=True)) == ["data"]


def test_a_file_with_several_names_counts_once_as_du_counts_it(
    volume: Any, vroot: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real hard links on disk: 16 KiB written once under three names is 16 KiB used (it counted 48 KiB, and a
    writer was stopped over a size it did not use). The size is allocated blocks, as ``du`` reports them."""
    import os
    import subprocess

    from instances.interactive import volumes
    from instances.models import Volume

    folder = vroot / f"vol-{volume.pk}"
    data = folder / "data.bin"
    with open(data, "wb") as fh:
        fh.write(os.urandom(16 * 1024))
        fh.flush()
        os.fsync(fh.fileno())
    (folder / "sub").mkdir()
    os.link(data, folder / "copy.bin")
    os.link(data, folder / "sub" / "again.bin")
    (folder / "link").symlink_to("data.bin")
    (folder / "sparse.bin").open("wb").truncate(10**6)  # 1 MB apparent, no block written
    assert os.stat(data).st_nlink == 3
    du = int(
        subprocess.run(["du", "-s", "-B1", str(folder)], capture_output=True, text=True, check=True).stdout.split()[0]
    )
    expected = du - os.lstat(folder).st_blocks * 512  # du counts the folder's own directory too
    blocks = lambda p: os.lstat(p).st_blocks * 512  # noqa: E731
    assert expected == blocks(data) + blocks(folder / "sub") + blocks(folder / "link") + blocks(folder / "sparse.bin")
    assert blocks(data) >= 16 * 1024
    assert volumes.folder_bytes(folder) == expected
    monkeypatch.setattr(volumes, "GB", blocks(data) + 2 * blocks(folder / "sub"))  # the volume's size: 1 "GB"
    volume.size_gb = 1
    volume.save(update_fields=["size_gb"])
    assert volumes.volumes_measure() == {}  # under its size: nobody stopped
    assert Volume.objects.get(pk=volume.pk).used_bytes == expected


ABSURD_SIZES = [
    str(10**30),  # a 500 once (decimal.InvalidOperation in the price)
    "9" * 2000,
    "-1",
    "0",
    "1.5",
    "1e30",
    "1E3",
    "NaN",
    "nan",
    "Infinity",
    "-Infinity",
    "inf",
    "1000001",  # one GB past the largest volume
    "0x10",
    "ten",
]


@pytest.mark.parametrize("size", ABSURD_SIZES)
def test_an_absurd_size_gets_a_clear_400_in_the_console_quote_and_form_and_nothing_is_written(
    volume: Any, client: Any, funded: Any, alice: Any, size: str
) -> None:
    from instances.models import Volume
    from portal.models import AuditEvent

    client.force_login(alice)
    quote = client.get(f"/o/{funded.slug}/volumes/quote/", {"size_gb": size}, HTTP_HX_REQUEST="true")
    html = quote.content.decode()
    assert quote.status_code == 400
    assert 'data-testid="volume-price-error"' in html and "CNY per hour" not in html
    expected = {
        "-1": "Ensure this value is greater than or equal to 1.",
        "0": "Ensure this value is greater than or equal to 1.",
        str(10**30): "Ensure this value is less than or equal to 1000000.",
        "9" * 2000: "Ensure this value is less than or equal to 1000000.",
        "1000001": "Ensure this value is less than or equal to 1000000.",
    }.get(size, "Enter a whole number.")
    assert expected in html
    made = client.post(f"/o/{funded.slug}/volumes/", {"name": "big", "size_gb": size})
    assert made.status_code == 400
    assert expected in made.content.decode()
    assert list(Volume.objects.values_list("name", flat=True)) == ["data"]
    assert AuditEvent.objects.filter(action="instances.volume.create").count() == 1


@pytest.mark.parametrize(
    "body",
    [
        '{"name": "big", "size_gb": 1000000000000000000000000000000}',
        '{"name": "big", "size_gb": 1e30}',
        '{"name": "big", "size_gb": "1e30"}',
        '{"name": "big", "size_gb": -1}',
        '{"name": "big", "size_gb": 0}',
        '{"name": "big", "size_gb": 1.5}',
        '{"name": "big", "size_gb": "NaN"}',
        '{"name": "big", "size_gb": "Infinity"}',
        '{"name": "big", "size_gb": "-Infinity"}',
        '{"name": "big", "size_gb": NaN}',
        '{"name": "big", "size_gb": Infinity}',
        '{"name": "big", "size_gb": 1000001}',
        '{"name": "big", "size_gb": true}',
        '{"name": "big", "size_gb": null}',
        '{"name": "big", "size_gb": "ten"}',
    ],
)
def test_an_absurd_size_gets_a_clear_400_from_the_api_and_nothing_is_written(
    volume: Any, funded: Any, alice: Any, body: str
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Volume
    from portal.models import AuditEvent

    api = APIClient()
    api.force_authenticate(alice)
    refused = api.post("/api/v1/volumes", body, content_type="application/json")
    assert refused.status_code == 400
    error = refused.json()["error"]
    if "NaN}" in body or "Infinity}" in body:  # not JSON at all (RFC 8259 §6)
        assert error["code"] == "parse_error"
    else:
        assert (error["code"], list(error["details"])) == ("invalid", ["size_gb"])
    assert list(Volume.objects.values_list("name", flat=True)) == ["data"]
    assert AuditEvent.objects.filter(action="instances.volume.create").count() == 1


def test_the_volume_service_refuses_sizes_past_the_largest_and_prices_only_real_sizes(
    volume: Any, funded: Any, alice: Any
) -> None:
    from instances.interactive.volumes import (
        MAX_SIZE_GB,
        VolumeError,
        volume_create,
        volume_price_per_hour_micros,
    )
    from instances.models import Volume

    assert MAX_SIZE_GB == 1_000_000
    for size in (10**30, MAX_SIZE_GB + 1, 0, -5, 2.0, "3"):
        with pytest.raises(VolumeError) as refused:
            volume_create(organization=funded, user=alice, name="big", size_gb=size)  # type: ignore[arg-type]
        assert (refused.value.code, refused.value.field, str(refused.value)) == (
            "invalid_size",
            "size_gb",
            "The size is a whole number of GB from 1 to 1000000.",
        )
        with pytest.raises(VolumeError):
            volume_price_per_hour_micros(size_gb=size)  # type: ignore[arg-type]
    assert Volume.objects.count() == 1
    assert volume_price_per_hour_micros(size_gb=MAX_SIZE_GB) == 500_000_000  # 0.0005 CNY per GB-hour
