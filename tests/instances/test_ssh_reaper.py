"""The sshd session reaper of Kubernetes instances (``instances.interactive.ssh_reaper``) and the pod's
``sshd_config`` (``instances.interactive.ssh_k8s.SSHD_CONFIG``).

With a real OpenSSH server (``sshd`` on the PATH, or ``GPU_PORTAL_TEST_SSHD=/path/to/sshd``; skipped without
one, as on machines without openssh-server): the config is the pod's own (paths moved under ``tmp_path``,
``StrictModes`` off because ``/tmp`` is world-writable), forwarding is refused, and once a key leaves
``authorized_keys`` the reaper closes that key's open session and ends its process while another key's session
goes on. Without sshd: the same reaping of real processes that carry ``SSH_USER_AUTH`` the way sshd's sessions
do (``ExposeAuthInfo yes``)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from instances.interactive.ssh_k8s import SSH_MOUNT, SSHD_CONFIG
from instances.interactive.ssh_reaper import key_blobs, reap_once

SSHD = os.environ.get("GPU_PORTAL_TEST_SSHD") or shutil.which("sshd") or ""


def _key(folder: Path, name: str) -> tuple[Path, str]:
    key = Ed25519PrivateKey.generate()
    path = folder / name
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption())
    )
    path.chmod(0o600)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return path, public.decode() + f" {name}"


def _sleepers(marker: int) -> list[int]:
    return [
        p.pid
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["cmdline"] == ["sleep", str(marker)] and p.info["status"] != psutil.STATUS_ZOMBIE
    ]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not SSHD or not shutil.which("ssh"), reason="no OpenSSH server (sshd) on this machine")
def test_the_pods_sshd_refuses_forwarding_and_the_reaper_ends_a_removed_keys_session(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    etc.mkdir()
    host_file, _ = _key(etc, "ssh_host_ed25519_key")
    (alice_file, alice_pub), (bob_file, bob_pub) = _key(tmp_path, "alice"), _key(tmp_path, "bob")
    keys = etc / "authorized_keys"
    keys.write_text(f"{alice_pub}\n{bob_pub}\n")
    keys.chmod(0o600)
    config = SSHD_CONFIG.replace(SSH_MOUNT, str(etc)).replace("/run/gpu-portal-sshd.pid", str(tmp_path / "pid"))
    (etc / "sshd_config").write_text(config)
    assert host_file.name == "ssh_host_ed25519_key"
    Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation folder, as the pod's script makes it
    check = subprocess.run([SSHD, "-t", "-f", str(etc / "sshd_config")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # the pod's config as OpenSSH reads it
    port = _free_port()
    server = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(etc / "sshd_config"), "-o", f"Port={port}", "-o", "StrictModes=no"],
        stderr=subprocess.PIPE,
        text=True,
    )
    opts = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"]
    opts += ["-o", "LogLevel=ERROR", "-o", "IdentitiesOnly=yes", "-p", str(port)]

    def session(key: Path, marker: int) -> subprocess.Popen[bytes]:
        argv = ["ssh", *opts, "-i", str(key), "root@127.0.0.1", f"echo started; exec sleep {marker}"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
        return proc

    try:
        deadline = time.monotonic() + 10
        while socket.socket().connect_ex(("127.0.0.1", port)) != 0:
            assert time.monotonic() < deadline and server.poll() is None, "sshd did not start"
            time.sleep(0.05)
        tunnel = subprocess.run(
            ["ssh", *opts, "-i", str(alice_file), "-W", f"127.0.0.1:{port}", "root@127.0.0.1"],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=30,
        )
        assert (tunnel.returncode, tunnel.stderr) == (255, "stdio forwarding failed\n")
        alices, bobs = session(alice_file, 30101), session(bob_file, 30102)
        assert reap_once(keys) == []  # both still authorized
        keys.write_text(f"{alice_pub}\n")  # bob removed: the portal rewrote the Secret, the kubelet the file
        assert len(reap_once(keys)) == 1
        assert bobs.wait(timeout=10) == 255  # "closed by remote host"
        deadline = time.monotonic() + 5
        while _sleepers(30102):
            assert time.monotonic() < deadline, "bob's process outlived his session"
            time.sleep(0.05)
        assert alices.poll() is None and _sleepers(30101)
        alices.kill()
    finally:
        server.terminate()
        server.wait(timeout=10)
        for marker in (30101, 30102):
            for pid in _sleepers(marker):
                psutil.Process(pid).kill()


def test_the_reaper_ends_the_processes_of_a_session_whose_key_left_the_file(tmp_path: Path) -> None:
    """Without sshd: a stand-in for sshd's per-connection process (a Python parent, as ``sshd: root@notty`` is
    the shell's parent) starts a session shell that carries ``SSH_USER_AUTH`` naming the key file sshd would
    write; only the session's processes are scanned (the rest of this machine is not the reaper's)."""
    keys, auth = tmp_path / "authorized_keys", tmp_path / "sshauth.x"
    _, bob_pub = _key(tmp_path, "bob")
    _, alice_pub = _key(tmp_path, "alice")
    keys.write_text(f"# the portal's file\n{alice_pub}\n{bob_pub}\n")
    auth.write_text(f"publickey {bob_pub.split()[0]} {bob_pub.split()[1]}\n")
    assert key_blobs(auth.read_text()) == {bob_pub.split()[1]}
    fake_sshd = (
        "import os, subprocess, sys; "
        "env = {**os.environ, 'SSH_USER_AUTH': sys.argv[1]}; "
        "subprocess.Popen(['/bin/sh', '-c', 'sleep 30103; true'], env=env, start_new_session=True).wait()"
    )
    sshd = subprocess.Popen([sys.executable, "-c", fake_sshd, str(auth)], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _sleepers(30103):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (sleeper,) = _sleepers(30103)
        shell = psutil.Process(sleeper).ppid()
        assert psutil.Process(shell).ppid() == sshd.pid
        scope = [shell, sleeper]
        assert reap_once(keys, pids=scope) == []  # bob is still authorized
        keys.write_text(f"{alice_pub}\n")
        assert sorted(reap_once(keys, pids=scope)) == sorted(scope)
        assert sshd.wait(timeout=10) == -15  # its "sshd" got SIGTERM: the connection would close
        assert not _sleepers(30103)
        assert not psutil.pid_exists(shell) or psutil.Process(shell).status() == psutil.STATUS_ZOMBIE
        assert reap_once(keys, pids=scope) == []  # gone: nothing more to do
    finally:
        sshd.kill()
        for pid in _sleepers(30103):
            psutil.Process(pid).kill()
