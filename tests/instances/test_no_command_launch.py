"""An interactive instance needs no command (issue 25): the service, the API, the console form and the CLI take
none and launch; the backends then run the keep-alive (local: under the launcher; Kubernetes: the launcher as
the container's first process), which waits for the stop and answers it as a stopped process would. A command
that is given is still checked: a bad one is refused with a clear message and nothing is made. (The real
instance without a command, its JupyterLab and its shells: test_training_env_local.py; the pod:
test_training_env_k8s.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from instances_support import FakeBackend
from test_first_launch import counts

BAD_COMMAND = (
    "The command must be a list of non-empty arguments without NUL characters, or empty for an instance used "
    "through JupyterLab and SSH."
)


def test_the_service_launches_an_interactive_instance_without_a_command(
    alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import LaunchSpec, instance_launch, instances_reconcile

    with django_capture_on_commit_callbacks(execute=True):
        inst = instance_launch(
            organization=funded,
            user=alice,
            spec=LaunchSpec(name="lab", kind="interactive", gpu_type="cpu-local", gpu_count=1),
        )
    inst.refresh_from_db()
    assert (inst.kind, inst.command, inst.status) == ("interactive", [], "provisioning")
    assert inst.idle_autostop_minutes == funded.idle_autostop_minutes  # idle autostop still ends it
    (spec,) = fake_backend.submitted
    assert (spec.job_id, spec.command, spec.config_json) == (f"instance-{inst.pk}", [], None)
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(backend=fake_backend)  # type: ignore[arg-type]
    inst.refresh_from_db()
    assert inst.status == "running"


@pytest.mark.parametrize(
    "command",
    [[""], ["sleep", ""], ["a\x00b"], "sleep 9", [None], [7], ("sleep",) * 257, {"sleep": "9"}, None],
    ids=["empty-arg", "empty-second", "nul", "a-string", "none-arg", "int-arg", "too-long", "dict", "none"],
)
def test_a_bad_command_is_refused_by_the_service_with_nothing_made(
    alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend, command: Any
) -> None:
    from instances.services import LaunchError, LaunchSpec, instance_launch

    before = counts()
    spec = LaunchSpec(name="lab", kind="interactive", gpu_type="cpu-local", gpu_count=1, command=command)
    with pytest.raises(LaunchError) as exc:
        instance_launch(organization=funded, user=alice, spec=spec)
    assert (exc.value.code, exc.value.field, str(exc.value)) == ("invalid", "command", BAD_COMMAND)
    assert counts() == before
    assert fake_backend.submitted == []


def test_the_api_launches_without_a_command_and_refuses_a_bad_one(
    alice: Any, charlie: Any, funded: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(alice)
    before = counts()
    for body, error in [
        (
            {"command": [""]},
            {"code": "invalid", "details": {"command": {"0": ["This field may not be blank."]}}},
        ),
        (
            {"command": "sleep 9"},
            {"code": "invalid", "details": {"command": ['Expected a list of items but got type "str".']}},
        ),
        ({"command": None}, {"code": "invalid", "details": {"command": ["This field may not be null."]}}),
        (  # refused by the JSON parser already
            {"command": ["a\x00b"]},
            {
                "code": "parse_error",
                "message": "Strings must not contain the NUL character (\\u0000).",
                "details": None,
            },
        ),
    ]:
        res = api.post("/api/v1/instances", {"gpu_type": "cpu-local", "gpu_count": 1, **body}, format="json")
        assert res.status_code == 400, res.content
        assert {k: res.json()["error"][k] for k in error} == error
    assert counts() == before

    res = api.post("/api/v1/instances", {"gpu_type": "cpu-local", "gpu_count": 1, "name": "lab"}, format="json")
    assert res.status_code == 201, res.content
    assert (res.json()["kind"], res.json()["command"], res.json()["name"]) == ("interactive", [], "lab")
    empty = api.post("/api/v1/instances", {"gpu_type": "cpu-local", "gpu_count": 1, "command": []}, format="json")
    assert (empty.status_code, empty.json()["command"]) == (201, [])
    assert list(Instance.objects.filter(organization=funded).order_by("pk").values_list("command", flat=True)) == [
        [],
        [],
    ]
    api.force_authenticate(charlie)  # an outsider sees none of them
    assert api.get(f"/api/v1/instances/{res.json()['id']}").status_code == 404


def test_the_console_form_launches_without_a_command_and_refuses_one_it_cannot_parse(
    client: Any, alice: Any, funded: Any, nodes: Any, fake_backend: FakeBackend
) -> None:
    from instances.models import Instance

    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/instances/new/").content.decode()
    assert 'name="command"' in page and "Command (optional)" in page
    assert "Leave it empty to work in JupyterLab and over SSH" in page
    form = {"gpu_type": "cpu-local", "gpu_count": 1, "mode": "container", "name": "lab"}
    before = counts()
    bad = client.post(f"/o/{funded.slug}/instances/new/", {**form, "command": 'python -c "unclosed'})
    assert bad.status_code == 400
    assert bad.context["form"].errors["command"] == ["The command cannot be parsed: No closing quotation"]
    assert counts() == before

    done = client.post(f"/o/{funded.slug}/instances/new/", {**form, "command": "   "})
    inst = Instance.objects.get(organization=funded)
    assert (done.status_code, done["Location"]) == (302, f"/o/{funded.slug}/instances/{inst.pk}/")
    assert (inst.name, inst.kind, inst.command) == ("lab", "interactive", [])
    detail = client.get(done["Location"]).content.decode()
    assert "Command:" not in detail  # nothing to show


def test_the_cli_launches_without_a_command() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python"))
    from gpu_portal_cli.main import build_parser, instance_launch_body

    args = build_parser().parse_args(["instances", "launch", "--gpu-type", "cpu-local"])
    assert instance_launch_body(args)["command"] == []
    args = build_parser().parse_args(["instances", "launch", "--gpu-type", "cpu-local", "--", "sleep", "9"])
    assert instance_launch_body(args)["command"] == ["sleep", "9"]


def test_the_backends_run_the_keep_alive_for_an_empty_command(tmp_path: Path) -> None:
    from instances.backends import JobSpec
    from instances.backends.kubernetes import KubernetesBackend
    from instances.backends.local import LocalBackend

    spec = JobSpec(job_id="instance-7", attempt=1, image="img", placement=(("gpu-a", 1),), nproc_per_node=1, command=[])
    local = LocalBackend(workspace_root=tmp_path, python="/opt/py/bin/python")
    assert local.command_for(spec, tmp_path, 1) == [
        "/opt/py/bin/python", "-m", "instances.backends.local_launcher", "--workspace", str(tmp_path), "--",
        "/opt/py/bin/python", "-m", "instances.interactive.keepalive",
    ]  # fmt: skip
    pod = KubernetesBackend(namespace="n").job_manifest(spec)["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"] == [
        "python", "-m", "instances.backends.local_launcher", "--workspace=/run/gpu-portal",
        "--termination-log=/dev/termination-log", "--forward-signals", "--",
        "python", "-m", "instances.interactive.keepalive",
    ]  # fmt: skip


def _waiting(pid: int) -> bool:
    """Whether ``pid`` sleeps in the kernel's ``sigtimedwait`` (``/proc/<pid>/wchan``): waiting for the stop."""
    return Path(f"/proc/{pid}/wchan").read_text().startswith("do_sigtimedwait")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_the_keep_alive_waits_until_it_is_stopped(sig: signal.Signals) -> None:
    from instances.backends.base import state_for_exit_code

    proc = subprocess.Popen([sys.executable, "-m", "instances.interactive.keepalive"])
    try:
        deadline = time.monotonic() + 30
        while not _waiting(proc.pid):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        assert proc.poll() is None
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 128 + sig
    finally:
        proc.kill()
        proc.wait()
    assert state_for_exit_code(128 + sig, stop_requested=True)[0] == "stopped"
    assert state_for_exit_code(128 + sig)[0] == "failed"  # ended behind the portal's back
