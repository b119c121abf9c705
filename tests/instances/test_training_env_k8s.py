"""The training environment in every shell of a Kubernetes instance, and an interactive pod with no command
(issue 25).

* The image (``instances/backends/Dockerfile``) puts its Python's folder first on PATH (``ENV``), names it in
  ``GPU_PORTAL_TRAINING_BIN``, installs ``training_env.sh`` in ``/etc/profile.d`` and fails its build when
  ``python`` is elsewhere.
* The pod's own command, run for real here (paths moved under ``tmp_path``; the container's environment
  stands in for the image's ENV, with this machine's training Python): ``sshd`` from the pod's ``sshd_config``
  with the container's PATH handed to its sessions, and the keep-alive under the launcher for an instance without
  a command. An SSH exec with OpenSSH's client prints the portal's torch version with ``python`` resolving to the
  training Python, and a login shell's ``/etc/profile`` (which resets PATH here, as on Debian) followed by the
  profile.d script does too; SIGTERM (the kubelet's stop) ends the pod with 128 + 15 in its termination message.
* JupyterLab's terminals in the pod are login shells of the same image (no shell override), so the same
  profile.d script serves them; its kernel is the image's ``python``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import kubernetes_validate
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from instances.backends import JobSpec
from instances.backends.k8s_objects import POD_WORKSPACE, TERMINATION_LOG
from instances.backends.kubernetes import KubernetesBackend, object_name
from instances.interactive.shell_env import PROFILE_SCRIPT
from instances.interactive.ssh_k8s import REAPER, SECRET_ENV, SSH_MOUNT, SSH_PORT, SSHD_CONFIG

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "instances" / "backends" / "Dockerfile"
SSHD = os.environ.get("GPU_PORTAL_TEST_SSHD") or shutil.which("sshd") or ""
NAME = object_name("instance-7", 1)
JUPYTER = {
    "GPU_PORTAL_JUPYTER": "1",
    "GPU_PORTAL_JUPYTER_SECRET": "f" * 64,
    "GPU_PORTAL_JUPYTER_INSTANCE": "7",
    "GPU_PORTAL_JUPYTER_BASE_URL": "/jupyter/7/",
}


def no_command_spec(**env: str) -> JobSpec:
    return JobSpec(
        job_id="instance-7",
        attempt=1,
        image="registry.example/gpu-portal-runtime:1.0",
        placement=(("gpu-a", 1),),
        nproc_per_node=1,
        command=[],
        env=dict(env),
    )


def test_the_image_puts_its_python_first_on_path_in_every_shell() -> None:
    lines = [line.strip() for line in DOCKERFILE.read_text().splitlines()]
    assert "ENV GPU_PORTAL_TRAINING_BIN=/opt/conda/bin" in lines  # the base image's Python, with torch
    assert "ENV PATH=${GPU_PORTAL_TRAINING_BIN}:${PATH} \\" in lines
    assert "COPY instances/interactive/training_env.sh /etc/profile.d/gpu-portal-training.sh" in lines
    assert 'RUN test "$(command -v python)" = "$GPU_PORTAL_TRAINING_BIN/python" && python -c "import torch"' in lines
    assert any(line.startswith("RUN apt-get") and "openssh-server" in line for line in lines)  # /usr/sbin/sshd
    # the build context path of the COPY is the script the tests below run
    assert PROFILE_SCRIPT == ROOT / "instances" / "interactive" / "training_env.sh"


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
def test_a_pod_without_a_command_keeps_alive_under_the_launcher(version: str) -> None:
    manifests = KubernetesBackend(namespace="train").manifests(
        no_command_spec(**JUPYTER, **{SECRET_ENV: f"{NAME}-ssh"})
    )
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]
    pod = next(m for m in manifests if m["kind"] == "Job")["spec"]["template"]["spec"]
    main, sidecar = pod["containers"][0], pod["initContainers"][0]
    assert main["command"][:2] == ["/bin/sh", "-c"]
    assert main["command"][3:] == [
        "gpu-portal-sshd",
        "python", "-m", "instances.backends.local_launcher", "--workspace=/run/gpu-portal",
        "--termination-log=/dev/termination-log", "--forward-signals", "--",
        "python", "-m", "instances.interactive.keepalive",
    ]  # fmt: skip
    assert '-o "SetEnv=PATH=$PATH GPU_PORTAL_TRAINING_BIN=${GPU_PORTAL_TRAINING_BIN:-}"' in main["command"][2]
    # JupyterLab: the same image and its python; terminals left to Jupyter's default, a login shell (profile.d)
    assert (sidecar["image"], sidecar["command"][:3]) == (main["image"], ["python", "-m", "jupyterlab"])
    assert [a for a in sidecar["command"] if "terminado" in a] == []
    # a command given is run as given
    plain = KubernetesBackend(namespace="train").job_manifest(replace(no_command_spec(), command=["sleep", "9"]))
    assert plain["spec"]["template"]["spec"]["containers"][0]["command"] == ["sleep", "9"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _key(folder: Path, name: str) -> tuple[Path, str]:
    key = Ed25519PrivateKey.generate()
    path = folder / name
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode()


@pytest.mark.skipif(not SSHD or not shutil.which("ssh"), reason="no OpenSSH server (sshd) on this machine")
def test_the_pods_command_gives_ssh_sessions_and_login_shells_the_training_python(tmp_path: Path) -> None:
    import torch

    etc, ws = tmp_path / "etc", tmp_path / "run"
    etc.mkdir()
    _key(etc, "ssh_host_ed25519_key")  # the host key, where the Secret mounts it
    alice_file, alice_pub = _key(tmp_path, "alice")
    (etc / "authorized_keys").write_text(f"{alice_pub} portal-user-1\n")
    (etc / "authorized_keys").chmod(0o600)
    port, pid_file = _free_port(), tmp_path / "sshd.pid"
    config = SSHD_CONFIG.replace(SSH_MOUNT, str(etc)).replace("/run/gpu-portal-sshd.pid", str(pid_file))
    config = "StrictModes no\n" + config.replace(f"Port {SSH_PORT}", f"Port {port}")  # /tmp is world-writable
    (etc / "sshd_config").write_text(config)

    manifests = KubernetesBackend(namespace="train").manifests(no_command_spec(**{SECRET_ENV: f"{NAME}-ssh"}))
    container = next(m for m in manifests if m["kind"] == "Job")["spec"]["template"]["spec"]["containers"][0]
    # The pod's argv with its paths moved here. The reaper is left out: on this shared machine it would scan
    # every sshd session of every test (in a pod it sees the pod's own; tests/instances/test_ssh_reaper.py).
    script = container["command"][2]
    assert f"{{ {REAPER} & }} && " in script
    script = script.replace(f"{{ {REAPER} & }} && ", "").replace(SSH_MOUNT, str(etc)).replace("/usr/sbin/sshd", SSHD)
    # The sessions' HOME moved here too: bash reads ~/.bashrc in `ssh host cmd`, and root's on this machine is
    # not the image's (it may put another Python first, e.g. pyenv's shims).
    setenv = "GPU_PORTAL_TRAINING_BIN=${GPU_PORTAL_TRAINING_BIN:-}"
    assert setenv in script
    script = script.replace(setenv, f"{setenv} HOME={tmp_path}")
    argv = [
        a.replace(POD_WORKSPACE, str(ws)).replace(TERMINATION_LOG, str(tmp_path / "termination-log"))
        for a in container["command"][3:]
    ]
    training_bin = str(Path(sys.executable).absolute().parent)  # this machine's training Python, as the image's
    env = {
        "PATH": f"{training_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "GPU_PORTAL_TRAINING_BIN": training_bin,
        "PYTHONPATH": str(ROOT),  # the image has the package installed
        "HOME": str(tmp_path),
    }
    check = subprocess.run(
        [SSHD, "-t", "-f", str(etc / "sshd_config"), "-o", f"SetEnv=PATH={env['PATH']} GPU_PORTAL_TRAINING_BIN=x"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stderr  # the pod's config and its SetEnv as OpenSSH reads them
    Path("/run/sshd").mkdir(exist_ok=True)
    pod = subprocess.Popen(["/bin/sh", "-c", script, *argv], env=env, start_new_session=True)
    opts = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"]
    opts += ["-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", "-p", str(port), "-i", str(alice_file)]

    def ssh(command: str) -> list[str]:
        done = subprocess.run(
            ["ssh", *opts, "root@127.0.0.1", command],
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    try:
        deadline = time.monotonic() + 30
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and pod.poll() is None, "sshd did not start"
            time.sleep(0.05)
        exec_session = ssh('python -c "import torch; print(torch.__version__)"; command -v python')
        assert exec_session == [torch.__version__, f"{training_bin}/python"]
        # A login shell: /etc/profile resets PATH (so python is not the training one), the profile.d script
        # puts it back in front, with GPU_PORTAL_TRAINING_BIN handed over by sshd.
        reset = ssh('. /etc/profile; command -v python || echo "no python"')
        assert reset != [f"{training_bin}/python"]
        login = ssh(
            f'. /etc/profile; . {PROFILE_SCRIPT}; python -c "import torch; print(torch.__version__)"; command -v python'
        )
        assert login == [torch.__version__, f"{training_bin}/python"]
        assert pod.poll() is None  # no command: the keep-alive keeps the pod running

        pod.send_signal(signal.SIGTERM)  # the kubelet's stop: the launcher forwards it to the keep-alive
        assert pod.wait(timeout=30) == 143
        assert json.loads((tmp_path / "termination-log").read_text()) == {"exit_code": 143, "ranks": []}
        assert (ws / "exit_code").read_text() == "143\n"
    finally:
        if pod.poll() is None:
            os.killpg(pod.pid, signal.SIGKILL)
            pod.wait(timeout=10)
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        deadline = time.monotonic() + 10
        while pid_file.exists() and time.monotonic() < deadline:  # sshd removes it as it exits
            time.sleep(0.05)
