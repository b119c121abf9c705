"""Who may enter an instance: members whose role may launch (owner, admin, member) get JupyterLab and their
SSH keys in its ``authorized_keys`` where the organization lets members enter each other's instances
(test_access_doors.py has the default, least privilege); a billing viewer gets neither even then (403 at the
JupyterLab door, no key line), and an outsider gets a 404. Instances are launched on the in-memory fake backend
(no server process: the door refuses before a ticket would be issued)."""

from __future__ import annotations

from typing import Any

import pytest
from instances_support import FakeBackend

pytestmark = pytest.mark.django_db(transaction=True)

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICnsBniNCIT3LucBYZyH5D1s+7s3OpAViRvaujgJnLnm"
ED25519_B = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKhM2Ho0t3D3m6vyKEyz4bcz1p0I7GfSUq7jOMy0Lqz5"


def _user(email: str) -> Any:
    from portal.services import user_signup

    return user_signup(email=email, password="correct horse battery 9", name=email.split("@")[0])


def test_a_billing_viewer_gets_no_shell_and_no_jupyterlab_a_member_does(
    client: Any, funded: Any, alice: Any, bob: Any, charlie: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from instances.interactive.ssh import authorized_keys_text
    from instances.services import LaunchSpec, instance_launch
    from portal.choices import Role
    from portal.services import membership_add
    from portal.sshkeys import ssh_key_add

    dora = _user("dora@example.com")
    membership_add(organization=funded, user=dora, role=Role.BILLING, acting_user=None)
    ssh_key_add(user=bob, name="bob", public_key=ED25519)
    ssh_key_add(user=dora, name="dora", public_key=ED25519_B)
    funded.members_enter_any_instance = True
    funded.save(update_fields=["members_enter_any_instance"])

    inst = instance_launch(
        organization=funded,
        user=alice,
        spec=LaunchSpec(name="box", kind="interactive", gpu_type="cpu-local", gpu_count=1, command=["sleep", "9"]),
    )
    assert authorized_keys_text(inst) == f"{ED25519} portal-user-{bob.pk}\n"
    door = f"/o/{funded.slug}/instances/{inst.pk}/jupyter/"
    client.force_login(dora)
    assert client.get(door).status_code == 403
    client.force_login(charlie)
    assert client.get(door).status_code == 404
    client.force_login(bob)  # a member passes the role check (the server is not there yet: back to the page)
    assert client.get(door)["Location"] == f"/o/{funded.slug}/instances/{inst.pk}/"
