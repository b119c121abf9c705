"""JupyterLab on the Kubernetes backend: the Secret, the pod's sidecar, the Service and the per-instance Ingress
validate strictly, carry the secret only in the Secret, and are created and deleted with the Job on the cluster
stand-in."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from k8s_standin import StandinCluster

from instances.backends.base import DatasetMount, JobSpec
from instances.backends.kubernetes import KubernetesBackend, object_name

NS = "gpu"
SECRET = "f" * 64
ENV = {
    "GPU_PORTAL_JUPYTER": "1",
    "GPU_PORTAL_JUPYTER_SECRET": SECRET,
    "GPU_PORTAL_JUPYTER_INSTANCE": "7",
    "GPU_PORTAL_JUPYTER_BASE_URL": "/jupyter/7/",
    "GPU_PORTAL_JUPYTER_HOST": "i7.jupyter.example.com",
}
SPEC = JobSpec(
    job_id="instance-7",
    attempt=1,
    image="registry.example/gpu-portal-runtime:1.0",
    placement=(("gpu-node-001", 1),),
    nproc_per_node=1,
    command=["sleep", "infinity"],
    env={"OMP_NUM_THREADS": "1", **ENV},
    dataset_mounts=(DatasetMount("legal", "legal-shards", "/data/legal"),),
)
NAME = object_name("instance-7", 1)


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("gpu-node-001", gpus=8)
        yield c


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
def test_the_jupyter_manifests_validate_strictly(version: str) -> None:
    manifests = KubernetesBackend(namespace=NS).manifests(SPEC)
    assert [m["kind"] for m in manifests] == [
        "NetworkPolicy",
        "Secret",
        "ConfigMap",
        "Service",
        "Job",
        "Service",
        "Ingress",
    ]
    for manifest in manifests:
        assert kubernetes_validate.validate(manifest, version, strict=True) == version[:4]


def test_the_secret_is_only_in_the_secret_and_the_sidecar_serves_the_workspace() -> None:
    _, secret, _, _, job, service, ingress = KubernetesBackend(namespace=NS).manifests(SPEC)
    pod = job["spec"]["template"]["spec"]
    main, sidecar = pod["containers"][0], pod["initContainers"][0]

    assert secret["stringData"] == {"secret": SECRET}
    assert [str(m).count(SECRET) for m in (job, service, ingress)] == [0, 0, 0]
    assert [e["name"] for e in main["env"] if e["name"].startswith("GPU_PORTAL_JUPYTER")] == []
    assert (main["command"], main["workingDir"]) == (["sleep", "infinity"], "/workspace")
    assert (sidecar["name"], sidecar["restartPolicy"], sidecar["image"]) == ("jupyter", "Always", SPEC.image)
    assert sidecar["command"][:3] == ["python", "-m", "jupyterlab"]
    assert "--ServerApp.base_url=/jupyter/7/" in sidecar["command"]
    assert sidecar["command"][-1] == "--ServerApp.trust_xheaders=True"
    assert (
        "--ServerApp.identity_provider_class=instances.interactive.jupyter_auth.PortalIdentityProvider"
        in (sidecar["command"])
    )
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in sidecar["env"]}
    assert env["GPU_PORTAL_JUPYTER_SECRET"] == {"secretKeyRef": {"name": f"{NAME}-jupyter", "key": "secret"}}
    assert env["GPU_PORTAL_JUPYTER_INSTANCE"] == "7"
    assert sidecar["volumeMounts"] == [
        {"name": "workspace", "mountPath": "/workspace"},
        {"name": "dataset-0", "mountPath": "/workspace/data/legal", "readOnly": True},
    ]
    assert service["spec"]["selector"] == {"gpu-portal/job": NAME, "batch.kubernetes.io/job-completion-index": "0"}
    assert ingress["spec"]["rules"] == [
        {
            "host": "i7.jupyter.example.com",
            "http": {
                "paths": [
                    {
                        "path": "/jupyter/7/",
                        "pathType": "Prefix",
                        "backend": {"service": {"name": f"{NAME}-jupyter", "port": {"number": 8888}}},
                    }
                ]
            },
        }
    ]


def test_a_spec_without_jupyter_gets_no_jupyter_objects() -> None:
    plain = dataclasses.replace(SPEC, env={"OMP_NUM_THREADS": "1"})
    manifests = KubernetesBackend(namespace=NS).manifests(plain)
    assert [m["kind"] for m in manifests] == ["NetworkPolicy", "ConfigMap", "Service", "Job"]
    assert "initContainers" not in manifests[3]["spec"]["template"]["spec"]


def test_submit_creates_and_stop_deletes_the_jupyter_objects_on_the_stand_in(cluster: StandinCluster) -> None:
    """Relies on: strict validation of created bodies (Secret and Ingress included), the Indexed Job
    controller labelling pod 0 with its completion index, deletes answering 404 once an object is gone."""
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    handle = backend.submit(SPEC)
    again = backend.submit(SPEC)  # 409s are kept: nothing new
    kinds = sorted((k, n) for k, ns, n in cluster.objects if ns == NS and k not in ("Pod", "Event"))
    pod0 = cluster.pods(NS, selector=f"batch.kubernetes.io/job-completion-index=0,gpu-portal/job={NAME}")

    assert handle == again == f"k8s:{NS}/{NAME}"
    assert kinds == [
        ("ConfigMap", NAME),
        ("Ingress", f"{NAME}-jupyter"),
        ("Job", NAME),
        ("NetworkPolicy", f"{NAME}-net"),
        ("Secret", f"{NAME}-jupyter"),
        ("Service", NAME),
        ("Service", f"{NAME}-jupyter"),
    ]
    assert len(pod0) == 1  # the Jupyter Service's selector finds the pod
    assert backend.status(handle).state == "running"

    stopped = backend.stop(handle, grace_s=30)
    kept = ("Secret", "Service", "Ingress", "Job", "NetworkPolicy")
    left = [(k, n) for k, ns, n in cluster.objects if ns == NS and k in kept]
    assert (stopped.state, left) == ("stopped", [])


def test_the_portal_asks_for_jupyter_on_interactive_instances_only(
    settings: Any, alice: Any, alice_org: Any, catalog: None
) -> None:
    from instances.interactive.jupyter import jupyter_env, jupyter_secret
    from instances.models import GpuType, Instance

    settings.INSTANCES_JUPYTER_DOMAIN = "jupyter.example.com"
    gpu = GpuType.objects.get(code="cpu-local")
    inst = Instance.objects.create(organization=alice_org, name="n", kind="interactive", gpu_type=gpu, gpu_count=1)
    training = Instance.objects.create(organization=alice_org, name="t", kind="training", gpu_type=gpu, gpu_count=1)
    secret = jupyter_secret(inst)

    assert jupyter_env(inst) == {
        "GPU_PORTAL_JUPYTER": "1",
        "GPU_PORTAL_JUPYTER_SECRET": secret,
        "GPU_PORTAL_JUPYTER_INSTANCE": str(inst.pk),
        "GPU_PORTAL_JUPYTER_BASE_URL": f"/jupyter/{inst.pk}/",
        "GPU_PORTAL_JUPYTER_ACCESS_URL": f"http://127.0.0.1:8000/api/v1/runtime/instances/{inst.pk}/jupyter-access",
        "GPU_PORTAL_JUPYTER_RECHECK_S": "60",
        "GPU_PORTAL_JUPYTER_HOST": f"i{inst.pk}.jupyter.example.com",
    }
    assert len(secret) == 64 and secret == jupyter_secret(Instance.objects.get(pk=inst.pk)) != jupyter_secret(training)
    assert jupyter_env(training) == {}
