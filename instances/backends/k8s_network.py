"""One NetworkPolicy per Job (per instance attempt) on Kubernetes: an instance's pods reach neither other
instances' pods and services nor the portal's internals (database, broker, workers, the cluster's API server,
cloud metadata), whatever their users run. No Django here; used by :mod:`instances.backends.kubernetes`
(created before the Job, so no pod ever runs without it; deleted with the Job).

The policy ``<job object>-net`` selects the Job's pods (``gpu-portal/job=<name>``) for both directions; what it
does not allow is dropped (NetworkPolicy semantics: once a pod is selected for a direction, only the listed
peers are allowed in that direction; Kubernetes docs, "Network Policies").

Ingress (to the instance's pods):

* from the same Job's pods, any port (torchrun's rendezvous, NCCL between ranks);
* from the portal's pods (``portal_pod_labels``) and the Ingress controller's namespace
  (``ingress_namespace_labels``) to JupyterLab's port, when the Job has a Jupyter sidecar (the portal's status
  probe and re-check push, users through the Ingress);
* from anywhere to sshd's port, when the Job has SSH (users through the NodePort; the keys are the guard).

Egress (from the instance's pods):

* to the same Job's pods, any port;
* to the cluster DNS (``kube-system`` pods labelled ``k8s-app=kube-dns``), port 53 UDP and TCP;
* to the portal's pods on ``portal_port`` (the runtime's callbacks, JupyterLab's access re-check);
* to the Ingress controller's pods on 80 and 443 (a ``SITE_URL`` that resolves to the cluster's own load
  balancer reaches the portal through them; every instance's JupyterLab is public behind them anyway);
* with ``egress_internet`` (default on: images, pip, model hubs), to every address except
  ``egress_denied_cidrs`` — the private, carrier-grade NAT, link-local (cloud metadata: 169.254.169.254) and
  loopback ranges, where other pods, Services' cluster IPs, nodes and the portal's internals live.

Enforcement is the cluster's network plugin's (Calico, Cilium, …); a cluster whose plugin ignores
NetworkPolicy (e.g. plain flannel) accepts the object and enforces nothing — run one that enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

NAME_SUFFIX = "-net"
# RFC 1918 private, RFC 6598 shared (CGNAT), RFC 3927 link-local (cloud metadata), loopback; IPv6 ULA,
# link-local, loopback (RFC 4193, RFC 4291).
DENIED_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8")
DENIED_V6 = ("fc00::/7", "fe80::/10", "::1/128")


@dataclass(frozen=True, slots=True)
class NetworkOptions:
    """What the policy allows besides the Job's own pods (see the module docstring). ``portal_namespace_labels``:
    the portal's namespace when it is not the Jobs' one (None: the same namespace)."""

    enabled: bool = True
    portal_pod_labels: dict[str, str] = field(default_factory=lambda: {"app.kubernetes.io/name": "gpu-portal"})
    portal_namespace_labels: dict[str, str] | None = None
    portal_port: int = 8000
    ingress_namespace_labels: dict[str, str] = field(
        default_factory=lambda: {"kubernetes.io/metadata.name": "ingress-nginx"}
    )
    egress_internet: bool = True
    egress_denied_cidrs: tuple[str, ...] = DENIED_V4 + DENIED_V6


def network_policy_name(job_object: str) -> str:
    """``<job object>-net``."""
    return f"{job_object}{NAME_SUFFIX}"


def _portal_peer(options: NetworkOptions) -> dict[str, Any]:
    peer: dict[str, Any] = {"podSelector": {"matchLabels": dict(options.portal_pod_labels)}}
    if options.portal_namespace_labels is not None:
        peer["namespaceSelector"] = {"matchLabels": dict(options.portal_namespace_labels)}
    return peer


def network_policy_manifest(
    *,
    job_object: str,
    namespace: str,
    labels: dict[str, str],
    job_label: str,
    options: NetworkOptions,
    jupyter_port: int | None = None,
    ssh_port: int | None = None,
) -> dict[str, Any]:
    """The NetworkPolicy of Job object ``job_object`` (see the module docstring); ``jupyter_port`` /
    ``ssh_port``: the ports of its Jupyter sidecar and sshd, None when it has none."""
    own = {"podSelector": {"matchLabels": {job_label: job_object}}}
    ingress: list[dict[str, Any]] = [{"from": [own]}]
    if jupyter_port is not None:
        controller = {"namespaceSelector": {"matchLabels": dict(options.ingress_namespace_labels)}}
        ingress.append(
            {"from": [_portal_peer(options), controller], "ports": [{"protocol": "TCP", "port": jupyter_port}]}
        )
    if ssh_port is not None:
        ingress.append({"ports": [{"protocol": "TCP", "port": ssh_port}]})  # no "from": any source
    dns = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
    }
    egress: list[dict[str, Any]] = [
        {"to": [own]},
        {"to": [dns], "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]},
        {"to": [_portal_peer(options)], "ports": [{"protocol": "TCP", "port": options.portal_port}]},
        {
            "to": [{"namespaceSelector": {"matchLabels": dict(options.ingress_namespace_labels)}}],
            "ports": [{"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 443}],
        },
    ]
    if options.egress_internet:
        v4 = [c for c in options.egress_denied_cidrs if ":" not in c]
        v6 = [c for c in options.egress_denied_cidrs if ":" in c]
        egress.append(
            {
                "to": [
                    {"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}},
                    {"ipBlock": {"cidr": "::/0", "except": v6}},
                ]
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": network_policy_name(job_object), "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "podSelector": {"matchLabels": {job_label: job_object}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": ingress,
            "egress": egress,
        },
    }


def network_policy_add(
    manifests: list[dict[str, Any]], *, job_label: str, options: NetworkOptions, jupyter_port: int, ssh_port: int
) -> list[dict[str, Any]]:
    """``manifests`` with the Job's NetworkPolicy first (unchanged when ``options.enabled`` is off). The Jupyter
    and SSH rules are added when the Job's pod runs them (a ``jupyter`` init container; an ``ssh`` port)."""
    if not options.enabled:
        return manifests
    job = next(m for m in manifests if m["kind"] == "Job")
    meta, pod = job["metadata"], job["spec"]["template"]["spec"]
    has_jupyter = any(c.get("name") == "jupyter" for c in pod.get("initContainers", []))
    has_ssh = any(p.get("name") == "ssh" for c in pod["containers"] for p in c.get("ports", []))
    policy = network_policy_manifest(
        job_object=meta["name"],
        namespace=meta["namespace"],
        labels={k: v for k, v in meta.get("labels", {}).items() if k != "app.kubernetes.io/component"},
        job_label=job_label,
        options=options,
        jupyter_port=jupyter_port if has_jupyter else None,
        ssh_port=ssh_port if has_ssh else None,
    )
    return [policy, *manifests]
