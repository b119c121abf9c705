"""Kubernetes backend (instances/backends/kubernetes.py) without a cluster.

Manifests are validated in strict mode against the OpenAPI schemas shipped by ``kubernetes-validate``
(releases 1.33 and the newest it carries); the API call sequence runs against a local HTTP stand-in
(pytest-httpserver) through the official client. Each test's docstring says what a real cluster adds.
"""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

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
        {"action": "FailJob", "onExitCodes": {"containerName": "trainer", "operator": "In", "values": [64]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
    ]
    assert pod["restartPolicy"] == "Never"
    assert pod["subdomain"] == NAME
    assert pod["terminationGracePeriodSeconds"] == 600
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
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
    assert container["command"] == [
        "torchrun",
        "--nnodes=2",
        "--nproc-per-node=8",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={NAME}-0.{NAME}.{NS}.svc:29500",
        f"--rdzv-id={NAME}",
        "--max-restarts=0",
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


# --- the call sequence against a stand-in -------------------------------------------------------------------


def echo(status: int) -> Any:
    def handler(request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        body.setdefault("metadata", {})["uid"] = "0000"
        return Response(json.dumps(body), status=status, content_type="application/json")

    return handler


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
        status["conditions"].append(
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        )
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


def test_submit_status_checkpoint_and_stop_make_the_expected_calls(httpserver: HTTPServer) -> None:
    """A real cluster would also schedule the pods (device plugin, node affinity), pull the image, run
    finalizers for the Foreground delete and garbage-collect the pods; here the stand-in only answers."""
    base, batch = f"/api/v1/namespaces/{NS}", f"/apis/batch/v1/namespaces/{NS}"
    httpserver.expect_ordered_request(f"{base}/configmaps", method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(f"{base}/services", method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(f"{batch}/jobs", method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(f"{batch}/jobs/{NAME}", method="GET").respond_with_json(job_json())
    httpserver.expect_ordered_request(
        f"{base}/pods", method="GET", query_string={"labelSelector": f"gpu-portal/job={NAME}"}
    ).respond_with_json(pod_list(pod_json(0, "Running"), pod_json(1, "Running")))
    httpserver.expect_ordered_request(f"{batch}/jobs/{NAME}", method="PATCH").respond_with_json(job_json())
    httpserver.expect_ordered_request(f"{batch}/jobs/{NAME}", method="DELETE").respond_with_json(
        {"kind": "Status", "apiVersion": "v1", "status": "Success"}
    )
    httpserver.expect_ordered_request(f"{base}/services/{NAME}", method="DELETE").respond_with_json({})
    httpserver.expect_ordered_request(f"{base}/configmaps/{NAME}", method="DELETE").respond_with_json({})
    httpserver.expect_ordered_request(f"{batch}/jobs/{NAME}", method="GET").respond_with_json(
        {"kind": "Status", "apiVersion": "v1", "code": 404, "reason": "NotFound"}, status=404
    )
    backend = backend_for(httpserver)

    handle = backend.submit(gang_spec())
    running = backend.status(handle)
    notified = backend.request_checkpoint(handle)
    stopped = backend.stop(handle, grace_s=600)

    httpserver.check_assertions()
    assert handle == f"k8s:{NS}/{NAME}"
    assert (running.state, running.message) == ("running", "2 pod(s) running")
    assert notified == 1
    assert (stopped.state, stopped.message) == ("unknown", f"job {NAME} not found in {NS}")
    requests = [req for req, _ in httpserver.log]
    sent = [json.loads(r.get_data()) for r in requests[:3]]
    assert [m["kind"] for m in sent] == ["ConfigMap", "Service", "Job"]
    assert sent == backend.manifests(gang_spec())
    assert json.loads(requests[5].get_data())["metadata"]["annotations"].keys() == {
        "gpu-portal/checkpoint-requested-at"
    }
    assert requests[5].headers["Content-Type"] == "application/merge-patch+json"  # an object, not a JSON Patch
    assert json.loads(requests[6].get_data()) == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 600,
    }


def test_a_second_submit_of_the_same_attempt_creates_nothing_new(httpserver: HTTPServer) -> None:
    """A real API server answers 409 AlreadyExists exactly like this; the backend keeps the first objects."""
    conflict = {"kind": "Status", "apiVersion": "v1", "code": 409, "reason": "AlreadyExists"}
    for path in (f"/api/v1/namespaces/{NS}/configmaps", f"/api/v1/namespaces/{NS}/services"):
        httpserver.expect_request(path, method="POST").respond_with_json(conflict, status=409)
    httpserver.expect_request(f"/apis/batch/v1/namespaces/{NS}/jobs", method="POST").respond_with_json(
        conflict, status=409
    )

    assert backend_for(httpserver).submit(gang_spec()) == f"k8s:{NS}/{NAME}"


def test_a_preempted_pod_maps_to_preempted(httpserver: HTTPServer) -> None:
    """On a real cluster the scheduler or the eviction API adds the DisruptionTarget condition before
    killing the pod, and the Job controller replaces the pod without counting it (the Ignore rule)."""
    httpserver.expect_request(f"/apis/batch/v1/namespaces/{NS}/jobs/{NAME}").respond_with_json(job_json())
    httpserver.expect_request(f"/api/v1/namespaces/{NS}/pods").respond_with_json(
        pod_list(pod_json(0, "Running"), pod_json(1, "Failed", exit_code=85, disrupted=True))
    )

    status = backend_for(httpserver).status(f"k8s:{NS}/{NAME}")

    assert (status.state, status.exit_code) == ("preempted", 85)
    assert status.message == (
        f"pod {NAME}-1-abcde disrupted (PreemptionByScheduler): resume from the newest checkpoint"
    )


def test_job_and_pod_states_map_to_job_states() -> None:
    """Pure mapping of API JSON; a real cluster produces these shapes through the Job controller."""
    complete = [{"type": "Complete", "status": "True", "lastTransitionTime": "2025-01-01T01:00:00Z"}]
    failed = [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy"}]

    assert job_status_from(job_json(), [pod_json(0, "Running", exit_code=None)]).state == "pending"
    assert job_status_from(job_json(), [pod_json(0, "Failed", exit_code=85)]).state == "preempted"
    ok = job_status_from(job_json(complete), [pod_json(0, "Succeeded", exit_code=0)])
    assert (ok.state, ok.exit_code, str(ok.finished_at)) == ("succeeded", 0, "2025-01-01 01:00:00+00:00")
    bad = job_status_from(
        job_json(failed), [pod_json(0, "Failed", exit_code=64), pod_json(1, "Failed", exit_code=1)]
    )
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

    def node(
        name: str, gpus: int | None, *, product: str = "NVIDIA-H100-80GB-HBM3", **extra: Any
    ) -> dict[str, Any]:
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
