"""Each Job's NetworkPolicy on Kubernetes (``instances.backends.k8s_network``): validated strictly like the other
manifests, created before the Job and deleted with it on the cluster stand-in (tests/instances/k8s_standin.py,
which stores and validates NetworkPolicies but, having no network plugin, cannot enforce them), and read by a
small evaluator of NetworkPolicy's documented semantics to show what an instance's pod reaches: its own Job's
pods, DNS, the portal's web port and the internet; never another instance's pod or Service, the portal's
database, the cluster's API server or the cloud metadata address."""

from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from k8s_standin import StandinCluster

from instances.backends import JobSpec
from instances.backends.base import BackendError
from instances.backends.kubernetes import KubernetesBackend, object_name
from instances.interactive.ssh_k8s import SECRET_ENV as SSH_SECRET_ENV

NS = "train"
NAME = object_name("instance-7", 1)
SPEC = JobSpec(
    job_id="instance-7",
    attempt=1,
    image="registry.example/gpu-portal-runtime:1.0",
    placement=(("gpu-a", 1),),
    nproc_per_node=1,
    command=["sleep", "infinity"],
    env={
        "GPU_PORTAL_JUPYTER": "1",
        "GPU_PORTAL_JUPYTER_SECRET": "s" * 64,
        "GPU_PORTAL_JUPYTER_INSTANCE": "7",
        "GPU_PORTAL_JUPYTER_BASE_URL": "/jupyter/7/",
        SSH_SECRET_ENV: f"{NAME}-ssh",
    },
)
TRAINING = dataclasses.replace(SPEC, job_id="job-3", env={})


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("gpu-a", gpus=8)
        yield c


def _policy(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    (policy,) = [m for m in manifests if m["kind"] == "NetworkPolicy"]
    return policy


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
def test_every_job_gets_a_policy_that_validates_strictly(version: str) -> None:
    for spec in (SPEC, TRAINING):
        manifests = KubernetesBackend(namespace=NS).manifests(spec)
        assert manifests[0]["kind"] == "NetworkPolicy"  # created first: no pod runs without it
        for manifest in manifests:
            assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]


def test_the_policy_of_an_interactive_instance_says_exactly_this() -> None:
    policy = _policy(KubernetesBackend(namespace=NS).manifests(SPEC))
    own = {"podSelector": {"matchLabels": {"gpu-portal/job": NAME}}}
    portal = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "gpu-portal"}}}
    assert policy["metadata"]["name"] == f"{NAME}-net"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"gpu-portal/job": NAME}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [
            {"from": [own]},
            {
                "from": [
                    portal,
                    {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}},
                ],
                "ports": [{"protocol": "TCP", "port": 8888}],
            },
            {"ports": [{"protocol": "TCP", "port": 2222}]},
        ],
        "egress": [
            {"to": [own]},
            {
                "to": [
                    {
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
            },
            {"to": [portal], "ports": [{"protocol": "TCP", "port": 8000}]},
            {
                "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}],
                "ports": [{"protocol": "TCP", "port": 80}, {"protocol": "TCP", "port": 443}],
            },
            {
                "to": [
                    {
                        "ipBlock": {
                            "cidr": "0.0.0.0/0",
                            "except": [
                                "10.0.0.0/8",
                                "172.16.0.0/12",
                                "192.168.0.0/16",
                                "100.64.0.0/10",
                                "169.254.0.0/16",
                                "127.0.0.0/8",
                            ],
                        }
                    },
                    {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10", "::1/128"]}},
                ]
            },
        ],
    }
    # A training job has no Jupyter or SSH: nobody outside its Job reaches its pods.
    assert _policy(KubernetesBackend(namespace=NS).manifests(TRAINING))["spec"]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": {"gpu-portal/job": object_name("job-3", 1)}}}]}
    ]


# --- what the pod reaches: NetworkPolicy's rules (Kubernetes docs, "Network Policies") over a model cluster --
@dataclasses.dataclass(frozen=True)
class Peer:
    """An address in the model cluster: a pod (namespace, labels) or something off the pod network."""

    ip: str
    namespace: str | None = None
    labels: tuple[tuple[str, str], ...] = ()


NAMESPACE_LABELS = {
    NS: {"kubernetes.io/metadata.name": NS},
    "kube-system": {"kubernetes.io/metadata.name": "kube-system"},
    "ingress-nginx": {"kubernetes.io/metadata.name": "ingress-nginx"},
}


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(rule_peer: dict[str, Any], peer: Peer, policy_ns: str) -> bool:
    if "ipBlock" in rule_peer:  # ipBlock: cluster-external addresses (pod IPs are in the denied ranges here)
        block = rule_peer["ipBlock"]
        ip = ipaddress.ip_address(peer.ip)
        net = ipaddress.ip_network(block["cidr"])
        return (
            ip.version == net.version
            and ip in net
            and not any(
                ip in ipaddress.ip_network(c)
                for c in block.get("except", [])
                if ipaddress.ip_network(c).version == ip.version
            )
        )
    if peer.namespace is None:
        return False
    if "namespaceSelector" in rule_peer:
        if not _matches(rule_peer["namespaceSelector"], NAMESPACE_LABELS.get(peer.namespace, {})):
            return False
    elif peer.namespace != policy_ns:
        return False
    return _matches(rule_peer.get("podSelector", {}), dict(peer.labels))


def egress_allowed(policy: dict[str, Any], to: Peer, port: int, protocol: str = "TCP") -> bool:
    for rule in policy["spec"]["egress"]:
        ports = rule.get("ports")
        if ports and not any(p["port"] == port and p["protocol"] == protocol for p in ports):
            continue
        if "to" not in rule or any(_peer_matches(p, to, policy["metadata"]["namespace"]) for p in rule["to"]):
            return True
    return False


def ingress_allowed(policy: dict[str, Any], source: Peer, port: int) -> bool:
    for rule in policy["spec"]["ingress"]:
        ports = rule.get("ports")
        if ports and not any(p["port"] == port for p in ports):
            continue
        if "from" not in rule or any(_peer_matches(p, source, policy["metadata"]["namespace"]) for p in rule["from"]):
            return True
    return False


def test_an_instance_reaches_its_own_job_dns_the_portal_and_the_internet_and_nothing_else() -> None:
    policy = _policy(KubernetesBackend(namespace=NS).manifests(SPEC))
    rank1 = Peer("10.244.1.7", NS, (("gpu-portal/job", NAME),))
    other = Peer("10.244.2.9", NS, (("gpu-portal/job", object_name("instance-8", 1)),))
    other_service = Peer("10.96.44.12")  # a ClusterIP: not a pod, in the private range
    portal_web = Peer("10.244.3.2", NS, (("app.kubernetes.io/name", "gpu-portal"),))
    database = Peer("10.244.3.3", NS, (("app.kubernetes.io/name", "postgresql"),))
    redis = Peer("10.244.3.4", NS, (("app.kubernetes.io/name", "redis"),))
    api_server = Peer("10.96.0.1")
    node = Peer("192.168.10.21")
    metadata = Peer("169.254.169.254")
    dns = Peer("10.244.0.10", "kube-system", (("k8s-app", "kube-dns"),))
    internet, internet6 = Peer("151.101.0.223"), Peer("2a04:4e42::223")

    assert egress_allowed(policy, rank1, 29500) and egress_allowed(policy, rank1, 40123)  # rendezvous, NCCL
    assert egress_allowed(policy, dns, 53, "UDP") and egress_allowed(policy, dns, 53)
    assert egress_allowed(policy, portal_web, 8000)  # runtime callbacks, JupyterLab's re-check
    assert egress_allowed(policy, internet, 443) and egress_allowed(policy, internet6, 443)
    for where, port in (
        (other, 8888),  # another instance's JupyterLab
        (other, 2222),  # its sshd
        (other, 29500),  # its rendezvous
        (other_service, 8888),
        (portal_web, 5432),  # the portal's pods on any other port
        (database, 5432),
        (redis, 6379),
        (api_server, 443),
        (node, 10250),  # the kubelet
        (metadata, 80),
        (dns, 8053),
    ):
        assert not egress_allowed(policy, where, port), (where, port)

    controller = Peer("10.244.4.2", "ingress-nginx", (("app", "ingress-nginx"),))
    assert egress_allowed(policy, controller, 443)  # a SITE_URL through the cluster's own load balancer
    assert not egress_allowed(policy, controller, 10254)  # not the controller's metrics or admin ports

    # Into the instance: its Job's pods anywhere; JupyterLab from the portal and the Ingress controller; sshd
    # from anywhere (its NodePort); another instance's pod only at sshd (keys still guard it) — and that pod's
    # own egress policy refuses it anyway (above).
    assert ingress_allowed(policy, rank1, 29500)
    assert ingress_allowed(policy, portal_web, 8888) and ingress_allowed(policy, controller, 8888)
    assert ingress_allowed(policy, internet, 2222)
    assert not ingress_allowed(policy, other, 8888) and not ingress_allowed(policy, other, 29500)
    assert not ingress_allowed(policy, portal_web, 29500) and not ingress_allowed(policy, internet, 8888)


def test_the_policy_follows_the_backends_options_and_refuses_unknown_ones() -> None:
    custom = KubernetesBackend(
        namespace=NS,
        network_policy={
            "portal_pod_labels": {"app": "portal-web"},
            "portal_namespace_labels": {"kubernetes.io/metadata.name": "portal"},
            "portal_port": 8080,
            "egress_internet": False,
        },
    )
    egress = _policy(custom.manifests(SPEC))["spec"]["egress"]
    assert egress[2] == {
        "to": [
            {
                "podSelector": {"matchLabels": {"app": "portal-web"}},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "portal"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 8080}],
    }
    assert len(egress) == 4  # no internet
    off = KubernetesBackend(namespace=NS, network_policy=False).manifests(SPEC)
    assert "NetworkPolicy" not in [m["kind"] for m in off]
    with pytest.raises(BackendError, match=r"network_policy: .*unexpected keyword argument 'portal_prot'"):
        KubernetesBackend(namespace=NS, network_policy={"portal_prot": 1})


def test_the_policy_is_created_before_the_job_and_deleted_with_it_on_the_stand_in(cluster: StandinCluster) -> None:
    """Relies on: strict validation of every created body (the NetworkPolicy included), the request log."""
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    handle = backend.submit(SPEC)
    created = [body["kind"] for method, _, body in cluster.requests if method == "POST"]
    assert created.index("NetworkPolicy") < created.index("Job")
    stored = cluster.objects[("NetworkPolicy", NS, f"{NAME}-net")]
    assert stored["spec"] == _policy(backend.manifests(SPEC))["spec"]
    assert backend.submit(SPEC) == handle  # a second submit: 409 kept, nothing new

    backend.stop(handle, grace_s=30)
    left = sorted(k for k, ns, n in cluster.objects if ns == NS and k not in ("Pod", "Event"))
    assert left == []
    assert ("NetworkPolicy", NS, f"{NAME}-net") not in cluster.objects
