"""The cluster stand-in's own semantics (tests/instances/k8s_standin.py), through the official client.

Each test names the control-plane behaviour it relies on; the backend's tests build on exactly these.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from k8s_standin import StandinCluster
from kubernetes import client
from kubernetes.client.exceptions import ApiException

NS = "train"


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("gpu-a", gpus=8)
        c.add_node("gpu-b", gpus=8)
        yield c


def job_body(
    name: str = "j", *, parallelism: int = 2, rules: list[dict[str, Any]] | None = None, backoff: int = 0, gpus: int = 8
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": parallelism,
        "parallelism": parallelism,
        "backoffLimit": backoff,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 60,
                "containers": [
                    {"name": "trainer", "image": "img:1", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
                ],
            },
        },
    }
    if rules is not None:
        spec["podFailurePolicy"] = {"rules": rules}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def apis(cluster: StandinCluster) -> tuple[Any, Any]:
    api = cluster.api_client()
    return client.BatchV1Api(api), client.CoreV1Api(api)


def test_an_indexed_job_with_parallelism_2_makes_2_pods_bound_to_2_nodes(cluster: StandinCluster) -> None:
    """Job controller (Indexed completion) + scheduler (nvidia.com/gpu fit) + kubelet (Running)."""
    batch, core = apis(cluster)

    batch.create_namespaced_job(NS, job_body())
    pods = core.list_namespaced_pod(NS, label_selector="app=j").items

    assert len(pods) == 2
    assert sorted(p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods) == ["0", "1"]
    assert sorted(p.spec.hostname for p in pods) == ["j-0", "j-1"]
    assert sorted(p.spec.node_name for p in pods) == ["gpu-a", "gpu-b"]
    assert {p.status.phase for p in pods} == {"Running"}
    assert batch.read_namespaced_job("j", NS).status.active == 2


def test_a_pod_that_fits_no_node_stays_pending_with_the_schedulers_words(cluster: StandinCluster) -> None:
    """Scheduler: Unschedulable condition and a FailedScheduling Event."""
    batch, core = apis(cluster)

    batch.create_namespaced_job(NS, job_body(parallelism=1, gpus=16))
    pod = core.list_namespaced_pod(NS).items[0]
    events = core.list_namespaced_event(NS, field_selector=f"involvedObject.name={pod.metadata.name}").items

    assert pod.status.phase == "Pending"
    assert [(e.reason, e.message) for e in events] == [
        ("FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    ]


def test_eviction_sets_disruption_target_and_honours_the_grace_period(cluster: StandinCluster) -> None:
    """Eviction API: DisruptionTarget first, SIGTERM, SIGKILL (137) only when the grace period has passed."""
    batch, core = apis(cluster)
    cluster.sigterm_exit = None  # a container that ignores SIGTERM
    batch.create_namespaced_job(NS, job_body(parallelism=1, rules=[]))
    name = core.list_namespaced_pod(NS).items[0].metadata.name

    core.create_namespaced_pod_eviction(
        name, NS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    )
    during = core.read_namespaced_pod(name, NS)
    cluster.advance(59)
    still = core.read_namespaced_pod(name, NS)
    cluster.advance(1)

    conditions = {c.type: c for c in during.status.conditions}
    assert conditions["DisruptionTarget"].status == "True"
    assert conditions["DisruptionTarget"].reason == "EvictionByEvictionAPI"
    assert during.metadata.deletion_timestamp is not None and during.status.phase == "Running"
    assert still.status.phase == "Running"
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod(name, NS)
    assert gone.value.status == 404
    failed = batch.read_namespaced_job("j", NS)
    assert [(c.type, c.reason) for c in failed.status.conditions] == [
        ("FailureTarget", "BackoffLimitExceeded"),
        ("Failed", "BackoffLimitExceeded"),
    ]


def test_pod_failure_policy_ignore_does_not_count_against_backoff_limit(cluster: StandinCluster) -> None:
    """podFailurePolicy Ignore on DisruptionTarget: the index gets a new pod, status.failed stays 0."""
    batch, core = apis(cluster)
    rules = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    batch.create_namespaced_job(NS, job_body(parallelism=1, rules=rules, backoff=0))
    first = core.list_namespaced_pod(NS).items[0].metadata.name

    core.create_namespaced_pod_eviction(
        first, NS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": first, "namespace": NS}}
    )
    job = batch.read_namespaced_job("j", NS)
    pods = core.list_namespaced_pod(NS).items

    assert job.status.failed is None and not job.status.conditions
    assert [p.metadata.name.startswith("j-0-") and p.metadata.name != first for p in pods] == [True]
    assert pods[0].status.phase == "Running"


def test_pod_failure_policy_fail_job_and_count(cluster: StandinCluster) -> None:
    """FailJob on an exit code ends the Job with the API server's message; Count uses up backoffLimit."""
    batch, core = apis(cluster)
    rules = [
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [64]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [0]}},
    ]
    batch.create_namespaced_job(NS, job_body("f", parallelism=1, rules=rules))
    batch.create_namespaced_job(NS, job_body("c", parallelism=1, rules=rules, backoff=1))
    fail_pod = cluster.pod(NS, "f-0-")["metadata"]["name"]
    count_pod = cluster.pod(NS, "c-0-")["metadata"]["name"]

    cluster.container_exit(NS, fail_pod, 64, message='{"exit_code": 64}')
    cluster.container_exit(NS, count_pod, 1)
    counted = batch.read_namespaced_job("c", NS)
    cluster.container_exit(NS, cluster.pod(NS, "c-0-")["metadata"]["name"], 1)

    failed = batch.read_namespaced_job("f", NS).status.conditions[-1]
    assert (failed.type, failed.reason) == ("Failed", "PodFailurePolicy")
    assert failed.message == (
        f"Container trainer for pod {NS}/{fail_pod} failed with exit code 64 matching FailJob rule at index 0"
    )
    terminated = core.read_namespaced_pod(fail_pod, NS).status.container_statuses[0].state.terminated
    assert (terminated.exit_code, terminated.message) == (64, '{"exit_code": 64}')
    assert (counted.status.failed, counted.status.conditions) == (1, None)
    assert batch.read_namespaced_job("c", NS).status.conditions[-1].reason == "BackoffLimitExceeded"


def test_foreground_delete_keeps_the_job_until_its_pods_are_gone(cluster: StandinCluster) -> None:
    """Garbage collector: Foreground propagation; pods get SIGTERM and their grace period."""
    batch, core = apis(cluster)
    cluster.sigterm_exit = (85, 30.0)  # the runtime needs 30 s for its final checkpoint
    batch.create_namespaced_job(NS, job_body())

    batch.delete_namespaced_job("j", NS, body={"propagationPolicy": "Foreground"})
    during = batch.read_namespaced_job("j", NS)
    cluster.advance(30)

    assert during.metadata.deletion_timestamp is not None and "foregroundDeletion" in during.metadata.finalizers
    assert len(core.list_namespaced_pod(NS).items) == 0
    with pytest.raises(ApiException) as gone:
        batch.read_namespaced_job("j", NS)
    assert gone.value.status == 404


def test_a_node_not_ready_past_the_toleration_fails_its_pods(cluster: StandinCluster) -> None:
    """Node lifecycle: NotReady -> after 300 s the taint manager deletes the pods (DisruptionTarget)."""
    batch, core = apis(cluster)
    rules = [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    batch.create_namespaced_job(NS, job_body(rules=rules))
    node = cluster.pod(NS, "j-1-")["spec"]["nodeName"]

    cluster.set_node_ready(node, False)
    cluster.advance(299)
    before = batch.read_namespaced_job("j", NS).status.conditions
    cluster.advance(1)
    after = batch.read_namespaced_job("j", NS).status.conditions

    assert before is None
    assert [(c.type, c.reason) for c in after] == [
        ("FailureTarget", "PodFailurePolicy"),
        ("Failed", "PodFailurePolicy"),
    ]
    assert "has condition DisruptionTarget matching FailJob rule at index 0" in after[-1].message
    assert core.list_namespaced_pod(NS).items == []  # FailJob terminated the healthy node's pod too


def test_bodies_are_validated_strictly_and_names_collide(cluster: StandinCluster) -> None:
    """API server validation (strict schema) -> 422; an existing name -> 409; a missing object -> 404."""
    batch, _ = apis(cluster)
    bad = job_body()
    bad["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    batch.create_namespaced_job(NS, job_body())

    # the official client refuses to send a misspelled field, so this body goes to the handler as raw bytes
    code, invalid, _ = cluster.handle(
        "POST", f"/apis/batch/v1/namespaces/{NS}/jobs", json.dumps(bad | {"metadata": {"name": "other"}}).encode()
    )
    with pytest.raises(ApiException) as conflict:
        batch.create_namespaced_job(NS, job_body())
    with pytest.raises(ApiException) as missing:
        batch.read_namespaced_job("nope", NS)

    assert (code, conflict.value.status, missing.value.status) == (422, 409, 404)
    assert (invalid["kind"], invalid["reason"]) == ("Status", "Invalid")
    assert "terminationGracePeriod" in invalid["message"]
    assert [name for kind, _, name in cluster.objects if kind == "Job"] == ["j"]


def test_pod_logs_are_served_and_resource_versions_grow(cluster: StandinCluster) -> None:
    """Pod log subresource (tailLines) and resourceVersion on every write."""
    batch, core = apis(cluster)
    batch.create_namespaced_job(NS, job_body(parallelism=1))
    pod = cluster.pod(NS, "j-0-")["metadata"]["name"]
    rv1 = int(core.read_namespaced_pod(pod, NS).metadata.resource_version)

    cluster.write_log(NS, pod, "step 1\nstep 2\nstep 3")
    cluster.container_exit(NS, pod, 0)

    assert core.read_namespaced_pod_log(pod, NS, container="trainer", tail_lines=2) == "step 2\nstep 3\n"
    assert int(core.read_namespaced_pod(pod, NS).metadata.resource_version) > rv1
    assert batch.read_namespaced_job("j", NS).status.conditions[-1].type == "Complete"


def test_marketplace_deployments_become_ready_or_say_why_not(cluster: StandinCluster, tmp_path: Any) -> None:
    """Deployment -> pods of its template (scheduler + kubelet), readyReplicas, Background delete; a bad
    image keeps the replica unready with ErrImagePull, which ``KubernetesDeployments`` reports."""
    from instances.serving.base import DeploymentError
    from instances.serving.kubernetes import KubernetesDeployments

    export = tmp_path / "legal" / "v1"
    export.mkdir(parents=True)

    def deployments(image: str) -> KubernetesDeployments:
        return KubernetesDeployments(
            image=image,
            model_claim="app-models",
            model_root=tmp_path,
            model_subpath="apps",
            namespace="apps",
            api_client=cluster.api_client(),
            poll_s=0.01,
            ready_timeout_s=0.2,
        )

    cluster.bad_images.add("registry.example/missing:1")
    started = deployments("registry.example/runtime:1").start(name="app-version-7", model_dir=export)
    phases = [p["status"]["phase"] for p in cluster.pods("apps")]
    with pytest.raises(DeploymentError) as refused:
        deployments("registry.example/missing:1").start(name="app-version-8", model_dir=export)
    stopped = deployments("registry.example/runtime:1").stop(started, grace_s=0)

    assert started["url"] == "http://app-version-7.apps.svc"
    assert phases == ["Running"]
    assert "ErrImagePull" in str(refused.value) and "app-version-8" in str(refused.value)
    assert stopped is True
    assert cluster.pods("apps") == []
    assert [k for k, ns, _ in cluster.objects if ns == "apps" and k in ("Deployment", "Service")] == []
