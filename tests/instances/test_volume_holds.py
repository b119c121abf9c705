"""A volume belongs to its job until the job has truly ended (DESIGN.md §4: "a held resource stays held until
its holder has truly ended"; issue 24, item 6): a job preempted or in its crash back-off keeps its volume —
deleting it and attaching it to another launch are refused with a message naming the holder, nothing
written — and the automatic resume mounts it again; once the job is stopped or has failed for good the
volume is free. A user's restart of a job whose hold had ended takes the volume back under its row lock,
or is refused. The compute backend is the tests' stand-in (``FakeBackend``: the boundary the
neighbouring volume tests replace); the races run on PostgreSQL only (``postgres_only``)."""

from __future__ import annotations

import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections
from instances_support import FakeBackend

from instances.backends.base import JobStatus, VolumeMount


@pytest.fixture(autouse=True)
def _english() -> Any:
    from django.utils import translation

    with translation.override("en"):
        yield


@pytest.fixture
def t0(time_machine: Any) -> datetime:
    """Time frozen at the start of the next second (after the catalog's prices took effect; the trial credit
    of ``funded`` is valid)."""
    from django.utils import timezone

    start = timezone.now().replace(microsecond=0) + timedelta(seconds=1)
    time_machine.move_to(start, tick=False)
    return start


@pytest.fixture
def vroot(settings: Any, tmp_path: Path) -> Path:
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    settings.INSTANCES_VOLUME_QUOTA_GB = 50
    settings.INSTANCES_PREEMPT_RESUME_DELAY_S = 600  # the preempted job rests ten minutes before it resumes
    settings.INSTANCES_RESUME_BACKOFF_S = 30
    settings.INSTANCES_MAX_CRASH_RESUMES = 1
    return tmp_path / "volumes"


@pytest.fixture
def volume(vroot: Path, funded: Any, alice: Any, django_capture_on_commit_callbacks: Any) -> Any:
    from instances.interactive.volumes import volume_create

    with django_capture_on_commit_callbacks(execute=True):
        return volume_create(organization=funded, user=alice, name="data", size_gb=10)


def _train(org: Any, user: Any, version: Any, capture: Any) -> Any:
    from instances.services import LaunchSpec, instance_launch

    with capture(execute=True):
        return instance_launch(
            organization=org,
            user=user,
            spec=LaunchSpec(
                name="train",
                gpu_type="cpu-local",
                gpu_count=1,
                dataset_version_ids=[version.pk],
                hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 10},
                volumes=["data"],
            ),
        )


def _shell(org: Any, user: Any, capture: Any, name: str = "other") -> Any:
    """``user`` launches an instance on the volume "data"; the organization lets members use each other's volumes
    (by default only the creator, owners and admins attach one: tests/instances/test_access_doors.py), so that what
    refuses bob here is the hold, not who made the volume."""
    from instances.services import LaunchSpec, instance_launch

    org.members_enter_any_instance = True
    org.save(update_fields=["members_enter_any_instance"])
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
                volumes=["data"],
            ),
        )


def _reconcile(backend: FakeBackend, at: datetime, time_machine: Any, capture: Any) -> None:
    from instances.services import instances_reconcile

    time_machine.move_to(at, tick=False)
    with capture(execute=True):
        instances_reconcile(now=at, backend=backend)  # type: ignore[arg-type]


def _nothing_written(volume: Any, vroot: Path, instances: int) -> None:
    from instances.models import Instance, Volume, VolumeAttachment
    from portal.models import AuditEvent

    assert Volume.objects.get(pk=volume.pk).deleted_at is None
    assert (vroot / f"vol-{volume.pk}").is_dir()
    assert VolumeAttachment.objects.count() == 1
    assert Instance.objects.count() == instances
    assert AuditEvent.objects.filter(action="instances.volume.delete").count() == 0
    assert AuditEvent.objects.filter(action="instances.volume.attach").count() == 1


def _refusals(volume: Any, vroot: Path, holder: Any, why: str, org: Any, alice: Any, bob: Any, capture: Any) -> None:
    """Delete (service, API, console) and attach by another launch (service, API) are refused, naming the
    holder and why it keeps the volume; nothing is written."""
    from django.test import Client
    from rest_framework.test import APIClient

    from instances.interactive.volumes import VolumeError, volume_delete
    from instances.services import LaunchError

    with pytest.raises(VolumeError) as refused:
        volume_delete(volume=volume, user=alice)
    assert (refused.value.code, refused.value.holder_id) == ("in_use", holder.pk)
    assert str(refused.value) == f"Volume data is held by instance #{holder.pk} (train), which {why}: stop it first."
    with pytest.raises(LaunchError) as taken:
        _shell(org, bob, capture)
    assert (taken.value.code, taken.value.field) == ("volume_in_use", "volumes")
    assert str(taken.value) == (
        f"Volume data is held by instance #{holder.pk} (train), which {why}: one instance writes to a volume at a "
        "time. Stop that instance first."
    )
    api = APIClient()
    api.force_authenticate(alice)
    gone = api.delete(f"/api/v1/volumes/{volume.pk}")
    assert gone.status_code == 409
    assert gone.json() == {
        "error": {"code": "in_use", "message": str(refused.value), "details": {"field": "", "holder": holder.pk}}
    }
    cmd = [sys.executable, "-c", "pass"]
    busy = api.post(
        "/api/v1/instances",
        {"gpu_type": "cpu-local", "gpu_count": 1, "command": cmd, "volumes": ["data"]},
        format="json",
    )
    assert busy.status_code == 409
    assert busy.json() == {
        "error": {"code": "volume_in_use", "message": str(taken.value), "details": {"field": "volumes"}}
    }
    (listed,) = api.get("/api/v1/volumes").json()["results"]
    assert listed["attached_to"] == holder.pk
    console = Client()
    console.force_login(alice)
    page = console.post(f"/o/{org.slug}/volumes/{volume.pk}/delete/", follow=True).content.decode()
    assert str(refused.value) in page
    assert 'data-testid="volume-holder-status"' in page
    assert f"/o/{org.slug}/volumes/{volume.pk}/delete/" not in page  # no delete button for a held volume
    _nothing_written(volume, vroot, instances=1)


def test_a_preempted_job_keeps_its_volume_and_resumes_with_it_mounted(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    bob: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    t0: datetime,
) -> None:
    from instances.interactive.volumes import volume_delete
    from instances.services import instance_stop

    capture = django_capture_on_commit_callbacks
    inst = _train(funded, alice, licensed, capture)
    _reconcile(fake_backend, t0, time_machine, capture)
    first = inst.job.attempts.get(number=1)
    fake_backend.states[first.handle] = JobStatus("preempted", None, "node reclaimed")
    _reconcile(fake_backend, t0 + timedelta(minutes=1), time_machine, capture)
    inst.refresh_from_db()
    inst.job.refresh_from_db()
    assert (inst.status, inst.job.next_resume_at) == ("preempted", t0 + timedelta(minutes=11))

    _refusals(volume, vroot, inst, "was preempted and resumes on it", funded, alice, bob, capture)

    # the automatic resume: the next attempt mounts the volume it kept
    _reconcile(fake_backend, t0 + timedelta(minutes=11), time_machine, capture)
    inst.refresh_from_db()
    assert inst.status == "provisioning"
    resumed = fake_backend.submitted[-1]
    assert (resumed.attempt, resumed.volume_mounts) == (
        2,
        (VolumeMount("data", str(vroot / f"vol-{volume.pk}"), "/volumes/data", 10),),
    )

    # stopped by its user, the job has truly ended: the volume is free for another launch, then for deletion
    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    assert (inst.status, inst.job.outcome) == ("stopped", "stopped")
    other = _shell(funded, bob, capture)
    assert list(other.volume_attachments.values_list("volume_id", flat=True)) == [volume.pk]
    with capture(execute=True):
        instance_stop(instance=other, reason="done", acting_user=bob)
    with capture(execute=True):
        assert volume_delete(volume=volume, user=alice).deleted_at is not None
    assert not (vroot / f"vol-{volume.pk}").exists()


def test_a_job_in_its_crash_backoff_keeps_its_volume_until_it_fails_for_good(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    bob: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    t0: datetime,
) -> None:
    from instances.models import Volume

    capture = django_capture_on_commit_callbacks
    inst = _train(funded, alice, licensed, capture)
    _reconcile(fake_backend, t0, time_machine, capture)
    fake_backend.states[inst.job.attempts.get(number=1).handle] = JobStatus("failed", 1, "Traceback: boom")
    _reconcile(fake_backend, t0 + timedelta(seconds=10), time_machine, capture)
    inst.refresh_from_db()
    inst.job.refresh_from_db()
    assert (inst.status, inst.job.crash_count, inst.job.outcome) == ("failed", 1, "")
    assert inst.job.next_resume_at == t0 + timedelta(seconds=40)

    _refusals(volume, vroot, inst, "crashed and restarts on it after its back-off", funded, alice, bob, capture)

    _reconcile(fake_backend, t0 + timedelta(seconds=40), time_machine, capture)
    inst.refresh_from_db()
    assert inst.status == "provisioning"
    second = fake_backend.submitted[-1]
    assert (second.attempt, [m.source for m in second.volume_mounts]) == (2, [str(vroot / f"vol-{volume.pk}")])

    # a second crash spends the budget (1 resume): failed for good, the hold ends
    _reconcile(fake_backend, t0 + timedelta(seconds=50), time_machine, capture)
    fake_backend.states[inst.job.attempts.get(number=2).handle] = JobStatus("failed", 1, "Traceback: boom")
    _reconcile(fake_backend, t0 + timedelta(seconds=60), time_machine, capture)
    inst.refresh_from_db()
    inst.job.refresh_from_db()
    assert (inst.status, inst.job.outcome, inst.job.next_resume_at) == ("failed", "failed", None)
    other = _shell(funded, bob, capture)
    assert other.volume_attachments.get().volume_id == volume.pk
    assert Volume.objects.get(pk=volume.pk).deleted_at is None


def test_restarting_a_stopped_job_whose_volume_another_instance_took_is_refused_and_writes_nothing(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    bob: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from django.test import Client
    from rest_framework.test import APIClient

    from instances.interactive.volumes import volume_delete
    from instances.models import InstanceTransition, TrainingJob
    from instances.services import instance_stop

    capture = django_capture_on_commit_callbacks
    inst = _train(funded, alice, licensed, capture)
    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    other = _shell(funded, bob, capture)  # the stopped job's hold had ended: bob may take the volume
    before = (InstanceTransition.objects.count(), len(fake_backend.submitted))
    api = APIClient()
    api.force_authenticate(alice)
    refused = api.post(f"/api/v1/jobs/{inst.job.pk}/restart")
    assert refused.status_code == 409
    assert refused.json() == {
        "error": {
            "code": "volume_in_use",
            "message": f"Volume data is attached to instance #{other.pk}, which is active: one instance writes to a "
            "volume at a time. Stop that instance first.",
            "details": {"field": "volumes"},
        }
    }
    console = Client()
    console.force_login(alice)
    page = console.post(f"/o/{funded.slug}/jobs/{inst.job.pk}/restart/", follow=True).content.decode()
    assert f"Volume data is attached to instance #{other.pk}, which is active" in page
    inst.refresh_from_db()
    job = TrainingJob.objects.get(pk=inst.job.pk)
    assert (inst.status, job.outcome, job.next_resume_at) == ("stopped", "stopped", None)
    assert (InstanceTransition.objects.count(), len(fake_backend.submitted)) == before

    # bob stops; alice's restart takes the volume back and mounts it
    with capture(execute=True):
        instance_stop(instance=other, reason="done", acting_user=bob)
    with capture(execute=True):
        assert api.post(f"/api/v1/jobs/{inst.job.pk}/restart").status_code == 200
    inst.refresh_from_db()
    assert inst.status == "provisioning"
    assert [m.name for m in fake_backend.submitted[-1].volume_mounts] == ["data"]
    # a deleted volume: the restart says so
    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    with capture(execute=True):
        volume_delete(volume=volume, user=alice)
    deleted = api.post(f"/api/v1/jobs/{inst.job.pk}/restart")
    assert (deleted.status_code, deleted.json()["error"]["code"], deleted.json()["error"]["message"]) == (
        409,
        "volume_deleted",
        "Volume data was deleted.",
    )


def test_the_holds_refusals_speak_chinese(
    volume: Any,
    funded: Any,
    alice: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    t0: datetime,
) -> None:
    from django.test import Client

    capture = django_capture_on_commit_callbacks
    inst = _train(funded, alice, licensed, capture)
    _reconcile(fake_backend, t0, time_machine, capture)
    fake_backend.states[inst.job.attempts.get(number=1).handle] = JobStatus("preempted", None, "node reclaimed")
    _reconcile(fake_backend, t0 + timedelta(minutes=1), time_machine, capture)
    console = Client()
    console.force_login(alice)
    page = console.post(
        f"/o/{funded.slug}/volumes/{volume.pk}/delete/", follow=True, HTTP_ACCEPT_LANGUAGE="zh-hans"
    ).content.decode()
    assert f"数据卷 data 由实例 #{inst.pk}（train）持有，该实例已被抢占，将在恢复后继续使用它：请先停止该实例。" in page


# --- two actors at once (PostgreSQL row locks) --------------------------------------------------------------


def _slow_commit(table: str) -> None:
    """Hold the next commit that inserted into ``table`` for 1.5 s (a deferred constraint trigger)."""
    with connection.cursor() as cur:
        cur.execute(
            "CREATE OR REPLACE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$"
        )
        cur.execute(
            f"CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON {table} DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit()"
        )


def _while_sleeping(first: Any) -> None:
    """Start ``first`` in a thread and return once it sits in its slowed commit."""
    first.start()
    with connection.cursor() as cur:
        for _ in range(600):
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()"
            )
            if cur.fetchone()[0]:
                return
            time.sleep(0.01)
    raise AssertionError("the first actor never reached its commit")


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks and pg_sleep")
def test_a_restart_racing_a_launch_for_the_volume_loses_to_it_and_writes_nothing(
    volume: Any,
    funded: Any,
    alice: Any,
    bob: Any,
    licensed: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """bob's launch attaches the volume of alice's stopped job and sits 1.5 s in its commit, holding the
    volume's row lock; alice's restart, asked meanwhile, waits for that lock and then sees bob's instance."""
    from instances.models import Instance, TrainingJob, VolumeAttachment
    from instances.services import LaunchError, instance_stop, job_restart

    capture = django_capture_on_commit_callbacks
    inst = _train(funded, alice, licensed, capture)
    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    _slow_commit("instances_volumeattachment")
    out: dict[str, Any] = {}

    def launch() -> None:
        try:
            out["other"] = _shell(funded, bob, capture)
        except Exception as exc:  # reported below
            out["other"] = exc
        finally:
            connections.close_all()

    try:
        thread = threading.Thread(target=launch)
        _while_sleeping(thread)
        with pytest.raises(LaunchError) as refused:
            job_restart(job=TrainingJob.objects.get(pk=inst.job.pk), acting_user=alice)
        thread.join(30)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS test_slow_commit ON instances_volumeattachment")
    other = out["other"]
    assert isinstance(other, Instance), other
    assert refused.value.code == "volume_in_use"
    assert f"instance #{other.pk}" in str(refused.value)
    inst.refresh_from_db()
    assert inst.status == "stopped"
    assert list(
        VolumeAttachment.objects.filter(volume=volume).order_by("id").values_list("instance_id", flat=True)
    ) == [
        inst.pk,
        other.pk,
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks and pg_sleep")
def test_a_delete_racing_a_launch_for_the_volume_loses_to_it(
    volume: Any,
    vroot: Path,
    funded: Any,
    alice: Any,
    bob: Any,
    nodes: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.interactive.volumes import VolumeError, volume_delete
    from instances.models import Instance, Volume

    capture = django_capture_on_commit_callbacks
    _slow_commit("instances_volumeattachment")
    out: dict[str, Any] = {}

    def launch() -> None:
        try:
            out["other"] = _shell(funded, bob, capture)
        except Exception as exc:
            out["other"] = exc
        finally:
            connections.close_all()

    try:
        thread = threading.Thread(target=launch)
        _while_sleeping(thread)
        with pytest.raises(VolumeError) as refused:
            volume_delete(volume=volume, user=alice)
        thread.join(30)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS test_slow_commit ON instances_volumeattachment")
    other = out["other"]
    assert isinstance(other, Instance), other
    assert (refused.value.code, refused.value.holder_id) == ("in_use", other.pk)
    assert Volume.objects.get(pk=volume.pk).deleted_at is None
    assert (vroot / f"vol-{volume.pk}").is_dir()
