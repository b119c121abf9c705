"""Inference deployments on Kubernetes (``instances.serving.KubernetesDeployments``) without a cluster.

The API server is replaced by a local HTTP stand-in (pytest-httpserver) spoken to through the official client,
as the compute backend's tests do (``tests/instances/test_kubernetes_backend.py``); the bodies the client sends
are validated strictly against the Kubernetes OpenAPI schema (``kubernetes-validate``). A real cluster adds
what the stand-in only reports: scheduling the pod, pulling the image, mounting the model claim, running the
readiness probe against ``/health`` and the Deployment controller's rollout; and the portal would reach the
Service by cluster DNS (``http://<name>.<namespace>.svc``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from instances.serving import (
    RESTART_ANNOTATION,
    DeploymentError,
    KubernetesDeployments,
    LocalDeployments,
    get_deployments,
    kubernetes_manifests,
)

NS = "apps"
NAME = "app-version-7"
IMAGE = "registry.example/gpu-portal-runtime:1.0"
DEPLOY = f"/apis/apps/v1/namespaces/{NS}/deployments"
SVC = f"/api/v1/namespaces/{NS}/services"
PODS = f"/api/v1/namespaces/{NS}/pods"
CONFLICT = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409, "reason": "AlreadyExists"}
NOT_FOUND = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"}


def deployments_for(server: HTTPServer, root: Path, **options: Any) -> KubernetesDeployments:
    api = client.ApiClient(client.Configuration(host=server.url_for("").rstrip("/")))
    return KubernetesDeployments(
        image=IMAGE,
        model_claim="app-models",
        model_root=root,
        model_subpath="apps",
        namespace=NS,
        api_client=api,
        poll_s=0.01,
        **options,
    )


def echo(status: int) -> Any:
    """Answer with the body sent, as the API server does, plus the fields it fills in."""

    def handler(request: Request) -> Response:
        body = json.loads(request.get_data() or b"{}")
        body.setdefault("metadata", {}).update(uid="0000", generation=1)
        return Response(json.dumps(body), status=status, content_type="application/json")

    return handler


def deployment_json(
    ready: int, conditions: list[dict[str, Any]] | None = None, generation: int = 1, observed: int = 1
) -> dict[str, Any]:
    body = kubernetes_manifests(
        name=NAME, namespace=NS, image=IMAGE, model_claim="app-models", model_path="apps/legal/v1"
    )[0]
    body["metadata"]["generation"] = generation
    body["status"] = {
        "observedGeneration": observed,
        "replicas": 1,
        "readyReplicas": ready,
        "conditions": conditions or [],
    }
    return body


@pytest.fixture
def export(tmp_path: Path) -> Path:
    folder = tmp_path / "legal" / "v1"
    folder.mkdir(parents=True)
    return folder


def test_start_applies_the_deployment_and_service_waits_for_a_ready_replica_and_returns_the_service_url(
    httpserver: HTTPServer, tmp_path: Path, export: Path
) -> None:
    httpserver.expect_ordered_request(DEPLOY, method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(SVC, method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(deployment_json(0))
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(deployment_json(1))
    deployments = deployments_for(httpserver, tmp_path)

    result = deployments.start(name=NAME, model_dir=export)

    httpserver.check_assertions()
    started_at = result.pop("started_at")
    assert isinstance(started_at, int) and started_at > 0
    assert result == {
        "backend": "kubernetes",
        "name": NAME,
        "namespace": NS,
        "url": f"http://{NAME}.{NS}.svc",
        "model_dir": str(export.resolve()),
        "model_claim": "app-models",
        "model_path": "apps/legal/v1",
        "image": IMAGE,
        "engine": "portal",
        "served_model": NAME,
    }
    sent = [json.loads(req.get_data()) for req, _ in httpserver.log[:2]]
    assert sent == deployments.manifests(name=NAME, model_dir=export)
    for manifest in sent:
        assert kubernetes_validate.validate(manifest, kubernetes_validate.latest_version(), strict=True)
    container = sent[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][4:6] == ["--model-dir", "/models/apps/legal/v1"]
    assert container["image"] == IMAGE
    assert sent[0]["spec"]["template"]["spec"]["volumes"] == [
        {"name": "models", "persistentVolumeClaim": {"claimName": "app-models", "readOnly": True}}
    ]
    assert "annotations" not in sent[0]["spec"]["template"]["metadata"]  # a first start rolls nothing


def test_a_retried_start_replaces_the_deployment_and_patches_the_service_on_409(
    httpserver: HTTPServer, tmp_path: Path, export: Path
) -> None:
    """A real API server answers AlreadyExists exactly so; it would also bump the generation on a changed spec."""
    httpserver.expect_ordered_request(DEPLOY, method="POST").respond_with_json(CONFLICT, status=409)
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}", method="PUT").respond_with_handler(echo(200))
    httpserver.expect_ordered_request(SVC, method="POST").respond_with_json(CONFLICT, status=409)
    httpserver.expect_ordered_request(f"{SVC}/{NAME}", method="PATCH").respond_with_handler(echo(200))
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(
        deployment_json(1, generation=2, observed=1)
    )  # the controller has not seen the new spec yet
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(
        deployment_json(1, generation=2, observed=2)
    )
    deployments = deployments_for(httpserver, tmp_path)

    result = deployments.start(name=NAME, model_dir=export)

    httpserver.check_assertions()
    assert result["url"] == f"http://{NAME}.{NS}.svc"
    requests = [req for req, _ in httpserver.log]
    assert [(r.method, r.path) for r in requests] == [
        ("POST", DEPLOY),
        ("PUT", f"{DEPLOY}/{NAME}"),
        ("POST", SVC),
        ("PATCH", f"{SVC}/{NAME}"),
        ("GET", f"{DEPLOY}/{NAME}/status"),
        ("GET", f"{DEPLOY}/{NAME}/status"),
    ]
    manifests = deployments.manifests(name=NAME, model_dir=export)
    assert json.loads(requests[1].get_data()) == manifests[0]
    assert json.loads(requests[3].get_data()) == manifests[1]
    assert requests[3].headers["Content-Type"] == "application/strategic-merge-patch+json"


def test_a_start_of_a_deployment_that_is_ready_sends_nothing(
    httpserver: HTTPServer, tmp_path: Path, export: Path
) -> None:
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(deployment_json(1))
    deployments = deployments_for(httpserver, tmp_path)
    running = {"backend": "kubernetes", "name": NAME, "namespace": NS, "url": "http://x", "started_at": 1}

    assert deployments.start(name=NAME, model_dir=export, deployment=running) is running

    httpserver.check_assertions()
    assert len(httpserver.log) == 1


def test_restarting_a_dead_deployment_rolls_new_pods(httpserver: HTTPServer, tmp_path: Path, export: Path) -> None:
    """On a cluster the new ``gpu-portal/restarted-at`` value makes the Deployment controller replace the pods."""
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(deployment_json(0))
    httpserver.expect_ordered_request(DEPLOY, method="POST").respond_with_json(CONFLICT, status=409)
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}", method="PUT").respond_with_handler(echo(200))
    httpserver.expect_ordered_request(SVC, method="POST").respond_with_json(CONFLICT, status=409)
    httpserver.expect_ordered_request(f"{SVC}/{NAME}", method="PATCH").respond_with_handler(echo(200))
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(deployment_json(1))
    deployments = deployments_for(httpserver, tmp_path)
    dead = {"backend": "kubernetes", "name": NAME, "namespace": NS, "url": "http://x", "started_at": 1}

    deployments.start(name=NAME, model_dir=export, deployment=dead)

    httpserver.check_assertions()
    replaced = json.loads(httpserver.log[2][0].get_data())
    assert list(replaced["spec"]["template"]["metadata"]["annotations"]) == [RESTART_ANNOTATION]
    assert kubernetes_validate.validate(replaced, kubernetes_validate.latest_version(), strict=True)


def test_no_ready_replica_in_time_is_a_clear_error_and_the_objects_are_deleted(
    httpserver: HTTPServer, tmp_path: Path, export: Path
) -> None:
    """A real cluster reports the same conditions and waiting reasons; the timeout here is 0 s."""
    conditions = [
        {
            "type": "Available",
            "status": "False",
            "reason": "MinimumReplicasUnavailable",
            "message": "Deployment does not have minimum availability.",
        },
        {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": "ok"},
    ]
    pod = {
        "metadata": {"name": f"{NAME}-5d9c-abcde", "namespace": NS},
        "spec": {"containers": []},
        "status": {
            "phase": "Pending",
            "containerStatuses": [
                {
                    "name": "server",
                    "image": IMAGE,
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}},
                }
            ],
        },
    }
    httpserver.expect_ordered_request(DEPLOY, method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(SVC, method="POST").respond_with_handler(echo(201))
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}/status", method="GET").respond_with_json(
        deployment_json(0, conditions)
    )
    httpserver.expect_ordered_request(
        PODS, method="GET", query_string={"labelSelector": f"gpu-portal/deployment={NAME}"}
    ).respond_with_json({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [pod]})
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}", method="DELETE").respond_with_json({"kind": "Status"})
    httpserver.expect_ordered_request(f"{SVC}/{NAME}", method="DELETE").respond_with_json({"kind": "Status"})

    with pytest.raises(DeploymentError) as failed:
        deployments_for(httpserver, tmp_path, ready_timeout_s=0).start(name=NAME, model_dir=export)

    httpserver.check_assertions()
    assert str(failed.value) == (
        f"deployment {NS}/{NAME} had no ready replica within 0 s: Available=False (MinimumReplicasUnavailable: "
        f"Deployment does not have minimum availability.); pod {NAME}-5d9c-abcde: ImagePullBackOff "
        "(Back-off pulling image)"
    )


def test_stop_deletes_the_deployment_and_service_and_404_means_already_gone(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}", method="DELETE").respond_with_json({"kind": "Status"})
    httpserver.expect_ordered_request(f"{SVC}/{NAME}", method="DELETE").respond_with_json({"kind": "Status"})
    httpserver.expect_ordered_request(f"{DEPLOY}/{NAME}", method="DELETE").respond_with_json(NOT_FOUND, status=404)
    httpserver.expect_ordered_request(f"{SVC}/{NAME}", method="DELETE").respond_with_json(NOT_FOUND, status=404)
    deployments = deployments_for(httpserver, tmp_path)
    deployment = {"backend": "kubernetes", "name": NAME, "namespace": NS}

    assert deployments.stop(deployment) is True
    assert deployments.stop(deployment) is False

    httpserver.check_assertions()
    assert json.loads(httpserver.log[0][0].get_data()) == {"propagationPolicy": "Background", "gracePeriodSeconds": 30}


def test_alive_means_a_ready_replica_and_a_deleted_deployment_is_not_alive(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    status = f"{DEPLOY}/{NAME}/status"
    httpserver.expect_ordered_request(status, method="GET").respond_with_json(deployment_json(1))
    httpserver.expect_ordered_request(status, method="GET").respond_with_json(deployment_json(0))
    httpserver.expect_ordered_request(status, method="GET").respond_with_json(NOT_FOUND, status=404)
    httpserver.expect_ordered_request(status, method="GET").respond_with_json(
        {"kind": "Status", "code": 403, "reason": "Forbidden"}, status=403
    )
    deployments = deployments_for(httpserver, tmp_path)
    deployment = {"backend": "kubernetes", "name": NAME, "namespace": NS}

    assert [deployments.alive(deployment) for _ in range(3)] == [True, False, False]
    with pytest.raises(DeploymentError, match=f"reading deployment {NS}/{NAME}: 403"):
        deployments.alive(deployment)
    assert deployments.alive({"backend": "local", "name": NAME, "pid": 1}) is False  # another backend's
    assert len(httpserver.log) == 4


def test_an_export_outside_the_model_claim_or_a_bad_name_is_refused_before_any_call(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    deployments = deployments_for(httpserver, tmp_path / "claim")

    with pytest.raises(DeploymentError, match=r"is not under .*, where the claim app-models is mounted"):
        deployments.start(name=NAME, model_dir=tmp_path / "elsewhere")
    with pytest.raises(DeploymentError, match="not a DNS-1035 label"):
        deployments.start(name="App_Version_7", model_dir=tmp_path / "claim" / "x")
    assert httpserver.log == []


def test_get_deployments_builds_either_backend_without_contacting_a_cluster(tmp_path: Path) -> None:
    local = get_deployments("local", root=tmp_path, threads=2)
    k8s = get_deployments("kubernetes", image=IMAGE, model_claim="models", model_root=tmp_path, namespace="x")

    assert isinstance(local, LocalDeployments) and (local.root, local.threads) == (tmp_path, 2)
    assert isinstance(k8s, KubernetesDeployments) and (k8s.namespace, k8s.model_claim) == ("x", "models")
    with pytest.raises(DeploymentError, match="need the options 'image' and 'model_claim'"):
        get_deployments("kubernetes", image="", model_claim="", model_root=tmp_path)
    with pytest.raises(ValueError, match="unknown deployment backend 'docker'"):
        get_deployments("docker")
