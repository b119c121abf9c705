"""SSH public keys: validation (asyncssh's parser, OpenSSH 9's policy), fingerprints as ``ssh-keygen -lf``
prints them, the console page and the API, each refusal leaving nothing written."""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ed25519, rsa
from rest_framework.test import APIClient

from portal.choices import Role, TokenScope
from portal.models import AuditEvent, Organization
from portal.services import api_token_create
from portal.sshkeys import SshKey, SshKeyError, ssh_key_add, ssh_key_parse

OPENSSH = (serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)


def _line(key: Any, comment: str = "me@laptop") -> str:
    return key.public_key().public_bytes(*OPENSSH).decode() + f" {comment}"


@pytest.fixture(scope="module")
def keys() -> dict[str, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cryptography deprecates writing DSA keys: that is the point here
        dsa_line = _line(dsa.generate_private_key(key_size=1024))  # noqa: S505 - a weak key is the input under test
    return {
        "ed25519": _line(ed25519.Ed25519PrivateKey.generate()),
        "ed25519_b": _line(ed25519.Ed25519PrivateKey.generate()),
        "rsa2048": _line(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
        "rsa1024": _line(rsa.generate_private_key(public_exponent=65537, key_size=1024)),  # noqa: S505 - as above
        "dsa": dsa_line,
    }


def _nothing_written(user: Any) -> tuple[int, int]:
    return SshKey.objects.filter(user=user).count(), AuditEvent.objects.filter(
        action__startswith="portal.ssh_key"
    ).count()


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH not installed")
def test_the_fingerprint_is_the_one_ssh_keygen_prints(keys: dict[str, str], tmp_path: Path) -> None:
    for name in ("ed25519", "rsa2048"):
        (tmp_path / "k.pub").write_text(keys[name] + "\n")
        printed = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True, text=True)
        assert ssh_key_parse(keys[name]).fingerprint == printed.stdout.split()[1]


def test_adding_a_key_stores_it_normalized_and_audits_it(alice: Any, keys: dict[str, str]) -> None:
    key = ssh_key_add(user=alice, name="", public_key="  " + keys["rsa2048"] + "\n")
    parsed = ssh_key_parse(keys["rsa2048"])
    assert (key.name, key.algorithm, key.bits, key.public_key, key.fingerprint) == (
        "me@laptop",
        "ssh-rsa",
        2048,
        " ".join(keys["rsa2048"].split()[:2]),
        parsed.fingerprint,
    )
    event = AuditEvent.objects.get(action="portal.ssh_key_add")
    assert (event.actor, event.object_id, event.extra["fingerprint"]) == (alice, str(key.pk), parsed.fingerprint)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ssh-ed25519 AAAAnot-base64!!", "This is not a valid SSH public key"),
        ("", "Paste a public key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "This is a private key"),
        ("rsa1024", "This RSA key has 1024 bits; at least 2048 are required."),
        ("dsa", "DSA keys are not accepted"),
        ("two", "Paste exactly one public key, on one line."),
    ],
)
def test_a_bad_key_is_refused_with_a_clear_message_and_nothing_written(
    alice: Any, keys: dict[str, str], text: str, message: str
) -> None:
    text = keys.get(text, text) if text != "two" else keys["ed25519"] + "\n" + keys["rsa2048"]
    with pytest.raises(SshKeyError, match=re.escape(message)):
        ssh_key_add(user=alice, name="x", public_key=text)
    assert _nothing_written(alice) == (0, 0)


def test_the_same_key_twice_is_refused(alice: Any, keys: dict[str, str]) -> None:
    ssh_key_add(user=alice, name="a", public_key=keys["ed25519"])
    fp = ssh_key_parse(keys["ed25519"]).fingerprint
    with pytest.raises(SshKeyError, match=re.escape(f"You have already added this key ({fp}).")):
        ssh_key_add(user=alice, name="b", public_key=keys["ed25519"].replace("me@laptop", "other comment"))
    assert _nothing_written(alice) == (1, 1)


def test_someone_elses_key_is_refused(alice: Any, charlie: Any, keys: dict[str, str]) -> None:
    ssh_key_add(user=alice, name="a", public_key=keys["ed25519"])
    with pytest.raises(SshKeyError, match="is registered to another account"):
        ssh_key_add(user=charlie, name="mine", public_key=keys["ed25519"])
    assert _nothing_written(charlie) == (0, 1)


def test_the_console_page_adds_lists_and_revokes_and_another_users_key_is_a_404(
    client: Any, alice: Any, charlie: Any, keys: dict[str, str]
) -> None:
    client.force_login(alice)
    assert client.post("/ssh-keys/", {"name": "laptop", "public_key": keys["ed25519"]}).status_code == 302
    key = SshKey.objects.get(user=alice)
    page = client.get("/ssh-keys/").content.decode()
    assert key.fingerprint in page and "laptop" in page
    refused = client.post("/ssh-keys/", {"name": "old", "public_key": keys["dsa"]})
    assert refused.status_code == 400 and "DSA keys are not accepted" in refused.content.decode()
    assert SshKey.objects.filter(user=alice).count() == 1

    client.force_login(charlie)
    assert client.post(f"/ssh-keys/{key.pk}/revoke/").status_code == 404
    assert SshKey.objects.get(pk=key.pk).revoked_at is None
    client.force_login(alice)
    assert client.post(f"/ssh-keys/{key.pk}/revoke/").status_code == 302
    assert SshKey.objects.get(pk=key.pk).revoked_at is not None
    assert key.fingerprint not in client.get("/ssh-keys/").content.decode()
    assert AuditEvent.objects.filter(action="portal.ssh_key_revoke", object_id=str(key.pk)).count() == 1


def test_the_api_lists_creates_and_deletes_only_the_users_own_keys(
    alice: Any, alice_org: Any, bob: Any, keys: dict[str, str]
) -> None:
    def client_for(user: Any) -> APIClient:
        own = Organization.objects.get(memberships__user=user, memberships__role=Role.OWNER)  # their personal one
        token = api_token_create(user=user, organization=own, name="t", scope=TokenScope.WRITE)
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
        return c

    def session_for(user: Any) -> APIClient:
        c = APIClient()
        c.force_login(user)
        return c

    alice_api, bob_api = client_for(alice), client_for(bob)
    # a key opens every organization of its user, a token is a credential of one: adding needs a session
    by_token = alice_api.post("/api/v1/ssh-keys", {"name": "laptop", "public_key": keys["ed25519_b"]}, format="json")
    assert (by_token.status_code, by_token.json()["error"]["code"]) == (403, "session_required")
    assert SshKey.objects.filter(user=alice).count() == 0
    alice_session, bob_session = session_for(alice), session_for(bob)
    created = alice_session.post("/api/v1/ssh-keys", {"name": "laptop", "public_key": keys["ed25519_b"]}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert (body["name"], body["algorithm"], body["fingerprint"]) == (
        "laptop",
        "ssh-ed25519",
        ssh_key_parse(keys["ed25519_b"]).fingerprint,
    )
    assert [k["id"] for k in alice_api.get("/api/v1/ssh-keys").json()["results"]] == [body["id"]]
    assert bob_api.get("/api/v1/ssh-keys").json()["results"] == []
    assert bob_api.delete(f"/api/v1/ssh-keys/{body['id']}").status_code == 404

    weak = alice_session.post("/api/v1/ssh-keys", {"public_key": keys["rsa1024"]}, format="json")
    assert weak.status_code == 400
    assert weak.json()["error"]["code"] == "invalid_ssh_key"
    assert "1024 bits" in weak.json()["error"]["message"]
    taken = bob_session.post("/api/v1/ssh-keys", {"public_key": keys["ed25519_b"]}, format="json")
    assert (taken.status_code, taken.json()["error"]["code"]) == (400, "invalid_ssh_key")
    assert SshKey.objects.filter(user=bob).count() == 0

    deleted = alice_api.delete(f"/api/v1/ssh-keys/{body['id']}")
    assert deleted.status_code == 200 and deleted.json()["revoked_at"] is not None
    assert alice_api.get("/api/v1/ssh-keys").json()["results"] == []


def test_a_pasted_private_key_is_refused_and_never_echoed_back(client: Any, alice: Any) -> None:
    """The console refuses a private key with its message and renders the form empty: the secret is not sent
    back into the page (nor written)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    private = (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
        .decode()
    )
    client.force_login(alice)
    resp = client.post("/ssh-keys/", {"name": "oops", "public_key": private})
    html = resp.content.decode()
    assert resp.status_code == 400
    assert "This is a private key." in html
    assert "PRIVATE KEY" not in html and private.splitlines()[1] not in html
    assert _nothing_written(alice) == (0, 0)
