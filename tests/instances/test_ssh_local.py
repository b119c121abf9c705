"""SSH into a real local interactive instance with OpenSSH's client (``/usr/bin/ssh``): members' keys get a
shell in the workspace, an outsider's and a revoked key are refused, and stopping the instance ends the server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any) -> Path:
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    return tmp_path / "ws"


def _key(tmp_path: Path, name: str) -> tuple[Path, str]:
    """A fresh Ed25519 key pair: (private key file for ``ssh -i``, public key line)."""
    key = Ed25519PrivateKey.generate()
    path = tmp_path / name
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode() + f" {name}@laptop"


def _ssh(access: Any, key: Path, command: str) -> subprocess.CompletedProcess[str]:
    argv = [
        "ssh", "-p", str(access.port), "-i", str(key), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20", f"{access.username}@{access.host}", command,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def _alive(pid: int) -> bool:
    """Running, not a zombie (the launcher may exit before reaping the server; a subreaper reaps it later)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait(predicate: Any, timeout: float = 60) -> Any:
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        instances_reconcile()
        time.sleep(0.1)
    return value


def test_members_keys_get_a_shell_in_the_workspace_others_are_refused_and_stop_ends_the_server(
    local: Path, tmp_path: Path, alice: Any, bob: Any, charlie: Any, alice_org: Any
) -> None:
    from django.utils import timezone
    from instances_support import fund

    from instances.interactive.ssh import ssh_access, ssh_host_key, ssh_last_activity
    from instances.interactive.utilization import utilization_sample_due
    from instances.models import Instance, UtilizationSample
    from instances.services import LaunchSpec, instance_launch, instance_stop, instances_reconcile
    from portal.services import membership_remove
    from portal.sshkeys import SshKey, ssh_key_add, ssh_key_revoke

    alice_file, alice_pub = _key(tmp_path, "alice")
    old_file, old_pub = _key(tmp_path, "alice-old")
    bob_file, bob_pub = _key(tmp_path, "bob")
    charlie_file, charlie_pub = _key(tmp_path, "charlie")
    ssh_key_add(user=alice, name="laptop", public_key=alice_pub)
    old = ssh_key_add(user=alice, name="old laptop", public_key=old_pub)
    ssh_key_add(user=bob, name="", public_key=bob_pub)
    ssh_key_add(user=charlie, name="", public_key=charlie_pub)

    fund(alice_org, 10)
    instances_reconcile()
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="box",
            kind="interactive",
            gpu_type="cpu-local",
            gpu_count=1,
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        ),
    )
    access = _wait(lambda: (a := ssh_access(Instance.objects.get(pk=inst.pk))) and a.port and a)
    from instances.interactive.access import access_share_add

    access_share_add(target=inst, email=bob.email, acting_user=alice)  # bob enters alice's box once shared
    workspace = local / f"instance-{inst.pk}" / "attempt-1"
    state = local / f"instance-{inst.pk}" / "ssh"
    assert access.command == f"ssh -p {access.port} {access.username}@127.0.0.1"
    assert access.host_key_fingerprint == ssh_host_key(inst.pk).get_fingerprint("sha256")
    assert oct((state / "authorized_keys").stat().st_mode & 0o777) == "0o600"
    assert oct((state / "host_key").stat().st_mode & 0o777) == "0o600"

    done = _ssh(access, alice_file, "pwd")
    assert (done.returncode, done.stdout, done.stderr) == (0, f"{workspace}\n", "")
    assert ssh_last_activity(Instance.objects.get(pk=inst.pk)) is not None
    assert _ssh(access, bob_file, "echo $PWD").stdout == f"{workspace}\n"
    assert _ssh(access, old_file, "true").returncode == 0

    refused = _ssh(access, charlie_file, "pwd")
    assert (refused.returncode, refused.stdout) == (255, "")
    assert "Permission denied (publickey)" in refused.stderr

    ssh_key_revoke(key=old, acting_user=alice)  # rewrites the instance's authorized keys after commit
    assert SshKey.objects.get(pk=old.pk).revoked_at is not None
    assert _ssh(access, old_file, "true").returncode == 255
    membership_remove(membership=bob.memberships.get(organization=alice_org), acting_user=alice)
    assert _ssh(access, bob_file, "true").returncode == 255
    assert [line.split()[-1] for line in (state / "authorized_keys").read_text().splitlines()] == [
        f"portal-user-{alice.pk}"
    ]

    # utilization of the same real instance: launcher, the command, the SSH server and the JupyterLab server
    # (interactive instances get both sidecars), no GPU on this machine
    later = timezone.now() + timedelta(minutes=5)  # past the sampling pace
    assert utilization_sample_due(now=later) == 1
    sample = UtilizationSample.objects.get(instance=inst, sampled_at=later)
    assert (sample.processes, sample.gpus) == (4, [])
    assert sample.memory_bytes > 0 and sample.gpu_absent in ("no_nvml", "no_gpu")

    server_pid = json.loads((state / "endpoint.json").read_text())["pid"]
    instance_stop(instance=inst, reason="done", acting_user=alice)
    assert Instance.objects.get(pk=inst.pk).status == "stopped"
    assert not _alive(server_pid)
    assert _ssh(access, alice_file, "pwd").returncode == 255
    assert ssh_access(Instance.objects.get(pk=inst.pk)).command == ""  # type: ignore[union-attr]


def test_authorized_keys_are_the_active_keys_of_those_who_may_enter(
    tmp_path: Path, alice: Any, bob: Any, charlie: Any, alice_org: Any, catalog: None
) -> None:
    from instances.interactive.access import access_share_add
    from instances.interactive.ssh import authorized_keys_text
    from instances.models import GpuType, Instance
    from portal.sshkeys import ssh_key_add, ssh_key_revoke

    keys = {who.email: ssh_key_add(user=who, name="", public_key=_key(tmp_path, who.name)[1]) for who in (alice, bob)}
    ssh_key_add(user=charlie, name="", public_key=_key(tmp_path, "charlie")[1])
    a, b = keys["alice@example.com"], keys["bob@example.com"]
    gpu = GpuType.objects.get(code="cpu-local")
    box = Instance.objects.create(
        organization=alice_org, created_by=alice, name="box", kind="interactive", gpu_type=gpu, gpu_count=1
    )
    assert authorized_keys_text(box) == f"{a.public_key} portal-user-{alice.pk}\n"  # bob: not his, not shared
    access_share_add(target=box, email=bob.email, acting_user=alice)
    assert authorized_keys_text(box) == f"{a.public_key} portal-user-{alice.pk}\n{b.public_key} portal-user-{bob.pk}\n"
    bob.is_active = False
    bob.save(update_fields=["is_active"])
    assert authorized_keys_text(box) == f"{a.public_key} portal-user-{alice.pk}\n"
    ssh_key_revoke(key=a, acting_user=alice)
    assert authorized_keys_text(box) == ""
