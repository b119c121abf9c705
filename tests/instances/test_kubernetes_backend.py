"""Kubernetes backend (instances/backends/kubernetes.py) without a cluster.

Manifests are validated in strict mode against the OpenAPI schemas shipped by ``kubernetes-validate``
(releases 1.33 and the newest it carries); the calls run through the official client against the cluster
stand-in (``tests/instances/k8s_standin.py``), which behaves like the control plane; the inventory's node
shapes are served by pytest-httpserver. Each test's docstring names the cluster semantics it relies on and
what a real cluster adds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from k8s_standin import StandinCluster
from kubernetes import client
from pytest_httpserver import HTTPServer

from instances.backends import DatasetMount, JobSpec, get_backend
from instances.backends.kubernetes import KubernetesBackend, job_status_from, nodes_from, object_name
from instances.scheduler import NodeView

NS = "train"
NAME = "gp-job-42-a2"
SCHEMA_VERSIONS = ("1.33.0", kubernetes_validate.latest_version())


def gang_spec(**kw: Any) -> JobSpec:
    base: dict[str, Any] = {
        "job_id": "Job_42",
        "attempt": 2,
        "image": "registry.example/gpu-portal-runtime:1.0",
        "placement": (("gpu-node-001", 8), ("gpu-node-002", 8)),
        "nproc_per_node": 8,
        "config_json": '{"max_steps": 1000}',
        "dataset_mounts": (DatasetMount("legal", "legal-shards", "/data/legal"),),
        "checkpoint_uri": "/checkpoints/job-42",
        "termination_grace_s": 600,
        "env": {"GPU_PORTAL_API": "https://portal.example"},
    }
    base.update(kw)
    return JobSpec(**base)


def backend_for(server: HTTPServer | None = None, **options: Any) -> KubernetesBackend:
    api = None
    if server is not None:
        api = client.ApiClient(client.Configuration(host=server.url_for("").rstrip("/")))
    return KubernetesBackend(namespace=NS, api_client=api, **options)


# --- manifests --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "dataset_volume": "hostPath",
            "checkpoint_pvc": "checkpoints",
            "nccl_socket_ifname": "eth0",
            "nccl_ib_hca": "mlx5_0,mlx5_1",
            "rdma_resource": "rdma/hca_shared_devices_a",
            "service_account": "trainer",
        },
    ],
)
def test_every_manifest_validates_strictly_against_the_schema(version: str, options: dict[str, Any]) -> None:
    """A real API server would also run admission (quotas, PodSecurity, the NVIDIA device plugin's
    resource) and defaulting; the schema checks field names, types and structure only."""
    for spec in (
        gang_spec(),
        gang_spec(placement=(("gpu-node-009", 2),), command=["bash", "-lc", "sleep 1"]),
    ):
        for manifest in backend_for(**options).manifests(spec):
            assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]


def test_strict_validation_would_catch_a_misspelled_field() -> None:
    job = backend_for().job_manifest(gang_spec())
    job["spec"]["template"]["spec"]["terminationGracePeriod"] = 30

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, "1.33.0", strict=True)


def test_the_job_is_an_indexed_gang_on_the_placed_nodes() -> None:
    job = backend_for(nccl_socket_ifname="eth0", nccl_ib_hca="mlx5_0").job_manifest(gang_spec())
    spec = job["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}

    assert job["metadata"]["name"] == NAME == object_name("Job_42", 2)
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [64, 87]}},
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
    assert pod["restartPolicy"] == "Never"
    assert pod["subdomain"] == NAME
    assert pod["terminationGracePeriodSeconds"] == 600
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/hostname",
                    "operator": "In",
                    "values": ["gpu-node-001", "gpu-node-002"],
                }
            ]
        }
    ]
    assert (container["terminationMessagePath"], container["terminationMessagePolicy"]) == (
        "/dev/termination-log",
        "FallbackToLogsOnError",
    )
    assert container["command"] == [
        "python",
        "-m",
        "instances.backends.local_launcher",
        "--workspace=/run/gpu-portal",
        "--termination-log=/dev/termination-log",
        "--forward-signals",
        "--",
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={NAME}-0.{NAME}.{NS}.svc:29500",
        f"--rdzv-id={NAME}",
        "--max-restarts=0",
        "-m",
        "instances.backends.rank_shim",
        "--exit-dir",
        "/run/gpu-portal/ranks",
        "-m",
        "instances.runtime",
        "--config",
        "/etc/gpu-portal/job.json",
    ]
    assert env["NCCL_SOCKET_IFNAME"] == "eth0" and env["NCCL_IB_HCA"] == "mlx5_0"
    assert env["GPU_PORTAL_API"] == "https://portal.example"
    dataset_mount = next(m for m in container["volumeMounts"] if m["mountPath"] == "/data/legal")
    assert dataset_mount["readOnly"] is True
    dataset_volume = next(v for v in pod["volumes"] if v["name"] == dataset_mount["name"])
    assert dataset_volume["persistentVolumeClaim"] == {"claimName": "legal-shards", "readOnly": True}


# --- the call sequence against the cluster stand-in (tests/instances/k8s_standin.py) ------------------------


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        for name in ("gpu-node-001", "gpu-node-002", "gpu-node-003"):
            c.add_node(name, gpus=8)
        yield c


def standin_backend(cluster: StandinCluster, **options: Any) -> KubernetesBackend:
    return KubernetesBackend(namespace=NS, api_client=cluster.api_client(), **options)


def test_submit_status_checkpoint_and_stop_on_the_stand_in(cluster: StandinCluster) -> None:
    """Relies on: strict validation of created bodies, the Indexed Job controller, the scheduler's node
    affinity, merge-patch handling, Foreground deletion with the pods' grace period. A real cluster also
    pulls the image and runs torchrun's rendezvous over the headless Service's DNS names."""
    backend = standin_backend(cluster)

    handle = backend.submit(gang_spec())
    pods = cluster.pods(NS)
    running = backend.status(handle)
    notified = backend.request_checkpoint(handle)
    annotations = cluster.job(NS, NAME)["metadata"]["annotations"]  # type: ignore[index]
    stopped = backend.stop(handle, grace_s=600)

    assert handle == f"k8s:{NS}/{NAME}"
    assert [(p["metadata"]["name"][:-6], p["spec"]["nodeName"]) for p in pods] == [
        (f"{NAME}-0", "gpu-node-001"),
        (f"{NAME}-1", "gpu-node-002"),
    ]
    assert (running.state, running.message) == ("running", "2 pod(s) running")
    assert notified == 1
    assert annotations.keys() == {"gpu-portal/checkpoint-requested-at"}
    assert (stopped.state, stopped.message) == ("stopped", f"stopped (job {NAME} deleted)")
    sent = [(method, path.rsplit("/", 1)[-1], body) for method, path, body in cluster.requests]
    assert [body["kind"] for method, _, body in sent if method == "POST"] == [
        "NetworkPolicy",
        "ConfigMap",
        "Service",
        "Job",
    ]
    assert [body for method, _, body in sent if method == "POST"] == backend.manifests(gang_spec())
    assert next(body for method, last, body in sent if method == "DELETE" and last == NAME) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 600,
    }
    assert cluster.pods(NS) == [] and cluster.job(NS, NAME) is None
    assert [k for k, ns, _ in cluster.objects if ns == NS and k in ("Service", "ConfigMap", "Job")] == []


def test_a_second_submit_of_the_same_attempt_creates_nothing_new(cluster: StandinCluster) -> None:
    """Relies on: 409 AlreadyExists for an existing name; the backend keeps the first objects."""
    backend = standin_backend(cluster)
    first = backend.submit(gang_spec())
    uid = cluster.job(NS, NAME)["metadata"]["uid"]  # type: ignore[index]

    assert backend.submit(gang_spec()) == first == f"k8s:{NS}/{NAME}"
    assert cluster.job(NS, NAME)["metadata"]["uid"] == uid  # type: ignore[index]
    assert len(cluster.pods(NS)) == 2


def test_an_evicted_pod_makes_the_attempt_preempted_not_crashed(cluster: StandinCluster) -> None:
    """Relies on: the Eviction API's DisruptionTarget, the FailJob rule on it terminating the other pod (its
    runtime saves a checkpoint and exits 85), the Failed condition naming the disrupted pod after it is gone.
    On a real cluster the scheduler's preemption or a drain adds the same condition."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec())
    victim = cluster.pod(NS, f"{NAME}-1-")["metadata"]["name"]
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod_eviction(
        victim, NS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": NS}}
    )

    status = backend.status(handle)

    assert (status.state, status.reason) == ("preempted", "evicted")
    assert status.message == f"pod {victim} disrupted (DisruptionTarget): resume from the newest checkpoint"
    assert status.details == {"pod": victim, "why": "DisruptionTarget", "node": ""}
    assert cluster.pods(NS) == []  # both pods gone; only the Job's condition remembers


def test_a_job_deleted_outside_the_portal_is_lost_not_unknown(cluster: StandinCluster) -> None:
    """Relies on: Background deletion removing the Job at once (``kubectl delete job``); 404 afterwards."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec())
    client.BatchV1Api(cluster.api_client()).delete_namespaced_job(NAME, NS, propagation_policy="Background")

    status = backend.status(handle)

    assert (status.state, status.exit_code, status.reason) == ("failed", None, "deleted")
    assert status.terminal
    assert status.message == f"job {NAME} not found in {NS}: deleted outside the portal"


@pytest.mark.parametrize("code", [64, 87])
def test_a_config_error_or_refused_resume_fails_the_job_at_once(cluster: StandinCluster, code: int) -> None:
    """Relies on: podFailurePolicy FailJob on exit codes, container exit codes and termination messages.
    The launcher (tested below with real torchrun) makes the container exit with the runtime's code."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec())
    pod = cluster.pod(NS, f"{NAME}-0-")["metadata"]["name"]

    cluster.container_exit(NS, pod, code, message=json.dumps({"exit_code": code, "ranks": [code] * 8}))
    status = backend.status(handle)

    assert (status.state, status.exit_code) == ("failed", code)
    assert status.message.endswith("; PodFailurePolicy")


def test_the_termination_message_wins_over_the_container_exit_code(cluster: StandinCluster) -> None:
    """A container whose entrypoint lost the code (exit 1) but whose launcher wrote it keeps the code."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec(placement=(("gpu-node-001", 8),)))
    pod = cluster.pod(NS, f"{NAME}-0-")["metadata"]["name"]

    cluster.container_exit(NS, pod, 1, message='{"exit_code": 64, "ranks": [64, 85]}')

    assert backend.status(handle).exit_code == 64


def test_an_oom_killed_pod_says_so(cluster: StandinCluster) -> None:
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec(placement=(("gpu-node-001", 8),)))
    pod = cluster.pod(NS, f"{NAME}-0-")["metadata"]["name"]

    cluster.container_exit(NS, pod, 137, reason="OOMKilled")
    status = backend.status(handle)

    assert (status.state, status.exit_code, status.reason, status.details) == (
        "failed",
        137,
        "oom_killed",
        {"pod": pod},
    )


def test_pending_pods_report_why_from_conditions_and_events(cluster: StandinCluster) -> None:
    """Relies on: the scheduler's Unschedulable condition and FailedScheduling Event; the kubelet's
    ErrImagePull waiting state and Failed Event."""
    backend = standin_backend(cluster)
    cluster.bad_images.add("registry.example/missing:1")
    busy = backend.submit(gang_spec(placement=(("gpu-node-001", 8),)))
    no_room = backend.submit(gang_spec(attempt=3, placement=(("gpu-node-001", 8),)))
    bad_image = backend.submit(
        gang_spec(attempt=4, image="registry.example/missing:1", placement=(("gpu-node-002", 8),))
    )

    waiting, pulling = backend.status(no_room), backend.status(bad_image)

    assert backend.status(busy).state == "running"
    assert (waiting.state, waiting.reason, waiting.details["gpus"]) == ("pending", "unschedulable", 8)
    assert waiting.details["message"] == (
        "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node affinity/selector."
    )
    assert (pulling.state, pulling.reason, pulling.details["image"]) == (
        "pending",
        "image_pull",
        "registry.example/missing:1",
    )
    assert "Failed to pull image" in pulling.details["message"]


def test_a_node_lost_mid_run_preempts_with_reason_node_lost(cluster: StandinCluster) -> None:
    """Relies on: NotReady -> taint-manager deletion after the 300 s toleration with DisruptionTarget
    (DeletionByTaintManager); a real node's kubelet would be unreachable, so no exit code is reported."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec())

    cluster.set_node_ready("gpu-node-002", False)
    cluster.advance(120)
    before = backend.status(handle)
    cluster.advance(180)
    after = backend.status(handle)

    assert before.state == "running"
    assert (after.state, after.reason) == ("preempted", "node_lost")
    assert [n.state for n in backend.inventory() if n.name == "gpu-node-002"] == ["cordoned"]


def test_logs_are_read_per_rank_and_an_unknown_rank_is_none(cluster: StandinCluster) -> None:
    """Relies on: the pod log subresource and the completion-index annotation of Indexed Job pods."""
    backend = standin_backend(cluster)
    handle = backend.submit(gang_spec())
    for index in (0, 1):
        pod = cluster.pod(NS, f"{NAME}-{index}-")["metadata"]["name"]
        cluster.write_log(NS, pod, "\n".join(f"rank {index} step {s}" for s in range(5)))

    assert backend.logs(handle, rank=0, lines=2) == ["rank 0 step 3", "rank 0 step 4"]
    assert backend.logs(handle, rank=1, lines=1) == ["rank 1 step 4"]
    assert backend.logs(handle, rank=2) is None


def test_the_pod_command_keeps_the_runtime_exit_code_under_torchrun(tmp_path: Path) -> None:
    """The container's argv from the manifest, run here with real torchrun (2 local ranks, one node): an
    invalid runtime config exits 64 in each rank; torchrun alone would exit 1. A real pod runs the same argv
    with the config mounted from the ConfigMap and /dev/termination-log read by the kubelet."""
    backend = backend_for()
    argv = backend.job_manifest(gang_spec(placement=(("n", 2),), nproc_per_node=2))["spec"]["template"]["spec"][
        "containers"
    ][0]["command"]
    (tmp_path / "job.json").write_text('{"max_steps": "not a number"}')
    termination = tmp_path / "termination-log"
    replace = {
        "/etc/gpu-portal": str(tmp_path),
        "/run/gpu-portal": str(tmp_path / "ws"),
        "/dev/termination-log": str(termination),
        f"{NAME}-0.{NAME}.{NS}.svc:29500": "127.0.0.1:0",
        "--rdzv-backend=c10d": "--standalone",
    }
    local: list[str] = []
    for arg in argv:
        for old, new in replace.items():
            arg = arg.replace(old, new)
        if not arg.startswith("--rdzv-endpoint") and not arg.startswith("--rdzv-id"):
            local.append(arg)
    local[0] = sys.executable
    local[local.index("torchrun")] = str(Path(sys.executable).with_name("torchrun"))

    done = subprocess.run(local, capture_output=True, text=True, timeout=300, check=False)

    assert done.returncode == 64, done.stderr[-2000:]
    assert json.loads(termination.read_text()) == {"exit_code": 64, "ranks": [64, 64]}


def job_json(conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": []}}},
        "status": {"startTime": "2025-01-01T00:00:00Z", "conditions": conditions or []},
    }


def pod_json(i: int, phase: str, *, exit_code: int | None = None, disrupted: bool = False) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": []}
    if disrupted:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"})
    if exit_code is not None:
        status["containerStatuses"] = [
            {
                "name": "trainer",
                "image": "x",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code}},
            }
        ]
    return {
        "metadata": {"name": f"{NAME}-{i}-abcde", "namespace": NS},
        "spec": {"containers": []},
        "status": status,
    }


def pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": list(pods)}


def test_job_and_pod_states_map_to_job_states() -> None:
    """Pure mapping of API JSON; a real cluster produces these shapes through the Job controller."""
    complete = [{"type": "Complete", "status": "True", "lastTransitionTime": "2025-01-01T01:00:00Z"}]
    failed = [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy"}]

    assert job_status_from(job_json(), [pod_json(0, "Running", exit_code=None)]).state == "pending"
    assert job_status_from(job_json(), [pod_json(0, "Running"), pod_json(1, "Running")]).state == "running"
    assert job_status_from(job_json(failed), [pod_json(0, "Failed", exit_code=85)]).state == "preempted"
    disrupted = job_status_from(
        job_json(failed), [pod_json(0, "Failed", exit_code=1), pod_json(1, "Failed", exit_code=85, disrupted=True)]
    )
    assert (disrupted.state, disrupted.exit_code, disrupted.reason) == ("preempted", 85, "evicted")
    assert disrupted.message == (
        f"pod {NAME}-1-abcde disrupted (PreemptionByScheduler): resume from the newest checkpoint"
    )
    mixed = job_status_from(job_json(failed), [pod_json(0, "Failed", exit_code=85), pod_json(1, "Failed", exit_code=1)])
    assert (mixed.state, mixed.exit_code) == ("failed", 1)  # a crash beats the peer it took down
    target = [{"type": "FailureTarget", "status": "True", "reason": "PodFailurePolicy", "message": "m"}]
    assert (job_status_from(job_json(target), [pod_json(0, "Running")]).state) == "running"
    ok = job_status_from(job_json(complete), [pod_json(0, "Succeeded", exit_code=0)])
    assert (ok.state, ok.exit_code, str(ok.finished_at)) == ("succeeded", 0, "2025-01-01 01:00:00+00:00")
    bad = job_status_from(job_json(failed), [pod_json(0, "Failed", exit_code=64), pod_json(1, "Failed", exit_code=1)])
    assert (bad.state, bad.exit_code, bad.message) == (
        "failed",
        64,
        "invalid runtime config: nothing trained (not retried); PodFailurePolicy",
    )
    crash = job_status_from(job_json(failed), [pod_json(0, "Failed", exit_code=1)])
    assert (crash.state, crash.exit_code) == ("failed", 1)


def test_inventory_reads_gpu_nodes_types_blocks_and_cordons(httpserver: HTTPServer) -> None:
    """A real cluster's nodes carry many more labels and conditions; GPU Feature Discovery sets the
    product label and the device plugin the allocatable count, which is all this reads."""

    def node(name: str, gpus: int | None, *, product: str = "NVIDIA-H100-80GB-HBM3", **extra: Any) -> dict[str, Any]:
        labels = {"nvidia.com/gpu.product": product, **extra.pop("labels", {})}
        alloc = {"cpu": "96"} | ({"nvidia.com/gpu": str(gpus)} if gpus is not None else {})
        return {
            "metadata": {"name": name, "labels": labels, "annotations": extra.pop("annotations", {})},
            "spec": extra.pop("spec", {}),
            "status": {
                "allocatable": alloc,
                "conditions": [{"type": "Ready", "status": extra.pop("ready", "True")}],
            },
        }

    nodes = {
        "apiVersion": "v1",
        "kind": "NodeList",
        "metadata": {},
        "items": [
            node(
                "h-1",
                8,
                labels={"topology.gpu-portal.io/block": "rack-1", "topology.kubernetes.io/zone": "z"},
            ),
            node("h-2", 8, labels={"topology.kubernetes.io/zone": "zone-a"}),
            node("h-3", 8, spec={"unschedulable": True}),
            node("h-4", 8, spec={"unschedulable": True}, annotations={"gpu-portal/draining": "true"}),
            node("h-5", 8, ready="False"),
            node("l-1", 4, product="NVIDIA-L40S"),
            node("x-1", 2, product="NVIDIA-B200"),
            node("cpu-only", None),
        ],
    }
    pods = pod_list(
        {"metadata": {"name": "a"}, "spec": {"nodeName": "h-1", "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}, "status": {"phase": "Running"}},  # noqa: E501 - one pod per line reads best
        {"metadata": {"name": "b"}, "spec": {"nodeName": "l-1", "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Pending"}},  # noqa: E501
    )  # fmt: skip
    httpserver.expect_request("/api/v1/nodes").respond_with_json(nodes)
    httpserver.expect_request(
        "/api/v1/pods", query_string={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
    ).respond_with_json(pods)

    inventory = backend_for(httpserver).inventory()

    assert inventory == [
        NodeView("h-1", "H100-80G-SXM", 8, 5, "rack-1", "ready"),
        NodeView("h-2", "H100-80G-SXM", 8, 8, "zone-a", "ready"),
        NodeView("h-3", "H100-80G-SXM", 8, 8, "default", "cordoned"),
        NodeView("h-4", "H100-80G-SXM", 8, 8, "default", "draining"),
        NodeView("h-5", "H100-80G-SXM", 8, 8, "default", "cordoned"),
        NodeView("l-1", "L40S-48G", 4, 3, "default", "ready"),
        NodeView("x-1", "NVIDIA-B200", 2, 2, "default", "ready"),
    ]
    assert nodes_from(nodes, pod_list(), ("no-such-label",), {})[0].gpu_type == "NVIDIA-H100-80GB-HBM3"


def test_get_backend_builds_a_kubernetes_backend_without_contacting_a_cluster() -> None:
    backend = get_backend("kubernetes", namespace="x", dataset_volume="hostPath")

    assert isinstance(backend, KubernetesBackend)
    assert backend.namespace == "x"


def test_the_pod_launcher_passes_the_kubelets_sigterm_on_and_reports_the_code(tmp_path: Path) -> None:
    """The kubelet signals only the container's first process; the launcher (``--forward-signals``) passes
    SIGTERM to its command (torchrun passes it to the ranks), whose exit code reaches the termination log."""
    import signal
    import time

    ready = tmp_path / "ready"
    child = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(85))\n"
        f"pathlib.Path({str(ready)!r}).write_text('up')\n"
        "time.sleep(120)\n"
    )
    termination = tmp_path / "termination-log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "instances.backends.local_launcher",
            f"--workspace={tmp_path / 'ws'}",
            f"--termination-log={termination}",
            "--forward-signals",
            "--",
            sys.executable,
            "-c",
            child,
        ]
    )
    for _ in range(600):  # wait for the child's handler, not for time to pass
        if ready.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)

    assert proc.wait(timeout=60) == 85
    assert json.loads(termination.read_text()) == {"exit_code": 85, "ranks": []}


def test_logs_of_an_unreachable_cluster_are_a_backend_error() -> None:
    from instances.backends.base import BackendError

    backend = KubernetesBackend(
        namespace=NS, api_client=client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    )  # discard port: nothing listens

    with pytest.raises(BackendError, match=f"reading the log of {NAME} rank 0"):
        backend.logs(f"k8s:{NS}/{NAME}", rank=0)
