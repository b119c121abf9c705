"""JupyterLab on an interactive instance, real processes on the local backend: the console's door hands a member
a single-use ticket, the server trades it for its cookie, a kernel computes ``1+1`` over the websocket; an
outsider, an anonymous visitor, a request without the cookie and a reused or expired ticket are refused; stop
ends the server with the instance."""

from __future__ import annotations

import json
import re
import socket
import time
import uuid
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from jupyter_support import running_with_jupyter


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any, live_server: Any) -> Path:
    settings.SITE_URL = live_server.url  # the server re-checks its users with this portal
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    return tmp_path / "ws"


def _form(html: str) -> tuple[str, str]:
    action = re.search(r'<form id="jupyter-login" method="post" action="([^"]+)"', html)
    ticket = re.search(r'name="ticket" value="([^"]+)"', html)
    assert action and ticket, html
    return unescape(action.group(1)), unescape(ticket.group(1))


def _execute(base_url: str, session: requests.Session, code: str) -> str:
    """Start a kernel through the REST API, run ``code`` over its websocket, return the text/plain result."""
    import websocket

    xsrf = session.cookies.get("_xsrf", "")
    kernel = session.post(f"{base_url}api/kernels", json={"name": "python3"}, headers={"X-XSRFToken": xsrf})
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]
    parts = urlsplit(base_url)
    cookie = "; ".join(f"{k}={v}" for k, v in session.cookies.items())
    ws = websocket.create_connection(
        f"ws://{parts.netloc}{parts.path}api/kernels/{kid}/channels", header=[f"Cookie: {cookie}"], timeout=60
    )
    try:
        msg_id = uuid.uuid4().hex
        ws.send(
            json.dumps(
                {
                    "header": {
                        "msg_id": msg_id,
                        "username": "alice",
                        "session": uuid.uuid4().hex,
                        "msg_type": "execute_request",
                        "version": "5.3",
                    },
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": {
                        "code": code,
                        "silent": False,
                        "store_history": False,
                        "user_expressions": {},
                        "allow_stdin": False,
                    },
                }
            )
        )
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "execute_result":
                return str(msg["content"]["data"]["text/plain"])
            assert msg["msg_type"] != "error", msg["content"]
    finally:
        ws.close()


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_jupyterlab_lets_members_in_runs_code_and_ends_with_the_instance(
    local: Path, alice: Any, alice_org: Any, bob: Any, charlie: Any, client: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.backends.local import LOG_FILE
    from instances.interactive.jupyter import jupyter_endpoint, jupyter_last_activity, jupyter_secret
    from instances.interactive.tickets import ticket_mint
    from instances.selectors import node_views
    from instances.services import instance_stop
    from portal.models import AuditEvent

    inst = running_with_jupyter(alice, alice_org)
    endpoint = jupyter_endpoint(inst)
    assert endpoint is not None
    port = urlsplit(endpoint.url).port
    assert endpoint.url == f"http://127.0.0.1:{port}/jupyter/{inst.pk}/"
    door = f"/o/{alice_org.slug}/instances/{inst.pk}/jupyter/"

    # Refused: an anonymous visitor (to the login page), an outsider (404, panel and door alike), and the
    # server itself without the cookie (pages go to its login, which refuses; the API is 403).
    assert client.get(door).status_code == 302
    assert client.get(door)["Location"].startswith("/login/")
    client.force_login(charlie)
    assert client.get(door).status_code == 404
    assert client.get(f"{door}panel/").status_code == 404
    assert requests.get(f"{endpoint.url}api/kernels", timeout=10).status_code == 403
    lab = requests.get(f"{endpoint.url}lab", timeout=10, allow_redirects=False)
    to_login = f"/jupyter/{inst.pk}/login?next=%2Fjupyter%2F{inst.pk}%2Flab"
    assert (lab.status_code, lab.headers["Location"]) == (302, to_login)
    assert requests.get(f"{endpoint.url}login", timeout=10).status_code == 403
    assert AuditEvent.objects.filter(action="instance.jupyter_open").count() == 0

    # The API shows the state and the door.
    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(f"/api/v1/instances/{inst.pk}").json()["jupyter"] == {
        "state": "ready",
        "url": f"http://testserver{door}",
    }

    # bob, a member, is refused: the instance is alice's and not shared with him (test_access_jupyter_local.py).
    client.force_login(bob)
    assert client.get(door).status_code == 403
    assert 'data-state="not-allowed"' in client.get(f"{door}panel/").content.decode()

    # alice: the panel links the door; the door's page posts a ticket to the server, which sets its cookie.
    client.force_login(alice)
    panel = client.get(f"{door}panel/").content.decode()
    assert f'href="{door}"' in panel and 'data-state="ready"' in panel
    page = client.get(door)
    assert page.status_code == 200 and page["Referrer-Policy"] == "no-referrer"
    action, ticket = _form(page.content.decode())
    assert action == f"{endpoint.url}login"
    browser = requests.Session()
    login = browser.post(action, data={"ticket": ticket}, timeout=10, allow_redirects=False)
    assert (login.status_code, login.headers["Location"]) == (302, f"/jupyter/{inst.pk}/lab")
    lab = browser.get(f"{endpoint.url}lab", timeout=30)
    assert lab.status_code == 200 and "JupyterLab" in lab.text
    assert _execute(endpoint.url, browser, "1+1") == "2"
    assert jupyter_last_activity(inst) is not None
    audits = AuditEvent.objects.filter(action="instance.jupyter_open").order_by("id")
    assert [(a.actor, a.object_id) for a in audits] == [(alice, str(inst.pk))]

    # A used ticket, an expired one and one for another instance are refused; none of it is in the log.
    assert requests.post(action, data={"ticket": ticket}, timeout=10).status_code == 403
    secret = jupyter_secret(inst)
    expired = ticket_mint(secret=secret, instance_id=str(inst.pk), username="alice", now=time.time() - 120)
    assert requests.post(action, data={"ticket": expired}, timeout=10).status_code == 403
    other = ticket_mint(secret=secret, instance_id=str(inst.pk + 1), username="alice")
    assert requests.post(action, data={"ticket": other}, timeout=10).status_code == 403
    log = (local / f"instance-{inst.pk}" / "attempt-1" / LOG_FILE).read_text()
    assert secret not in log and ticket not in log and "POST /jupyter/" in log

    # Stop: the server, its kernel and the command are gone, the port is closed, the slot is free.
    runtime = local / f"instance-{inst.pk}" / "attempt-1" / ".jupyter" / "runtime"
    server_pid = int(json.loads(next(runtime.glob("jpserver-*.json")).read_text())["pid"])
    instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    assert inst.status == "stopped"
    assert _gone_or_zombie(server_pid)
    assert not _port_open(port)
    assert jupyter_endpoint(inst) is None
    assert [v.gpus_free for v in node_views()] == [2]
    assert 'data-state="unavailable"' in client.get(f"{door}panel/").content.decode()
    assert api.get(f"/api/v1/instances/{inst.pk}").json()["jupyter"] == {"state": "unavailable", "url": None}


def _gone_or_zombie(pid: int) -> bool:
    """True if ``pid`` no longer exists or has exited and waits to be reaped (state ``Z`` in
    ``/proc/<pid>/stat``): a killed server orphaned to a pid 1 that does not reap stays a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def test_the_panel_and_the_door_say_when_jupyterlab_will_be_there(
    alice: Any, alice_org: Any, client: Any, catalog: None
) -> None:
    from django.template.loader import render_to_string
    from django.utils import translation

    from instances.models import GpuType, Instance

    gpu = GpuType.objects.get(code="cpu-local")
    pending = Instance.objects.create(organization=alice_org, name="n", kind="interactive", gpu_type=gpu, gpu_count=1)
    training = Instance.objects.create(organization=alice_org, name="t", kind="training", gpu_type=gpu, gpu_count=1)
    base = f"/o/{alice_org.slug}/instances"
    assert client.get(f"{base}/{pending.pk}/jupyter/panel/")["Location"].startswith("/login/")

    client.force_login(alice)
    page = client.get(f"{base}/{pending.pk}/").content.decode()
    panel = client.get(f"{base}/{pending.pk}/jupyter/panel/").content.decode()
    door = client.get(f"{base}/{pending.pk}/jupyter/", follow=True)

    assert f'hx-get="{base}/{pending.pk}/jupyter/panel/" hx-trigger="load"' in page
    assert 'data-state="unavailable"' in panel and 'hx-trigger="every 3s"' in panel
    assert "JupyterLab opens here while the instance is running." in panel
    assert (
        client.get(f"{base}/{training.pk}/jupyter/panel/").content.decode().strip() == '<div id="jupyter-panel"></div>'
    )
    assert door.redirect_chain == [(f"{base}/{pending.pk}/", 302)]
    assert [str(m) for m in door.context["messages"]] == ["JupyterLab is not running yet: it starts with the instance."]
    with translation.override("zh-hans"):
        starting = render_to_string(
            "instances/_jupyter_panel.html", {"org": alice_org, "instance": pending, "jupyter_state": "starting"}
        )
        ready = render_to_string(
            "instances/_jupyter_panel.html",
            {"org": alice_org, "instance": pending, "jupyter_state": "ready", "may_enter": True},
        )
        not_yours = render_to_string(
            "instances/_jupyter_panel.html", {"org": alice_org, "instance": pending, "jupyter_state": "ready"}
        )
    assert "JupyterLab 正在启动…" in starting and 'hx-trigger="every 2s"' in starting
    assert "打开 JupyterLab" in ready
    assert 'data-state="not-allowed"' in not_yours and "JupyterLab 正在运行" in not_yours
