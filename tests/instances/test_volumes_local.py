"""Persistent volumes on the real local backend (real processes): a file written by one instance survives its
stop and release and is read by the next; a volume over its size stops its writer and refuses attachment."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any) -> Path:
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    return tmp_path / "ws"


def _reconcile_until(predicate: Any, timeout: float = 60) -> None:
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        instances_reconcile()
        time.sleep(0.1)


def _run(org: Any, user: Any, code: str, volumes: list[str]) -> Any:
    from instances.services import LaunchSpec, instance_launch

    return instance_launch(
        organization=org,
        user=user,
        spec=LaunchSpec(
            name="dev",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=1,
            command=[sys.executable, "-c", code],
            volumes=volumes,
        ),
    )


def _status(inst: Any) -> str:
    from instances.models import Instance

    return Instance.objects.get(pk=inst.pk).status


def test_a_file_written_by_one_instance_is_read_by_the_next_after_stop_and_release(
    local: Path, alice: Any, alice_org: Any
) -> None:
    from instances_support import fund

    from instances.backends.local import LOG_FILE
    from instances.interactive.volumes import volume_create, volume_folder
    from instances.services import instances_reconcile

    fund(alice_org, 10)
    instances_reconcile()
    volume = volume_create(organization=alice_org, user=alice, name="data", size_gb=1)
    write = (
        "import os, pathlib; p = pathlib.Path('volumes/data/notes.txt'); p.write_text('kept across instances\\n');"
        " print(os.environ['GPU_PORTAL_VOLUMES'])"
    )
    first = _run(alice_org, alice, write, ["data"])
    _reconcile_until(lambda: _status(first) == "stopped")
    assert first.attempts.get().exit_code == 0
    first_ws = local / f"instance-{first.pk}"
    assert str(first_ws / "attempt-1" / "volumes" / "data") in (first_ws / "attempt-1" / LOG_FILE).read_text()
    shutil.rmtree(first_ws)  # released: nothing of the first instance's workspace is left
    assert (volume_folder(volume) / "notes.txt").read_text() == "kept across instances\n"

    second = _run(alice_org, alice, "print(open('volumes/data/notes.txt').read(), end='')", ["data"])
    _reconcile_until(lambda: _status(second) == "stopped")
    attempt = second.attempts.get()
    assert (attempt.state, attempt.exit_code) == ("succeeded", 0)
    log = (local / f"instance-{second.pk}" / "attempt-1" / LOG_FILE).read_text()
    assert "kept across instances" in log


def test_a_volume_over_its_size_stops_its_writer_and_refuses_attachment(
    local: Path, alice: Any, alice_org: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The measured enforcement with a 1 "GB" of 4,096 bytes (the unit patched, so the test writes 8 KiB)."""
    from instances_support import fund

    from instances.interactive import volumes
    from instances.models import Volume
    from instances.services import LaunchError, instances_reconcile
    from portal.models import AuditEvent

    monkeypatch.setattr(volumes, "GB", 4096)
    fund(alice_org, 10)
    instances_reconcile()
    volume = volumes.volume_create(organization=alice_org, user=alice, name="small", size_gb=1)
    writer = _run(
        alice_org,
        alice,
        "import time; open('volumes/small/big.bin', 'wb').write(b'x' * 8192); time.sleep(600)",
        ["small"],
    )
    _reconcile_until(
        lambda: (
            _status(writer) == "running"
            and (volumes.volume_folder(volume) / "big.bin").exists()
            and (volumes.volume_folder(volume) / "big.bin").stat().st_size == 8192
        )
    )
    assert volumes.volumes_measure() == {volume.pk: [writer.pk]}
    assert Volume.objects.get(pk=volume.pk).used_bytes == 8192
    _reconcile_until(lambda: _status(writer) == "stopped")
    assert writer.transitions.get(to_status="stopping").reason == "volume small is over its size of 1 GB"
    assert AuditEvent.objects.get(action="instances.volume.over_size").extra == {
        "used_bytes": 8192,
        "size_gb": 1,
        "stopped": [writer.pk],
    }
    with pytest.raises(LaunchError) as refused:
        _run(alice_org, alice, "pass", ["small"])
    assert str(refused.value) == "Volume small is full (1 GB): delete files or use another volume."
    (volumes.volume_folder(volume) / "big.bin").unlink()
    assert volumes.volumes_measure() == {}
    assert _run(alice_org, alice, "pass", ["small"]).volume_attachments.count() == 1
