"""The training environment in every shell of an instance, and an interactive instance with no command (issue 25),
on the REAL local backend: one instance launched without a command stays up (its command is the keep-alive),
its JupyterLab answers, and ``python -c "import torch; print(torch.__version__)"`` prints the portal's own torch
version in a JupyterLab terminal (over the terminals websocket), in the default notebook kernel (over the
kernel websocket), in an SSH exec (OpenSSH's client) and in an interactive SSH login, where ``python`` resolves
to the training Python (``<training_bin>/python``) every time; stop ends every process of it. Only a member who
may enter gets in; charlie gets a 404 at the door."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from jupyter_support import running_with_jupyter
from test_access_jupyter_local import Lab
from test_access_ssh_local import _argv, _key, _ssh

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")

VERSION = re.compile(r"<([0-9][^<>\s]*)>")  # printed as "<2.13.0+cpu>": the echoed command line never matches
WHICH = re.compile(r"@@(/[^@\s\"']*)@@")  # printed as "@@/path/python@@"
PROBE = 'python -c "import torch; print(torch.__version__.join(\'<>\'))"; echo "@@$(command -v python)@@"'


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any, live_server: Any) -> Path:
    settings.SITE_URL = live_server.url  # the Jupyter server re-checks its users with this portal
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    return tmp_path / "ws"


def _terminal(lab: Lab, command: str) -> str:
    """Open a JupyterLab terminal, type ``command`` over the terminals websocket, return its output (stdout
    messages joined) once both probes printed."""
    import websocket

    status, name = lab.terminal()
    assert status == 200 and name
    parts = urlsplit(lab.url)
    cookie = "; ".join(f"{k}={v}" for k, v in lab.http.cookies.items())
    ws = websocket.create_connection(
        f"ws://{parts.netloc}{parts.path}terminals/websocket/{name}", header=[f"Cookie: {cookie}"], timeout=60
    )
    try:
        ws.send(json.dumps(["stdin", f"{command}\r"]))
        seen = ""
        deadline = time.monotonic() + 90
        while not (VERSION.search(seen) and WHICH.search(seen)):
            assert time.monotonic() < deadline, seen
            kind, *rest = json.loads(ws.recv())
            if kind == "stdout":
                seen += str(rest[0])
        return seen
    finally:
        ws.close()


def _kernel(lab: Lab, code: str) -> tuple[str, dict[str, Any]]:
    """Start the default kernel (no name given) through the REST API, run ``code`` over its websocket; returns
    its stdout and the kernel's model."""
    import websocket

    kernel = lab.http.post(f"{lab.url}api/kernels", json={}, headers=lab._xsrf(), timeout=30)
    assert kernel.status_code == 201, kernel.text
    parts = urlsplit(lab.url)
    cookie = "; ".join(f"{k}={v}" for k, v in lab.http.cookies.items())
    ws = websocket.create_connection(
        f"ws://{parts.netloc}{parts.path}api/kernels/{kernel.json()['id']}/channels",
        header=[f"Cookie: {cookie}"],
        timeout=90,
    )
    msg_id, out = uuid.uuid4().hex, ""
    try:
        header = {"msg_id": msg_id, "username": "alice", "session": uuid.uuid4().hex, "version": "5.3"}
        content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
        ws.send(
            json.dumps(
                {
                    "header": {**header, "msg_type": "execute_request"},
                    "parent_header": {},
                    "metadata": {},
                    "channel": "shell",
                    "buffers": [],
                    "content": content,
                }
            )
        )
        while True:
            msg = json.loads(ws.recv())
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            assert msg["msg_type"] != "error", msg["content"]
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out += msg["content"]["text"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return out, kernel.json()
    finally:
        ws.close()


def test_an_instance_without_a_command_runs_the_training_python_in_every_shell(
    local: Path, tmp_path: Path, alice: Any, alice_org: Any, charlie: Any, client: Any
) -> None:
    import torch

    from instances.backends.local import STATE_FILE
    from instances.backends.procfs import job_processes
    from instances.interactive.ssh import ssh_access
    from instances.services import backend as boundary
    from instances.services import instance_stop
    from portal.sshkeys import ssh_key_add

    training_bin = boundary.compute_backend().training_bin  # type: ignore[attr-defined]
    assert training_bin == str(Path(sys.executable).absolute().parent)  # the default: the portal's own Python
    training_python = f"{training_bin}/python"
    key, public = _key(tmp_path, "alice")
    ssh_key_add(user=alice, name="laptop", public_key=public)

    inst = running_with_jupyter(alice, alice_org, command=[], name="no-command")
    ws = local / f"instance-{inst.pk}" / "attempt-1"
    state = json.loads((ws / STATE_FILE).read_text())
    try:
        assert inst.command == []
        assert state["command"][-3:] == [sys.executable, "-m", "instances.interactive.keepalive"]
        client.force_login(charlie)
        assert client.get(f"/o/{alice_org.slug}/instances/{inst.pk}/jupyter/").status_code == 404

        lab = Lab(client, alice, inst)
        terminal = _terminal(lab, PROBE)  # (a) a JupyterLab terminal
        assert (VERSION.findall(terminal), WHICH.findall(terminal)) == ([torch.__version__], [training_python])

        specs = lab.http.get(f"{lab.url}api/kernelspecs", timeout=10).json()  # (b) the default notebook kernel
        assert specs["default"] == "python3"
        assert specs["kernelspecs"]["python3"]["spec"]["argv"][:3] == [sys.executable, "-m", "ipykernel_launcher"]
        printed, model = _kernel(
            lab, "import shutil, sys, torch; print(torch.__version__, sys.executable, shutil.which('python'))"
        )
        assert model["name"] == "python3"
        assert printed == f"{torch.__version__} {sys.executable} {training_python}\n"

        access = ssh_access(inst)  # (c) SSH: an exec, then an interactive login on a pseudo-terminal
        assert access is not None and access.port
        done = _ssh(access, key, 'python -c "import torch; print(torch.__version__)"; command -v python')
        assert (done.returncode, done.stdout.splitlines()) == (0, [torch.__version__, training_python]), done.stderr
        login = subprocess.run(
            [*_argv(access, key, "-tt")],
            input=f"{PROBE}; exit\n",
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert (VERSION.findall(login.stdout), WHICH.findall(login.stdout)) == ([torch.__version__], [training_python])
    finally:  # every process it started ends with the test, pass or fail
        instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    assert inst.status == "stopped"
    assert job_processes(str(ws), int(state["pgid"])) == []  # keep-alive, JupyterLab, its kernel, the SSH server
    assert (ws / "exit_code").read_text() == "143\n"  # the keep-alive's answer to the stop's SIGTERM
