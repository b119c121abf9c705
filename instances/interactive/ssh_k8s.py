"""SSH into an instance on Kubernetes: OpenSSH's ``sshd`` in the instance's own container (the image ships
it: ``/usr/sbin/sshd``), its keys from a Secret, reachable through a NodePort Service. No Django here.

The portal (``instances.interactive.ssh``) creates the Secret ``<job object>-ssh`` before the submit
(:func:`secret_manifest`: ``authorized_keys``, the instance's Ed25519 host key, ``sshd_config``) and names it in
the spec's environment (:data:`SECRET_ENV`); the backend's ``manifests`` then calls :func:`ssh_manifests_add`,
which mounts the Secret read-only (mode 0400) at :data:`SSH_MOUNT` in the trainer container, starts ``sshd``
(its sessions given the container's PATH, so ``python`` is the image's training Python in ``ssh host cmd`` and
in logins alike) before the user's command (``sshd`` daemonizes; the command stays the container's main process, so the
container's life is the command's) and adds the Service ``<job object>-ssh`` (port 22 to :data:`SSH_PORT` of
the pod with completion index 0). A key added or revoked rewrites the Secret; the kubelet refreshes mounted
Secret files (within its sync period, about a minute) and ``sshd`` reads ``authorized_keys`` at every login.
The backend's ``stop`` deletes the SSH Service and Secret with the Job.

No forwarding of any kind (``DisableForwarding yes`` and each ``Allow…Forwarding no``, ``PermitTunnel no``,
``GatewayPorts no``; sshd_config(5)): a shell in an instance is no tunnel into the cluster's network (the
Job's NetworkPolicy, :mod:`instances.backends.k8s_network`, bounds what the pod itself reaches).
``ExposeAuthInfo yes`` gives each session the key it logged in with (``$SSH_USER_AUTH``), which
:mod:`instances.interactive.ssh_reaper` reads to end the sessions of keys taken out of ``authorized_keys``.
"""

from __future__ import annotations

from typing import Any

SECRET_ENV = "GPU_PORTAL_SSH_SECRET"  # noqa: S105 - the name of the variable naming the Secret
SSH_PORT = 2222
SSH_MOUNT = "/etc/gpu-portal-ssh"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
SSHD_CONFIG = f"""\
Port {SSH_PORT}
HostKey {SSH_MOUNT}/ssh_host_ed25519_key
AuthorizedKeysFile {SSH_MOUNT}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
DisableForwarding yes
AllowTcpForwarding no
AllowStreamLocalForwarding no
AllowAgentForwarding no
GatewayPorts no
PermitTunnel no
X11Forwarding no
PermitUserRC no
ExposeAuthInfo yes
PidFile /run/gpu-portal-sshd.pid
Subsystem sftp internal-sftp
"""


def ssh_object_name(job_object: str) -> str:
    """Name of the SSH Secret and Service of a Job object (``<name>-ssh``, within the 63-character limit)."""
    return f"{job_object[:59]}-ssh"


def secret_manifest(
    *, job_object: str, namespace: str, labels: dict[str, str], authorized_keys: str, host_key_openssh: str
) -> dict[str, Any]:
    """The Secret holding ``authorized_keys``, ``ssh_host_ed25519_key`` (OpenSSH private key format) and
    ``sshd_config``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": ssh_object_name(job_object), "namespace": namespace, "labels": labels},
        "type": "Opaque",
        "stringData": {
            "authorized_keys": authorized_keys,
            "ssh_host_ed25519_key": host_key_openssh,
            "sshd_config": SSHD_CONFIG,
        },
    }


def service_manifest(*, job_object: str, namespace: str, labels: dict[str, str], job_label: str) -> dict[str, Any]:
    """NodePort Service: port 22 to ``sshd`` of the Job's pod with completion index 0."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": ssh_object_name(job_object), "namespace": namespace, "labels": labels},
        "spec": {
            "type": "NodePort",
            "selector": {job_label: job_object, INDEX_LABEL: "0"},
            "ports": [{"name": "ssh", "port": 22, "targetPort": SSH_PORT, "protocol": "TCP"}],
        },
    }


REAPER = f"python -m instances.interactive.ssh_reaper --keys {SSH_MOUNT}/authorized_keys"


# sshd gives its sessions a PATH of its own (its compiled-in default), not the container's, so `ssh host cmd`
# would miss the image's Python: SetEnv (sshd_config(5): it overrides the default environment) hands every
# session the container's own PATH and the training Python's folder, which /etc/profile.d/gpu-portal-training.sh
# (instances/interactive/training_env.sh) puts back in front after a login shell's /etc/profile.
SSHD_ENV = '-o "SetEnv=PATH=$PATH GPU_PORTAL_TRAINING_BIN=${GPU_PORTAL_TRAINING_BIN:-}"'


def _wrap(command: list[str]) -> list[str]:
    """Start ``sshd`` (it daemonizes; sessions get the container's PATH, :data:`SSHD_ENV`) and the session
    reaper (in the background; it ends with the container), then ``exec`` the command so it stays the
    container's process."""
    script = (
        f'mkdir -p /run/sshd && /usr/sbin/sshd -f {SSH_MOUNT}/sshd_config {SSHD_ENV} && {{ {REAPER} & }} && exec "$@"'
    )
    return ["/bin/sh", "-c", script, "gpu-portal-sshd", *command]


def ssh_manifests_add(manifests: list[dict[str, Any]], *, env: dict[str, str], job_label: str) -> list[dict[str, Any]]:
    """``manifests`` (ConfigMap, Service, Job) with SSH added when ``env`` names the SSH Secret: the Job's
    trainer container gets the Secret's volume, the ``ssh`` port and ``sshd`` started before its command,
    and the SSH Service is appended. Returned unchanged otherwise (a new list; the Job dict is patched)."""
    secret = env.get(SECRET_ENV)
    if not secret:
        return manifests
    job = next(m for m in manifests if m["kind"] == "Job")
    name, namespace, labels = job["metadata"]["name"], job["metadata"]["namespace"], job["metadata"]["labels"]
    pod = job["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "ssh", "secret": {"secretName": secret, "defaultMode": 0o400}})
    container = pod["containers"][0]
    container["volumeMounts"].append({"name": "ssh", "mountPath": SSH_MOUNT, "readOnly": True})
    container["ports"].append({"name": "ssh", "containerPort": SSH_PORT, "protocol": "TCP"})
    container["command"] = _wrap(list(container["command"]))
    service = service_manifest(job_object=name, namespace=namespace, labels=labels, job_label=job_label)
    return [*manifests, service]
