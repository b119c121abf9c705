"""Who may enter whose instance (``instances.interactive.access``), at every door, on the in-memory fake backend
(no server process: the JupyterLab door refuses or hands over before a server would be asked; the real servers
are in test_access_jupyter_local.py and test_access_ssh_local.py). alice (owner) launches; bob (member) is
refused by default at the JupyterLab door (403), in the instance's ``authorized_keys`` and at volume attach,
and let in by the organization's setting or a share; dora (billing viewer) never; charlie (outsider) 404."""

from __future__ import annotations

import re
from typing import Any

import pytest
from instances_support import FakeBackend

pytestmark = pytest.mark.django_db(transaction=True)

KEYS = {
    "alice": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICnsBniNCIT3LucBYZyH5D1s+7s3OpAViRvaujgJnLnm",
    "bob": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKhM2Ho0t3D3m6vyKEyz4bcz1p0I7GfSUq7jOMy0Lqz5",
}


def _user(email: str) -> Any:
    from portal.services import user_signup

    return user_signup(email=email, password="correct horse battery 9", name=email.split("@")[0])


def _box(org: Any, user: Any, *, volumes: tuple[str, ...] = (), name: str = "box") -> Any:
    from instances.services import LaunchSpec, instance_launch

    spec = LaunchSpec(
        name=name, kind="interactive", gpu_type="cpu-local", gpu_count=1, command=["sleep", "9"], volumes=list(volumes)
    )
    return instance_launch(organization=org, user=user, spec=spec)


@pytest.fixture
def team(funded: Any, alice: Any, bob: Any, nodes: Any, fake_backend: FakeBackend, settings: Any, tmp_path: Any) -> Any:
    """alice's instance ``box`` and volume ``data``; bob and alice have SSH keys; dora is a billing viewer."""
    from instances.interactive.volumes import volume_create
    from portal.choices import Role
    from portal.services import membership_add
    from portal.sshkeys import ssh_key_add

    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    dora = _user("dora@example.com")
    membership_add(organization=funded, user=dora, role=Role.BILLING, acting_user=None)
    ssh_key_add(user=alice, name="alice", public_key=KEYS["alice"])
    ssh_key_add(user=bob, name="bob", public_key=KEYS["bob"])
    volume = volume_create(organization=funded, user=alice, name="data", size_gb=1)
    return {"box": _box(funded, alice), "volume": volume, "dora": dora}


def _keys(instance: Any) -> list[str]:
    from instances.interactive.ssh import authorized_keys_text

    return [line.split()[-1] for line in authorized_keys_text(instance).splitlines()]


def test_by_default_only_the_launcher_owners_and_admins_enter(
    team: Any, client: Any, funded: Any, alice: Any, bob: Any, charlie: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.interactive.access import may_enter, may_use_volume
    from instances.models import Instance, VolumeAttachment
    from instances.services import LaunchError
    from portal.models import AuditEvent

    box, door = team["box"], f"/o/{funded.slug}/instances/{team['box'].pk}/jupyter/"
    # JupyterLab: bob (member) 403, dora (billing viewer) 403, charlie 404; alice passes (the
    # server is not there yet: back to the page). No ticket, no audit row for the refused.
    client.force_login(bob)
    assert client.get(door).status_code == 403
    assert 'data-state="unavailable"' in client.get(f"{door}panel/").content.decode()
    client.force_login(team["dora"])
    assert client.get(door).status_code == 403
    client.force_login(charlie)
    assert client.get(door).status_code == 404
    assert client.get(f"{door}panel/").status_code == 404
    client.force_login(alice)
    assert client.get(door)["Location"] == f"/o/{funded.slug}/instances/{box.pk}/"
    assert AuditEvent.objects.filter(action="instance.jupyter_open").count() == 0
    # SSH: only alice's key is in the instance's authorized keys.
    assert _keys(box) == [f"portal-user-{alice.pk}"]
    # Volume attach: bob's launch with alice's volume is refused, nothing made; the API says 403.
    assert (may_enter(user=bob, instance=box), may_use_volume(user=bob, volume=team["volume"])) == (False, False)
    with pytest.raises(LaunchError) as no:
        _box(funded, bob, volumes=("data",), name="bobs")
    assert no.value.code == "volume_not_allowed"
    assert str(no.value) == (
        "Volume data was created by another member: only they, owners, admins and the members they share it with "
        "attach it, unless your organization lets members use each other's."
    )
    api = APIClient()
    api.force_authenticate(bob)
    body = {"gpu_type": "cpu-local", "gpu_count": 1, "command": ["sleep", "9"], "volumes": ["data"]}
    answer = api.post(f"/api/v1/instances?organization={funded.slug}", body, format="json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (403, "volume_not_allowed")
    assert list(Instance.objects.values_list("name", flat=True)) == ["box"]
    assert VolumeAttachment.objects.count() == 0
    # bob may still launch his own instance and enter it; alice (owner) enters his.
    with django_capture_on_commit_callbacks(execute=True):
        own = _box(funded, bob, name="bobs")
    assert _keys(own) == sorted([f"portal-user-{alice.pk}", f"portal-user-{bob.pk}"])
    client.force_login(bob)
    assert client.get(f"/o/{funded.slug}/instances/{own.pk}/jupyter/").status_code == 302


def test_the_organizations_setting_lets_members_in_and_only_managers_change_it(
    team: Any, client: Any, funded: Any, alice: Any, bob: Any, charlie: Any
) -> None:
    from instances.models import VolumeAttachment
    from portal.models import AuditEvent, Organization

    settings_page = f"/o/{funded.slug}/instances/access/"
    client.force_login(bob)  # a member sees it, cannot change it
    page = client.get(settings_page).content.decode()
    box_html = re.search(r'<input[^>]*id="id_members_enter_any"[^>]*>', page)
    assert "Only owners and admins change this." in page and box_html and " disabled" in box_html.group(0)
    assert client.post(settings_page, {"members_enter_any": "on"}).status_code == 403
    client.force_login(charlie)
    assert client.post(settings_page, {"members_enter_any": "on"}).status_code == 404
    assert Organization.objects.get(pk=funded.pk).members_enter_any_instance is False
    client.force_login(alice)
    assert client.post(settings_page, {"members_enter_any": "on"}).status_code == 302
    assert Organization.objects.get(pk=funded.pk).members_enter_any_instance is True
    audit = AuditEvent.objects.get(action="instances.instance_access_set")
    assert (audit.actor, audit.extra) == (alice, {"members_enter_any_instance": [False, True]})

    box = team["box"]
    assert _keys(box) == [f"portal-user-{alice.pk}", f"portal-user-{bob.pk}"]  # dora: never
    client.force_login(bob)
    assert client.get(f"/o/{funded.slug}/instances/{box.pk}/jupyter/").status_code == 302
    client.force_login(team["dora"])
    assert client.get(f"/o/{funded.slug}/instances/{box.pk}/jupyter/").status_code == 403
    bobs = _box(funded, bob, volumes=("data",), name="bobs")
    assert list(VolumeAttachment.objects.values_list("instance_id", flat=True)) == [bobs.pk]

    client.force_login(alice)  # and off again: bob is out
    assert client.post(settings_page, {}).status_code == 302
    assert _keys(box) == [f"portal-user-{alice.pk}"]


def test_a_share_lets_one_member_in_and_withdrawing_it_shuts_them_out(
    team: Any, client: Any, funded: Any, alice: Any, bob: Any, charlie: Any
) -> None:
    from instances.interactive.access_models import AccessShare
    from portal.models import AuditEvent

    box, volume = team["box"], team["volume"]
    page = f"/o/{funded.slug}/instances/{box.pk}/shares/"
    client.force_login(bob)  # bob cannot share alice's instance with himself
    assert client.post(page, {"email": "bob@example.com"}).status_code == 403
    client.force_login(charlie)
    assert client.get(page).status_code == 404
    assert client.post(page, {"email": "charlie@example.com"}).status_code == 404
    assert AccessShare.objects.count() == 0

    client.force_login(alice)
    for email, error in (
        ("charlie@example.com", "charlie@example.com is not a member of this organization who may launch instances."),
        ("dora@example.com", "dora@example.com is not a member of this organization who may launch instances."),
        ("nobody@example.com", "nobody@example.com is not a member of this organization who may launch instances."),
        ("alice@example.com", "alice@example.com made it and needs no share."),
    ):
        answer = client.post(page, {"email": email})
        assert answer.status_code == 400 and error in answer.content.decode(), email
    assert AccessShare.objects.count() == 0
    assert "bob@example.com" in client.get(page).content.decode()  # offered as a candidate
    assert client.post(page, {"email": "BOB@example.com"})["Location"] == page
    share = AccessShare.objects.get()
    assert (share.instance, share.volume, share.user, share.created_by) == (box, None, bob, alice)
    assert _keys(box) == [f"portal-user-{alice.pk}", f"portal-user-{bob.pk}"]
    client.force_login(bob)
    assert client.get(f"/o/{funded.slug}/instances/{box.pk}/jupyter/").status_code == 302
    # a share of the instance is not a share of the volume
    from instances.services import LaunchError

    with pytest.raises(LaunchError):
        _box(funded, bob, volumes=("data",), name="bobs")
    client.force_login(alice)
    vpage = f"/o/{funded.slug}/volumes/{volume.pk}/shares/"
    assert client.post(vpage, {"email": "bob@example.com"})["Location"] == vpage
    assert _box(funded, bob, volumes=("data",), name="bobs").volume_attachments.count() == 1

    assert client.post(f"{page}{bob.pk}/remove/")["Location"] == page
    assert list(AccessShare.objects.values_list("volume_id", flat=True)) == [volume.pk]
    assert _keys(box) == [f"portal-user-{alice.pk}"]
    client.force_login(bob)
    assert client.get(f"/o/{funded.slug}/instances/{box.pk}/jupyter/").status_code == 403
    shares = AuditEvent.objects.filter(action__startswith="instances.share").order_by("id")
    actions = list(shares.values_list("action", "extra"))
    assert actions == [
        ("instances.share_add", {"instance": box.pk, "user": "bob@example.com"}),
        ("instances.share_add", {"volume": volume.pk, "user": "bob@example.com"}),
        ("instances.share_remove", {"instance": box.pk, "user": "bob@example.com"}),
    ]


def test_the_shares_api_adds_lists_and_withdraws_and_charlie_gets_404(
    team: Any, funded: Any, alice: Any, bob: Any, charlie: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.interactive.access_models import AccessShare

    box, volume = team["box"], team["volume"]
    api = APIClient()
    api.force_authenticate(alice)
    q = f"?organization={funded.slug}"
    made = api.post(f"/api/v1/instances/{box.pk}/shares{q}", {"email": "bob@example.com"}, format="json")
    assert made.status_code == 201
    assert {k: made.json()[k] for k in ("user_id", "email")} == {"user_id": bob.pk, "email": "bob@example.com"}
    again = api.post(f"/api/v1/instances/{box.pk}/shares{q}", {"email": "bob@example.com"}, format="json")
    assert again.status_code == 200
    bad = api.post(f"/api/v1/volumes/{volume.pk}/shares{q}", {"email": "charlie@example.com"}, format="json")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "not_a_member")
    listed = api.get(f"/api/v1/instances/{box.pk}/shares{q}").json()
    assert [r["email"] for r in listed] == ["bob@example.com"]

    outsider = APIClient()
    outsider.force_authenticate(charlie)
    for url in (f"/api/v1/instances/{box.pk}/shares{q}", f"/api/v1/volumes/{volume.pk}/shares{q}"):
        assert outsider.get(url).status_code == 404
        assert outsider.post(url, {"email": "charlie@example.com"}, format="json").status_code == 404
    assert outsider.delete(f"/api/v1/instances/{box.pk}/shares/{bob.pk}{q}").status_code == 404
    member = APIClient()
    member.force_authenticate(bob)
    refused = member.delete(f"/api/v1/instances/{box.pk}/shares/{bob.pk}{q}")
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "permission_denied")
    assert AccessShare.objects.count() == 1

    assert api.delete(f"/api/v1/instances/{box.pk}/shares/{bob.pk}{q}").status_code == 204
    gone = api.delete(f"/api/v1/instances/{box.pk}/shares/{bob.pk}{q}")
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "not_found")
    assert AccessShare.objects.count() == 0


def test_a_member_who_leaves_loses_their_shares_and_comes_back_with_none(
    team: Any, funded: Any, alice: Any, bob: Any
) -> None:
    from instances.interactive.access import access_share_add, may_enter
    from instances.interactive.access_models import AccessShare
    from portal.choices import Role
    from portal.services import membership_add, membership_remove

    box = team["box"]
    access_share_add(target=box, email=bob.email, acting_user=alice)
    access_share_add(target=team["volume"], email=bob.email, acting_user=alice)
    assert may_enter(user=bob, instance=box) is True
    membership_remove(membership=bob.memberships.get(organization=funded), acting_user=alice)
    assert AccessShare.objects.count() == 0
    assert _keys(box) == [f"portal-user-{alice.pk}"]
    membership_add(organization=funded, user=bob, role=Role.MEMBER, acting_user=alice)
    assert may_enter(user=bob, instance=box) is False
    assert _keys(box) == [f"portal-user-{alice.pk}"]


def test_the_one_query_and_the_rule_agree_for_every_member_and_grant(team: Any, funded: Any, alice: Any) -> None:
    """``entrant_ids`` (one SQL query, for authorized_keys) and ``may_enter`` (per user, for the doors) say the
    same for every user, role and grant: launcher, owner, admin, member, billing viewer, inactive, outsider,
    with and without a share and the setting."""
    from instances.interactive.access import access_share_add, entrant_ids, may_enter
    from portal.choices import Role
    from portal.models import User
    from portal.services import membership_add

    users = {"alice": alice, "dora": team["dora"]}
    for name, role in (("ann", Role.ADMIN), ("mia", Role.MEMBER), ("max", Role.MEMBER), ("ina", Role.MEMBER)):
        users[name] = _user(f"{name}@example.com")
        membership_add(organization=funded, user=users[name], role=role, acting_user=None)
    users["out"] = _user("out@example.com")
    users["bob"] = User.objects.get(email="bob@example.com")
    mine = _box(funded, users["mia"], name="mias")
    access_share_add(target=team["box"], email="max@example.com", acting_user=alice)
    User.objects.filter(pk=users["ina"].pk).update(is_active=False)
    for setting in (False, True):
        funded.members_enter_any_instance = setting
        funded.save(update_fields=["members_enter_any_instance"])
        for instance in (team["box"], mine):
            instance.refresh_from_db()
            rule = sorted(u.pk for u in User.objects.all() if may_enter(user=u, instance=instance))
            assert entrant_ids(instance) == rule, (setting, instance.name)
    names = {u.pk: n for n, u in users.items()}
    assert [names[i] for i in entrant_ids(team["box"])] == ["alice", "bob", "ann", "mia", "max"]
