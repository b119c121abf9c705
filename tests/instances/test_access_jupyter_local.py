"""JupyterLab sessions end with access, on the REAL local Jupyter server and a REAL portal (pytest-django's
``live_server`` on a port of its own, which the server asks): after a member is removed, demoted or deactivated
— by the portal's services, the back office's save, or a queryset ``update()`` no signal announces — listing
the contents, writing a file and opening a new terminal are refused (403) and their open terminal websocket is
closed, at once on the portal's own paths (it tells the server) and within ``INSTANCES_JUPYTER_RECHECK_S``
(here 3 s) on the silent one. A share withdrawn ends the session the same way; a member never let in gets a
403 at the console's door; charlie a 404."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from jupyter_support import running_with_jupyter

RECHECK_S = 3
REFUSED = {
    "allowed": False,
    "error": {"code": "authentication_failed", "message": "not this instance's Jupyter server", "details": None},
}


@pytest.fixture
def portal(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any, live_server: Any) -> Iterator[str]:
    """The live portal's URL, on the local backend; every instance a test left running is stopped at the end
    (its JupyterLab and SSH servers end with the test, not at their own idle limit)."""
    from instances.models import Instance
    from instances.services import instance_stop

    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    settings.SITE_URL = live_server.url  # the server's re-check goes to this portal
    settings.INSTANCES_JUPYTER_RECHECK_S = RECHECK_S
    yield str(live_server.url)
    for left in Instance.objects.filter(status__in=("scheduling", "provisioning", "running")):
        instance_stop(instance=left, reason="test ended", acting_user=None)


class Lab:
    """One user's browser session on the instance's JupyterLab (cookie from the portal's ticket)."""

    def __init__(self, client: Any, user: Any, inst: Any) -> None:
        client.force_login(user)
        page = client.get(f"/o/{inst.organization.slug}/instances/{inst.pk}/jupyter/")
        assert page.status_code == 200, (user.email, page.status_code)
        html = page.content.decode()
        action = unescape(re.search(r'action="([^"]+)"', html).group(1))  # type: ignore[union-attr]
        ticket = unescape(re.search(r'name="ticket" value="([^"]+)"', html).group(1))  # type: ignore[union-attr]
        self.url = action.removesuffix("login")
        self.http = requests.Session()
        login = self.http.post(action, data={"ticket": ticket}, timeout=10, allow_redirects=False)
        assert login.status_code == 302, login.text
        assert self.http.get(f"{self.url}lab", timeout=30).status_code == 200
        self.name = user.name

    def _xsrf(self) -> dict[str, str]:
        return {"X-XSRFToken": self.http.cookies.get("_xsrf", "")}

    def list(self) -> int:
        return self.http.get(f"{self.url}api/contents", timeout=10).status_code

    def write(self) -> int:
        """PUT a new file ``<name>-<random>.txt``: 201 when written."""
        file = f"{self.name}-{uuid.uuid4().hex[:8]}"
        body = {"type": "file", "format": "text", "content": f"from {self.name}\n"}
        return self.http.put(
            f"{self.url}api/contents/{file}.txt", json=body, headers=self._xsrf(), timeout=10
        ).status_code

    def terminal(self) -> tuple[int, str]:
        answer = self.http.post(f"{self.url}api/terminals", headers=self._xsrf(), timeout=10)
        return answer.status_code, answer.json().get("name", "") if answer.status_code == 200 else ""

    def doors(self) -> tuple[int, int, int]:
        return self.list(), self.write(), self.terminal()[0]

    def open_terminal_socket(self, name: str) -> Any:
        import websocket

        parts = urlsplit(self.url)
        cookie = "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())
        ws = websocket.create_connection(
            f"ws://{parts.netloc}{parts.path}terminals/websocket/{name}", header=[f"Cookie: {cookie}"], timeout=30
        )
        ws.send('["stdin", "echo hi-from-terminal\\r"]')
        deadline = time.monotonic() + 20
        seen = ""
        while "hi-from-terminal" not in seen.split("echo", 1)[-1]:
            assert time.monotonic() < deadline, seen
            seen += ws.recv()
        return ws


def _closed_within(ws: Any, seconds: float) -> float:
    """Seconds until the server closed ``ws`` (fails past ``seconds``)."""
    import websocket

    start = time.monotonic()
    ws.settimeout(seconds)
    try:
        while True:
            frame = ws.recv_data_frame(control_frame=True)[1]
            if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
                return time.monotonic() - start
            assert time.monotonic() - start < seconds, "still open"
    except websocket.WebSocketConnectionClosedException:
        return time.monotonic() - start
    except websocket.WebSocketTimeoutException:
        pytest.fail(f"the terminal websocket was still open {seconds} s later")
    finally:
        ws.close()


def _refused_within(lab: Lab, seconds: float) -> float:
    """Seconds until listing is refused (polled; fails past ``seconds``); then writing and a new terminal are."""
    start = time.monotonic()
    while lab.list() != 403:
        assert time.monotonic() - start < seconds, f"still allowed after {seconds} s"
        time.sleep(0.2)
    took = time.monotonic() - start
    assert lab.doors() == (403, 403, 403)
    return took


def test_removed_demoted_and_deactivated_members_lose_jupyterlab(
    portal: str, alice: Any, alice_org: Any, bob: Any, charlie: Any, client: Any
) -> None:
    from instances.interactive.access import access_share_add
    from instances.interactive.jupyter import jupyter_endpoint
    from portal.choices import Role
    from portal.models import User
    from portal.services import membership_add, membership_invite, membership_remove, user_deactivate, user_signup

    people = {"bob": bob}
    for name in ("dora", "erin", "gina", "hank"):
        people[name] = user_signup(email=f"{name}@example.com", password="correct horse battery 9", name=name)
    membership_add(organization=alice_org, user=people["dora"], role=Role.ADMIN, acting_user=None)  # enters by role
    for name in ("erin", "gina", "hank"):
        membership_add(organization=alice_org, user=people[name], role=Role.MEMBER, acting_user=None)
    alice_org.personal = False
    alice_org.save(update_fields=["personal"])
    inst = running_with_jupyter(alice, alice_org)
    endpoint = jupyter_endpoint(inst)
    assert endpoint is not None
    door = f"/o/{alice_org.slug}/instances/{inst.pk}/jupyter/"

    # Least privilege first: bob, a member, is refused at the door until alice shares the instance; charlie 404.
    client.force_login(bob)
    assert client.get(door).status_code == 403
    client.force_login(charlie)
    assert client.get(door).status_code == 404
    for name in ("bob", "erin", "gina", "hank"):
        access_share_add(target=inst, email=f"{name}@example.com", acting_user=alice)
    labs = {name: Lab(client, user, inst) for name, user in people.items()}
    sockets = {}
    for name, lab in labs.items():
        assert (lab.list(), lab.write()) == (200, 201), name
        status, term = lab.terminal()
        assert status == 200 and term, name
        sockets[name] = lab.open_terminal_socket(term)
    listed = labs["bob"].http.get(f"{endpoint.url}api/contents", timeout=10).json()["content"]
    writers = sorted(item["name"].split("-")[0] for item in listed if item["name"].count("-") == 1)
    assert writers == ["bob", "dora", "erin", "gina", "hank"]

    # The portal's own paths: refused at once (the portal tells the server after the commit), socket closed.
    started = time.monotonic()
    membership_remove(membership=bob.memberships.get(organization=alice_org), acting_user=alice)
    assert labs["bob"].doors() == (403, 403, 403)
    refused_s = time.monotonic() - started
    closed_s = _closed_within(sockets["bob"], 5)
    print(
        f"\nfigures: removal -> contents, write, terminal refused after {refused_s:.2f} s;"
        f" socket closed +{closed_s:.2f} s"
    )
    membership_invite(organization=alice_org, email="dora@example.com", role=Role.MEMBER, acting_user=alice)
    assert labs["dora"].doors() == (403, 403, 403)  # a member now: not hers, not shared
    assert _closed_within(sockets["dora"], 5) < 5
    user_deactivate(user=people["erin"], acting_user=alice)
    assert labs["erin"].doors() == (403, 403, 403)
    assert _closed_within(sockets["erin"], 5) < 5
    hank = User.objects.get(pk=people["hank"].pk)  # the back office's "active" checkbox: the model's save()
    hank.is_active = False
    hank.save()
    assert labs["hank"].doors() == (403, 403, 403)
    assert _closed_within(sockets["hank"], 5) < 5

    # A row changed behind the portal's back (no signal, no push): refused within the re-check delay.
    assert labs["gina"].list() == 200
    User.objects.filter(pk=people["gina"].pk).update(is_active=False)
    silent_s = _refused_within(labs["gina"], RECHECK_S + 2)
    socket_s = _closed_within(sockets["gina"], RECHECK_S + 2)
    print(f"figures: silent update (recheck {RECHECK_S} s) -> refused after {silent_s:.2f} s, socket +{socket_s:.2f} s")

    # Nothing they tried after the end reached the disk; alice carries on.
    alice_lab = Lab(client, alice, inst)
    assert alice_lab.doors() == (200, 201, 200)
    listed = alice_lab.http.get(f"{endpoint.url}api/contents", timeout=10).json()["content"]
    writers = sorted(item["name"].split("-")[0] for item in listed if item["name"].count("-") == 1)
    assert writers == ["alice", "bob", "dora", "erin", "gina", "hank"]  # one file each: the refused wrote none


def test_a_withdrawn_share_and_the_setting_turned_off_end_the_session(
    portal: str, alice: Any, alice_org: Any, bob: Any, client: Any
) -> None:
    from instances.interactive.access import access_share_add, access_share_remove, organization_instance_access_set

    inst = running_with_jupyter(alice, alice_org)
    organization_instance_access_set(organization=alice_org, members_enter_any=True, acting_user=alice)
    bobs = Lab(client, bob, inst)
    assert bobs.doors() == (200, 201, 200)
    organization_instance_access_set(organization=alice_org, members_enter_any=False, acting_user=alice)
    assert bobs.doors() == (403, 403, 403)
    client.force_login(bob)
    assert client.get(f"/o/{alice_org.slug}/instances/{inst.pk}/jupyter/").status_code == 403

    access_share_add(target=inst, email=bob.email, acting_user=alice)
    bobs = Lab(client, bob, inst)
    assert bobs.doors() == (200, 201, 200)
    assert access_share_remove(target=inst, user_id=bob.pk, acting_user=alice) is True
    assert bobs.doors() == (403, 403, 403)


def test_the_portal_answers_only_the_instances_own_server(portal: str, alice: Any, alice_org: Any, bob: Any) -> None:
    """The re-check endpoint: the server's token for this instance only; a user id the rule lets in or not."""
    from instances.interactive.jupyter import jupyter_secret
    from instances.interactive.tickets import access_token, status_token
    from instances.models import GpuType, Instance

    gpu = GpuType.objects.get(code="cpu-local")
    inst = Instance.objects.create(
        organization=alice_org,
        created_by=alice,
        name="n",
        kind="interactive",
        gpu_type=gpu,
        gpu_count=1,
        status="running",
    )
    other = Instance.objects.create(organization=alice_org, name="o", kind="interactive", gpu_type=gpu, gpu_count=1)
    url = f"{portal}/api/v1/runtime/instances/{inst.pk}/jupyter-access"
    good = {"Authorization": f"token {access_token(jupyter_secret(inst))}"}

    def ask(user: object, headers: dict[str, str], target: str = url) -> tuple[int, dict[str, Any]]:
        answer = requests.post(target, json={"user": user}, headers=headers, timeout=10)
        return answer.status_code, answer.json()

    assert ask(str(alice.pk), good) == (200, {"allowed": True, "recheck_s": RECHECK_S})
    assert ask(str(bob.pk), good) == (200, {"allowed": False, "recheck_s": RECHECK_S})
    for odd in (alice.pk, "", "1e3", "-1", "٣", None, ["1"], "9" * 30):
        assert ask(odd, good) == (200, {"allowed": False, "recheck_s": RECHECK_S}), odd
    assert ask(str(alice.pk), {}) == (401, REFUSED)
    assert ask(str(alice.pk), {"Authorization": f"token {status_token(jupyter_secret(inst))}"}) == (401, REFUSED)
    other_token = {"Authorization": f"token {access_token(jupyter_secret(other))}"}
    assert ask(str(alice.pk), other_token) == (401, REFUSED)
    assert ask(str(alice.pk), good, f"{portal}/api/v1/runtime/instances/999999/jupyter-access") == (401, REFUSED)
    assert requests.post(url, data=b"{not json", headers=good, timeout=10).status_code == 400
    wrong = requests.get(url, headers=good, timeout=10)
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")
    Instance.objects.filter(pk=inst.pk).update(status="stopped")
    assert ask(str(alice.pk), good) == (200, {"allowed": False, "recheck_s": RECHECK_S})
