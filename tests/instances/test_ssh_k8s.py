"""SSH on Kubernetes: sshd in the instance's container with its keys from a Secret and a NodePort Service;
manifests validated strictly, and the whole life (Secret, submit, the command shown, a revoked key, stop) on
the cluster stand-in (tests/instances/k8s_standin.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import asyncssh
import kubernetes_validate
import pytest
from k8s_standin import StandinCluster

from instances.backends import JobSpec
from instances.backends.kubernetes import KubernetesBackend, object_name
from instances.interactive.ssh_k8s import SECRET_ENV, SSHD_CONFIG, secret_manifest, ssh_manifests_add

NS = "train"
SCHEMA_VERSIONS = ("1.33.0", kubernetes_validate.latest_version())


def interactive_spec(**env: str) -> JobSpec:
    return JobSpec(
        job_id="instance-7",
        attempt=1,
        image="registry.example/gpu-portal-runtime:1.0",
        placement=(("gpu-a", 1),),
        nproc_per_node=1,
        command=["python", "-c", "import time; time.sleep(600)"],
        env=dict(env),
    )


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("gpu-a", gpus=8)
        yield c


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_the_ssh_manifests_validate_strictly(version: str) -> None:
    backend = KubernetesBackend(namespace=NS)
    name = object_name("instance-7", 1)
    plain = backend.manifests(interactive_spec())
    with_ssh = backend.manifests(interactive_spec(**{SECRET_ENV: f"{name}-ssh"}))
    secret = secret_manifest(
        job_object=name, namespace=NS, labels={"a": "b"}, authorized_keys="ssh-ed25519 AAAA x\n", host_key_openssh="k"
    )
    for manifest in [*with_ssh, secret]:
        assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]

    assert [m["kind"] for m in plain] == ["NetworkPolicy", "ConfigMap", "Service", "Job"]  # no SSH unless asked
    assert [m["kind"] for m in with_ssh] == ["NetworkPolicy", "ConfigMap", "Service", "Job", "Service"]
    container = with_ssh[3]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == [
        "/bin/sh",
        "-c",
        "mkdir -p /run/sshd && /usr/sbin/sshd -f /etc/gpu-portal-ssh/sshd_config "
        '-o "SetEnv=PATH=$PATH GPU_PORTAL_TRAINING_BIN=${GPU_PORTAL_TRAINING_BIN:-}" && '  # the container's PATH
        '{ python -m instances.interactive.ssh_reaper --keys /etc/gpu-portal-ssh/authorized_keys & } && exec "$@"',
        "gpu-portal-sshd",
        "python",
        "-c",
        "import time; time.sleep(600)",
    ]
    assert container["volumeMounts"][-1] == {"name": "ssh", "mountPath": "/etc/gpu-portal-ssh", "readOnly": True}
    assert with_ssh[3]["spec"]["template"]["spec"]["volumes"][-1] == {
        "name": "ssh",
        "secret": {"secretName": f"{name}-ssh", "defaultMode": 0o400},
    }
    assert with_ssh[4]["spec"] == {
        "type": "NodePort",
        "selector": {"gpu-portal/job": name, "batch.kubernetes.io/job-completion-index": "0"},
        "ports": [{"name": "ssh", "port": 22, "targetPort": 2222, "protocol": "TCP"}],
    }
    config = SSHD_CONFIG.splitlines()
    assert "PasswordAuthentication no" in config
    forwarding = ("DisableForwarding yes", "AllowTcpForwarding no", "AllowStreamLocalForwarding no")
    assert {*forwarding, "AllowAgentForwarding no", "PermitTunnel no", "GatewayPorts no", "X11Forwarding no"} <= set(
        config
    )
    assert "ExposeAuthInfo yes" in config  # the reaper reads each session's key (test_ssh_reaper.py)
    allows = [line for line in config if line.startswith("Allow") and line.endswith("yes")]
    assert (allows, [line for line in config if line.startswith(("PermitTunnel", "GatewayPorts"))]) == (
        [],
        ["GatewayPorts no", "PermitTunnel no"],
    )
    assert ssh_manifests_add(plain, env={}, job_label="gpu-portal/job") == plain


def test_ssh_on_the_stand_in_secret_service_command_revocation_and_stop(
    cluster: StandinCluster,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    alice: Any,
    funded: Any,
    nodes: Any,
    fake_backend: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from instances.interactive.ssh import ssh_access, ssh_host_key, ssh_prepare
    from instances.services import LaunchSpec, instance_launch
    from instances.services import backend as boundary
    from portal.sshkeys import ssh_key_add, ssh_key_revoke

    public = (
        Ed25519PrivateKey.generate()
        .public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    key = ssh_key_add(user=alice, name="laptop", public_key=public.decode())
    inst = instance_launch(  # scheduled and "submitted" on the fake backend; the stand-in takes over below
        organization=funded,
        user=alice,
        spec=LaunchSpec(name="box", kind="interactive", gpu_type="A100-80G-SXM", gpu_count=1, command=["sleep", "1"]),
    )
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)
    settings.INSTANCES_BACKEND = "kubernetes"
    settings.INSTANCES_SSH_HOST = "gpu-a.example"

    spec = ssh_prepare(instance=inst, spec=interactive_spec())
    name = object_name("instance-7", 1)
    assert spec.env == {SECRET_ENV: f"{name}-ssh"}
    secret = cluster.objects[("Secret", NS, f"{name}-ssh")]
    assert secret["stringData"]["authorized_keys"] == f"{key.public_key} portal-user-{alice.pk}\n"
    host_key = ssh_host_key(inst.pk)
    stored = asyncssh.import_private_key(secret["stringData"]["ssh_host_ed25519_key"])  # the same key
    assert stored.private_data == host_key.private_data

    handle = backend.submit(spec)
    inst.attempts.update(handle=handle)
    type(inst).objects.filter(pk=inst.pk).update(status="running")
    inst.refresh_from_db()
    pod = cluster.pods(NS)[0]
    assert pod["status"]["phase"] == "Running"
    assert pod["spec"]["volumes"][-1]["secret"]["secretName"] == f"{name}-ssh"
    access = ssh_access(inst)
    assert access is not None
    assert (access.command, access.username, access.host_key_fingerprint) == (
        "ssh -p 30000 root@gpu-a.example",
        "root",
        host_key.get_fingerprint("sha256"),
    )

    with django_capture_on_commit_callbacks(execute=True):
        ssh_key_revoke(key=key, acting_user=alice)  # patches the Secret after commit
    assert cluster.objects[("Secret", NS, f"{name}-ssh")]["stringData"]["authorized_keys"] == ""

    assert backend.stop(handle, grace_s=5).state == "stopped"
    assert [(k, n) for k, ns, n in cluster.objects if ns == NS and k in ("Service", "Secret", "Job")] == []


def test_on_the_stand_in_every_path_that_ends_access_rewrites_the_pods_keys(
    cluster: StandinCluster,
    monkeypatch: pytest.MonkeyPatch,
    settings: Any,
    alice: Any,
    bob: Any,
    funded: Any,
    nodes: Any,
    fake_backend: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """The one reaction (``instances.interactive.access``) on Kubernetes: a share lets bob's key into the pod's
    Secret; ``user_deactivate`` takes it out after commit; a silent queryset update is caught by the sweep,
    which writes nothing when the Secret already says the same."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from instances.interactive.access import access_share_add, access_sweep
    from instances.interactive.ssh import ssh_prepare
    from instances.services import LaunchSpec, instance_launch
    from instances.services import backend as boundary
    from portal.models import User
    from portal.services import user_deactivate
    from portal.sshkeys import ssh_key_add

    def public() -> str:
        key = Ed25519PrivateKey.generate().public_key()
        return key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()

    a, b = ssh_key_add(user=alice, name="a", public_key=public()), ssh_key_add(user=bob, name="b", public_key=public())
    inst = instance_launch(
        organization=funded,
        user=alice,
        spec=LaunchSpec(name="box", kind="interactive", gpu_type="A100-80G-SXM", gpu_count=1, command=["sleep", "1"]),
    )
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)
    settings.INSTANCES_BACKEND = "kubernetes"
    handle = backend.submit(ssh_prepare(instance=inst, spec=interactive_spec()))
    inst.attempts.update(handle=handle)
    type(inst).objects.filter(pk=inst.pk).update(status="running")
    name = object_name("instance-7", 1)

    def keys() -> str:
        return str(cluster.objects[("Secret", NS, f"{name}-ssh")]["stringData"]["authorized_keys"])

    alice_line, bob_line = f"{a.public_key} portal-user-{alice.pk}\n", f"{b.public_key} portal-user-{bob.pk}\n"
    assert keys() == alice_line  # bob: not his instance
    with django_capture_on_commit_callbacks(execute=True):
        access_share_add(target=inst, email=bob.email, acting_user=alice)
    assert keys() == alice_line + bob_line
    with django_capture_on_commit_callbacks(execute=True):
        user_deactivate(user=bob, acting_user=None)
    assert keys() == alice_line
    assert access_sweep() == 0  # the Secret already follows the rule
    User.objects.filter(pk=bob.pk).update(is_active=True)  # reactivated behind the portal's back
    assert access_sweep() == 1
    assert keys() == alice_line + bob_line
    User.objects.filter(pk=bob.pk).update(is_active=False)
    assert access_sweep() == 1
    assert keys() == alice_line
