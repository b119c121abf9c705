"""SSH ends with access, on a real local interactive instance (the asyncssh server of
``instances.interactive.ssh_server``) with OpenSSH's client (``/usr/bin/ssh``): a member refused by default,
let in by a share; then every path that ends access — ``user_deactivate`` (the service), the back office's
"active" checkbox (a real admin form post), ``membership_remove``, a demotion (admin → member, member →
billing viewer) and a queryset ``update()`` caught by the periodic sweep — refuses the next login, and the
open sessions of those users are closed (their processes ended) without waiting for them to log out."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
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
    key = Ed25519PrivateKey.generate()
    path = tmp_path / f"{name}.key"
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    )
    path.write_bytes(pem)
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode() + f" {name}@laptop"


def _argv(access: Any, key: Path, *extra: str) -> list[str]:
    return [
        "ssh", "-p", str(access.port), "-i", str(key), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=20", *extra, f"{access.username}@{access.host}",
    ]  # fmt: skip


def _ssh(access: Any, key: Path, command: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [*_argv(access, key, *extra), command]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


class Session:
    """An open SSH session running ``sleep <marker>`` (a number no other process sleeps) until it is closed."""

    def __init__(self, access: Any, key: Path, marker: int) -> None:
        self.marker = marker
        argv = [*_argv(access, key), f"echo started; exec sleep {marker}"]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline() == b"started\n"
        assert self.sleepers()

    def sleepers(self) -> list[int]:
        found = []
        for p in psutil.process_iter(["cmdline", "status"]):
            if p.info["cmdline"] == ["sleep", str(self.marker)] and p.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(p.pid)
        return found

    def closed_within(self, seconds: float, *, code: int | None = 255) -> float:
        """Seconds until the client saw the connection closed (exit status ``code``: 255, the connection
        closed under it) and the session's process was gone."""
        start = time.monotonic()
        try:
            status = self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"the session sleeping {self.marker} was still open {seconds} s later")
        assert code is None or status == code, status
        while self.sleepers():
            assert time.monotonic() - start < seconds, "its process outlived the session"
            time.sleep(0.05)
        return time.monotonic() - start


def _wait(predicate: Any, timeout: float = 60) -> Any:
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        instances_reconcile()
        time.sleep(0.1)
    return value


def test_ssh_is_refused_and_open_sessions_closed_after_access_ends_by_every_path(
    local: Path, tmp_path: Path, alice: Any, bob: Any, charlie: Any, alice_org: Any, client: Any
) -> None:
    from instances_support import fund

    from instances.interactive.access import access_share_add, access_sweep
    from instances.interactive.ssh import ssh_access
    from instances.models import Instance
    from instances.services import LaunchSpec, instance_launch, instance_stop, instances_reconcile
    from portal.choices import Role
    from portal.models import User
    from portal.services import membership_add, membership_invite, membership_remove, user_deactivate, user_signup
    from portal.sshkeys import ssh_key_add

    people = {"alice": alice, "bob": bob, "charlie": charlie}
    for name in ("dora", "erin", "fred", "gina", "hank", "ivy"):
        people[name] = user_signup(email=f"{name}@example.com", password="correct horse battery 9", name=name)
        role = Role.ADMIN if name == "dora" else Role.MEMBER
        membership_add(organization=alice_org, user=people[name], role=role, acting_user=None)
    alice_org.personal = False
    alice_org.save(update_fields=["personal"])
    keys = {}
    for name, user in people.items():
        keys[name], public = _key(tmp_path, name)
        ssh_key_add(user=user, name="laptop", public_key=public)

    fund(alice_org, 10)
    instances_reconcile()
    inst = instance_launch(
        organization=alice_org,
        user=alice,
        spec=LaunchSpec(
            name="box", kind="interactive", gpu_type="cpu-local", gpu_count=1,
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
        ),
    )  # fmt: skip
    access = _wait(lambda: (a := ssh_access(Instance.objects.get(pk=inst.pk))) and a.port and a)

    # Least privilege: alice and dora (admin) get in; bob and the other members do not until shared; charlie never.
    assert _ssh(access, keys["alice"], "echo in").stdout == "in\n"
    assert _ssh(access, keys["dora"], "echo in").stdout == "in\n"
    for name in ("bob", "charlie", "erin"):
        refused = _ssh(access, keys[name], "echo in")
        assert (refused.returncode, refused.stdout) == (255, ""), name
        assert "Permission denied (publickey)" in refused.stderr
    for name in ("bob", "erin", "fred", "gina", "hank", "ivy"):
        access_share_add(target=inst, email=f"{name}@example.com", acting_user=alice)
        assert _ssh(access, keys[name], "echo in").stdout == "in\n", name
    assert _ssh(access, keys["charlie"], "echo in").returncode == 255
    # No tunnels through the instance: forwarding to a port that listens (the SSH server's own) is refused.
    tunnel = _ssh(access, keys["alice"], "true", "-W", f"127.0.0.1:{access.port}")
    assert (tunnel.returncode, tunnel.stderr) == (255, "stdio forwarding failed\n")

    bobs = Session(access, keys["bob"], 30001)
    ivys = Session(access, keys["ivy"], 30002)
    hanks = Session(access, keys["hank"], 30003)
    doras = Session(access, keys["dora"], 30004)
    alices = Session(access, keys["alice"], 30005)

    user_deactivate(user=bob, acting_user=None)  # the service (a queryset update inside; it announces itself)
    print(f"\nfigures: user_deactivate -> open SSH session closed after {bobs.closed_within(5):.2f} s")
    assert _ssh(access, keys["bob"], "true").returncode == 255

    staff = User.objects.create_superuser("staff@example.com", "correct horse battery 9")
    client.force_login(staff)  # the back office's checkbox: the real admin form, "active" unticked
    erin = people["erin"]
    answer = client.post(
        f"/admin/portal/user/{erin.pk}/change/",
        {"email": erin.email, "name": "erin", "timezone": "Asia/Shanghai", "_save": "Save"},
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    assert User.objects.get(pk=erin.pk).is_active is False
    assert _ssh(access, keys["erin"], "true").returncode == 255

    membership_remove(membership=people["ivy"].memberships.get(organization=alice_org), acting_user=alice)
    print(f"figures: membership_remove -> open SSH session closed after {ivys.closed_within(5):.2f} s")
    assert _ssh(access, keys["ivy"], "true").returncode == 255

    membership_invite(organization=alice_org, email="dora@example.com", role=Role.MEMBER, acting_user=alice)
    assert doras.closed_within(5) < 5  # an admin no more, and alice never shared the box with her
    assert _ssh(access, keys["dora"], "true").returncode == 255
    membership_invite(organization=alice_org, email="gina@example.com", role=Role.BILLING, acting_user=alice)
    assert _ssh(access, keys["gina"], "true").returncode == 255  # billing viewers never enter, shared or not

    User.objects.filter(pk=people["hank"].pk).update(is_active=False)  # no signal: the periodic sweep finds it
    assert access_sweep() == 1
    assert hanks.closed_within(5) < 5
    assert _ssh(access, keys["hank"], "true").returncode == 255
    assert access_sweep() == 0  # nothing left to rewrite

    # alice's session went on through all of it, and fred (still shared, still a member) gets in.
    assert alices.proc.poll() is None and alices.sleepers()
    assert _ssh(access, keys["fred"], "echo in").stdout == "in\n"
    state = local / f"instance-{inst.pk}" / "ssh" / "authorized_keys"
    assert sorted(line.split()[-1] for line in state.read_text().splitlines()) == sorted(
        f"portal-user-{people[n].pk}" for n in ("alice", "fred")
    )
    instance_stop(instance=inst, reason="done", acting_user=alice)
    assert alices.closed_within(15, code=None) < 15
