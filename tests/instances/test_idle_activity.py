"""Idle means no session and no work (issue 24): real local instances (the real local backend, a real JupyterLab
server, OpenSSH's client) are not autostopped while their own command computes, a kernel is busy, a terminal or
an SSH session is open — for 3× the limit — and are warned once and stopped after the work or session ends.

Time: the idle clock is moved with time-machine in whole steps (``_step``), frozen in between; the servers'
state (kernel busy, terminal open, session open, CPU time) is real and read from the real servers. Within a
step the utilization sampler takes two samples one real second apart, so a sample's CPU share is measured over
real time, as the reconcile tick takes them every 30 s in production.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests

S30 = timedelta(seconds=30)
PROBED = ("api/status", "api/kernels", "api/terminals")


@pytest.fixture
def local(settings: Any, tmp_path: Path, catalog: None, transactional_db: Any, time_machine: Any) -> Iterator[Path]:
    """The real local backend; idle autostop after 1 minute for alice's organization, warnings 10 minutes
    ahead (so the lead is half the limit, 30 s); a sample whenever the sampler is called. Whatever a test
    leaves running is stopped at its end (nothing outlives the test, even a failed one)."""
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "ws"), "slots": 2}
    settings.INSTANCES_STOP_GRACE_S = 5
    settings.INSTANCES_IDLE_WARNING_MINUTES = 10
    settings.INSTANCES_UTILIZATION_EVERY_S = 0
    yield tmp_path / "ws"
    from instances.backends.local import LocalBackend
    from instances.backends.procfs import job_processes
    from instances.models import JobAttempt

    for handle in JobAttempt.objects.filter(handle__startswith="local:").values_list("handle", flat=True):
        pgid, workspace = LocalBackend.parse_handle(handle)
        for proc in job_processes(str(workspace), pgid):  # the group and what left it (kernels, SSH shells)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, signal.SIGKILL)


def _launch_through_the_api(alice: Any, alice_org: Any, command: list[str]) -> Any:
    """``POST /api/v1/instances`` as alice (the organization's idle default: 1 minute), then reconcile until
    running. Returns the instance."""
    from django.core import mail
    from instances_support import fund
    from rest_framework.test import APIClient

    from instances.models import Instance
    from instances.services import instances_reconcile

    fund(alice_org, 10)
    alice_org.idle_autostop_minutes = 1
    alice_org.save(update_fields=["idle_autostop_minutes"])
    instances_reconcile()  # the first reconcile takes the local node from the backend
    api = APIClient()
    api.force_authenticate(alice)
    made = api.post(
        "/api/v1/instances",
        {"name": "notebook", "gpu_type": "cpu-local", "gpu_count": 1, "command": command},
        format="json",
    )
    assert made.status_code == 201, made.content
    inst = Instance.objects.get(pk=made.json()["id"])
    assert inst.idle_autostop_minutes == 1
    mail.outbox.clear()  # the sign-up's verification e-mail
    deadline = time.monotonic() + 90  # bounds a hung test
    while (inst := Instance.objects.get(pk=inst.pk)).status != "running":
        assert inst.status in ("scheduling", "provisioning"), inst.status_reason
        assert time.monotonic() < deadline
        instances_reconcile()
        time.sleep(0.1)
    return inst


def _step(time_machine: Any, at: datetime, *, sample: bool = False) -> dict[str, int]:
    """Move the clock to ``at`` (frozen); with ``sample``, take a utilization sample at ``at`` and another at
    ``at`` + 1 s after one real second; then run the idle tick at the last of those times."""
    from instances.interactive.idle import idle_autostop_tick
    from instances.interactive.utilization import utilization_sample_due

    time_machine.move_to(at, tick=False)
    if sample:
        assert utilization_sample_due(now=at) == 1
        time.sleep(1.0)
        at += timedelta(seconds=1)
        time_machine.move_to(at, tick=False)
        assert utilization_sample_due(now=at) == 1
    return idle_autostop_tick(now=at)


def _never_idle_for_three_limits(time_machine: Any, start: datetime, inst: Any, *, sample: bool = False) -> None:
    """Ticks every 30 s up to 3 minutes (3× the limit): never warned, never stopped."""
    from instances.models import Instance

    for k in range(1, 7):
        assert _step(time_machine, start + k * S30, sample=sample) == {"warned": 0, "stopped": 0}, k
    inst = Instance.objects.get(pk=inst.pk)
    assert (inst.status, inst.idle_warned_at, inst.autostopped_at) == ("running", None, None)


def _then_warned_once_and_stopped(
    time_machine: Any, ended: datetime, inst: Any, mailoutbox: list[Any], *, sample: bool = False
) -> None:
    """After the work or session ended at ``ended`` (its last activity): nothing 20 s later, the warning once
    30 s later (half the limit), the stop 1 minute after ``ended``."""
    from instances.models import Instance

    assert _step(time_machine, ended + timedelta(seconds=20), sample=sample) == {"warned": 0, "stopped": 0}
    assert _step(time_machine, ended + S30, sample=sample) == {"warned": 1, "stopped": 0}
    assert _step(time_machine, ended + timedelta(seconds=50), sample=sample) == {"warned": 0, "stopped": 0}
    assert _step(time_machine, ended + 2 * S30, sample=sample) == {"warned": 0, "stopped": 1}
    assert [(m.to, m.subject) for m in mailoutbox] == [
        (["alice@example.com"], "gpu-portal: notebook will be stopped in 1 minute (idle)")
    ]
    inst = Instance.objects.get(pk=inst.pk)
    assert inst.status == "stopped"
    assert inst.autostopped_at is not None and inst.autostopped_at >= ended + 2 * S30


def test_a_training_command_burning_cpu_is_not_autostopped_for_three_times_its_limit(
    local: Path,
    alice: Any,
    alice_org: Any,
    tmp_path: Path,
    time_machine: Any,
    mailoutbox: list[Any],
    settings: Any,
) -> None:
    """The instance's own command (launched through the API) computes: its samples show a core busy. Without
    the JupyterLab and SSH servers here, so that the samples measure the command alone (a server starting
    up computes too, and would count as work)."""
    from django.utils import timezone

    from instances.models import Instance, UtilizationSample

    settings.INSTANCES_JUPYTER_KINDS = ()
    settings.INSTANCES_SSH_ENABLED = False
    done = tmp_path / "done"
    train = f"import os, time\nwhile not os.path.exists({str(done)!r}): pass\ntime.sleep(600)"
    inst = _launch_through_the_api(alice, alice_org, [sys.executable, "-c", train])
    start = timezone.now().replace(microsecond=0)

    _never_idle_for_three_limits(time_machine, start, inst, sample=True)
    newest = UtilizationSample.objects.filter(instance=inst).order_by("-sampled_at").first()
    assert newest is not None and newest.sampled_at == start + 6 * S30 + timedelta(seconds=1)
    assert newest.cpu_percent is not None and newest.cpu_percent >= 10
    assert Instance.objects.get(pk=inst.pk).last_activity_at == newest.sampled_at
    assert mailoutbox == []

    done.touch()  # training ends; the command sleeps
    _then_warned_once_and_stopped(time_machine, newest.sampled_at, inst, mailoutbox, sample=True)
    from instances.interactive.utilization import sample_busy

    after = UtilizationSample.objects.filter(instance=inst, sampled_at__gt=newest.sampled_at)
    assert after.count() == 8 and not any(sample_busy(s) for s in after)


# --- JupyterLab: a busy kernel, an open terminal ------------------------------------------------------------


def _jupyter_session(client: Any, alice: Any, inst: Any) -> tuple[str, requests.Session]:
    """alice enters JupyterLab through the console's door (ticket → the server's cookie): (base URL, session)."""
    from test_jupyter_local import _form

    client.force_login(alice)
    deadline = time.monotonic() + 60
    while (page := client.get(f"/o/{inst.organization.slug}/instances/{inst.pk}/jupyter/")).status_code != 200:
        assert time.monotonic() < deadline, page.status_code
        time.sleep(0.2)
    action, ticket = _form(page.content.decode())
    browser = requests.Session()
    assert browser.post(action, data={"ticket": ticket}, timeout=10, allow_redirects=False).status_code == 302
    assert browser.get(action.removesuffix("login") + "lab", timeout=30).status_code == 200
    return action.removesuffix("login"), browser


def _post(browser: requests.Session, url: str, **kw: Any) -> requests.Response:
    return browser.post(url, headers={"X-XSRFToken": browser.cookies.get("_xsrf", "")}, timeout=30, **kw)


def _wait_for(predicate: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return value


def test_a_notebook_cell_computing_silently_is_not_autostopped_while_its_kernel_is_busy(
    local: Path, alice: Any, alice_org: Any, client: Any, time_machine: Any, mailoutbox: list[Any]
) -> None:
    """A real kernel runs ``time.sleep`` (no output, no CPU): only its ``busy`` state in Jupyter's kernels API
    says that the cell is computing."""
    import websocket
    from django.utils import timezone

    inst = _launch_through_the_api(alice, alice_org, [sys.executable, "-c", "import time; time.sleep(600)"])
    base, browser = _jupyter_session(client, alice, inst)
    kernel = _post(browser, f"{base}api/kernels", json={"name": "python3"})
    assert kernel.status_code == 201, kernel.text
    kid = kernel.json()["id"]
    parts = urlsplit(base)
    cookie = "; ".join(f"{k}={v}" for k, v in browser.cookies.items())
    ws = websocket.create_connection(
        f"ws://{parts.netloc}{parts.path}api/kernels/{kid}/channels", header=[f"Cookie: {cookie}"], timeout=60
    )
    msg_id = uuid.uuid4().hex
    ws.send(
        json.dumps(
            {
                "header": {"msg_id": msg_id, "username": "alice", "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": "import time\ntime.sleep(600)", "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False},
            }
        )
    )  # fmt: skip
    while True:  # the kernel says it is busy with this cell; the browser tab then goes away
        msg = json.loads(ws.recv())
        if msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "status":
            assert msg["content"]["execution_state"] == "busy"
            break
    ws.close()

    def state() -> str:
        return str(browser.get(f"{base}api/kernels/{kid}", timeout=10).json()["execution_state"])

    assert state() == "busy"
    start = timezone.now().replace(microsecond=0)

    _never_idle_for_three_limits(time_machine, start, inst)
    assert state() == "busy"  # still computing, really
    assert mailoutbox == []

    # the cell is interrupted: the kernel is idle; the idle period starts at the last tick that saw it busy
    assert _post(browser, f"{base}api/kernels/{kid}/interrupt").status_code == 204
    _wait_for(lambda: state() == "idle", "an idle kernel")
    _then_warned_once_and_stopped(time_machine, start + 6 * S30, inst, mailoutbox)


def test_an_open_terminal_keeps_the_instance_running_until_it_is_closed(
    local: Path, alice: Any, alice_org: Any, client: Any, time_machine: Any, mailoutbox: list[Any]
) -> None:
    from django.utils import timezone

    from instances.interactive.jupyter import jupyter_secret
    from instances.interactive.tickets import status_token

    inst = _launch_through_the_api(alice, alice_org, [sys.executable, "-c", "import time; time.sleep(600)"])
    base, browser = _jupyter_session(client, alice, inst)
    made = _post(browser, f"{base}api/terminals", json={})
    assert made.status_code == 200, made.text
    name = made.json()["name"]

    def terminals() -> list[str]:
        return [t["name"] for t in browser.get(f"{base}api/terminals", timeout=10).json()]

    assert terminals() == [name]
    # the portal's probe token reads the status and the two lists, nothing else, and changes nothing
    token = {"Authorization": f"token {status_token(jupyter_secret(inst))}"}
    assert [requests.get(f"{base}{path}", headers=token, timeout=10).status_code for path in PROBED] == [200, 200, 200]
    assert requests.get(f"{base}api/contents", headers=token, timeout=10).status_code == 403
    assert requests.get(f"{base}files/api/kernels", headers=token, timeout=10, allow_redirects=False).status_code in (
        302,
        403,
    )  # a path that merely ends like a probed one
    assert requests.post(f"{base}api/kernels", json={"name": "python3"}, headers=token, timeout=10).status_code == 403
    assert requests.delete(f"{base}api/terminals/{name}", headers=token, timeout=10).status_code == 403
    assert terminals() == [name]
    start = timezone.now().replace(microsecond=0)

    _never_idle_for_three_limits(time_machine, start, inst)
    assert mailoutbox == []

    closed = browser.delete(
        f"{base}api/terminals/{name}", headers={"X-XSRFToken": browser.cookies.get("_xsrf", "")}, timeout=30
    )
    assert closed.status_code == 204
    assert terminals() == []
    _then_warned_once_and_stopped(time_machine, start + 6 * S30, inst, mailoutbox)


# --- SSH ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")
def test_an_open_ssh_session_keeps_the_instance_running_until_it_ends(
    local: Path, alice: Any, alice_org: Any, tmp_path: Path, time_machine: Any, mailoutbox: list[Any]
) -> None:
    """OpenSSH's client keeps a session open (``cat`` reading its input, after saying ``open``); closing its
    input ends it."""
    from django.utils import timezone
    from test_ssh_local import _key

    from instances.interactive.ssh import ssh_access
    from instances.models import Instance
    from portal.sshkeys import ssh_key_add

    key_file, public = _key(tmp_path, "alice")
    ssh_key_add(user=alice, name="laptop", public_key=public)
    inst = _launch_through_the_api(alice, alice_org, [sys.executable, "-c", "import time; time.sleep(600)"])
    access = _wait_for(lambda: (a := ssh_access(Instance.objects.get(pk=inst.pk))) and a.port and a, "the SSH server")
    argv = [
        "ssh", "-p", str(access.port), "-i", str(key_file), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "LogLevel=ERROR", f"{access.username}@{access.host}", "echo open; cat",
    ]  # fmt: skip
    session = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert session.stdout is not None
        ready, _, _ = select.select([session.stdout], [], [], 60)
        assert ready and session.stdout.readline() == b"open\n"  # the session is open
        start = timezone.now().replace(microsecond=0)
        _never_idle_for_three_limits(time_machine, start, inst)
        assert mailoutbox == []
        assert session.poll() is None  # the session was open all along
    finally:
        out, err = session.communicate(input=b"", timeout=30)  # end of input: cat ends, and the session with it
    assert (session.returncode, out) == (0, b""), err  # the server ended the session before the client exits
    _then_warned_once_and_stopped(time_machine, start + 6 * S30, inst, mailoutbox)


@pytest.mark.skipif(shutil.which("ssh") is None, reason="OpenSSH client not installed")
def test_a_dropped_ssh_connection_ends_its_session_and_hangs_up_its_terminal(
    local: Path, alice: Any, alice_org: Any, tmp_path: Path, time_machine: Any, mailoutbox: list[Any]
) -> None:
    """The client is killed (a laptop closed, a network gone): the server hangs up the session's terminal, as
    sshd does, and the session no longer keeps the instance from idling."""
    import psutil
    from django.utils import timezone
    from test_ssh_local import _key

    from instances.backends.procfs import job_processes
    from instances.interactive.ssh import ssh_access
    from instances.models import Instance
    from portal.sshkeys import ssh_key_add

    key_file, public = _key(tmp_path, "alice")
    ssh_key_add(user=alice, name="laptop", public_key=public)
    inst = _launch_through_the_api(alice, alice_org, [sys.executable, "-c", "import time; time.sleep(600)"])
    access = _wait_for(lambda: (a := ssh_access(Instance.objects.get(pk=inst.pk))) and a.port and a, "the SSH server")
    workspace = str(local / f"instance-{inst.pk}" / "attempt-1")
    argv = [
        "ssh", "-tt", "-p", str(access.port), "-i", str(key_file), "-o", "StrictHostKeyChecking=no",
        "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
        "-o", "LogLevel=ERROR", f"{access.username}@{access.host}", "echo open; exec sleep 3600",
    ]  # fmt: skip
    session = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def sleepers() -> list[int]:
        alive = []
        for proc in job_processes(workspace):
            with contextlib.suppress(psutil.Error):
                if psutil.Process(proc.pid).cmdline() == ["sleep", "3600"]:
                    alive.append(proc.pid)
        return alive

    try:
        assert session.stdout is not None
        ready, _, _ = select.select([session.stdout], [], [], 60)
        assert ready and session.stdout.readline().strip() == b"open"
        _wait_for(sleepers, "the session's command")
        session.kill()  # no goodbye: the connection just ends
        session.wait(timeout=30)
        _wait_for(lambda: not sleepers(), "the hang-up of the terminal")
    finally:
        if session.poll() is None:
            session.kill()
    start = timezone.now().replace(microsecond=0)
    # idle since the session ended (its end touched the activity file, a moment after start)
    assert _step(time_machine, start + timedelta(seconds=35)) == {"warned": 1, "stopped": 0}
