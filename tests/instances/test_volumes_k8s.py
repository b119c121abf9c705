"""Persistent volumes on Kubernetes: the PersistentVolumeClaim validates strictly against the schema, and on
the cluster stand-in the claim is created before the Job, the pod mounts it read-write and runs, a pod naming
a missing claim stays Pending, and deleting the volume deletes the claim."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
from k8s_standin import StandinCluster
from kubernetes import client

from instances.backends import JobSpec
from instances.backends.base import VolumeMount
from instances.backends.k8s_volumes import claim_delete, claim_name, pvc_manifest
from instances.backends.kubernetes import KubernetesBackend

NS = "train"
VOLUME = VolumeMount("data", claim_name(7), "/volumes/data", 25)


def spec(**kw: Any) -> JobSpec:
    base: dict[str, Any] = {
        "job_id": "instance-9",
        "attempt": 1,
        "image": "registry.example/dev:1",
        "placement": (("gpu-a", 1),),
        "nproc_per_node": 1,
        "command": ["sleep", "infinity"],
        "volume_mounts": (VOLUME,),
    }
    base.update(kw)
    return JobSpec(**base)


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("gpu-a", gpus=8)
        yield c


@pytest.mark.parametrize("version", ["1.33.0", kubernetes_validate.latest_version()])
def test_the_claim_and_the_job_mounting_it_validate_strictly(version: str) -> None:
    claim = pvc_manifest(VOLUME, NS, "fast-ssd")
    assert kubernetes_validate.validate(claim, version, strict=True) == version[:4]
    assert claim["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "25G"}},
        "volumeMode": "Filesystem",
        "storageClassName": "fast-ssd",
    }
    job = KubernetesBackend(namespace=NS).job_manifest(spec())
    assert kubernetes_validate.validate(job, version, strict=True) == version[:4]
    pod = job["spec"]["template"]["spec"]
    assert {"name": "volume-0", "persistentVolumeClaim": {"claimName": "gpu-portal-vol-7"}} in pod["volumes"]
    assert {"name": "volume-0", "mountPath": "/volumes/data"} in pod["containers"][0]["volumeMounts"]
    claim["spec"]["accesModes"] = ["ReadWriteOnce"]  # a misspelled field is caught
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(claim, version, strict=True)


def test_on_the_stand_in_the_claim_is_made_and_the_pod_mounts_it_and_runs(cluster: StandinCluster) -> None:
    cluster.require_claims = True  # the pod runs only because the backend made its claim first
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    handle = backend.submit(spec())
    core = client.CoreV1Api(cluster.api_client())
    claim = core.read_namespaced_persistent_volume_claim("gpu-portal-vol-7", NS)
    assert (claim.spec.access_modes, claim.spec.resources.requests, claim.status.phase) == (
        ["ReadWriteOnce"],
        {"storage": "25G"},
        "Bound",
    )
    (pod,) = cluster.pods(NS)
    assert pod["status"]["phase"] == "Running"
    assert {"name": "volume-0", "persistentVolumeClaim": {"claimName": "gpu-portal-vol-7"}} in pod["spec"]["volumes"]
    assert backend.status(handle).state == "running"
    assert backend.submit(spec()) == handle  # a second submit keeps the claim (409) and creates nothing
    backend.stop(handle, grace_s=0)
    assert core.read_namespaced_persistent_volume_claim("gpu-portal-vol-7", NS).status.phase == "Bound"  # data kept
    assert claim_delete(core, NS, "gpu-portal-vol-7") is True
    assert claim_delete(core, NS, "gpu-portal-vol-7") is False
    assert core.list_namespaced_persistent_volume_claim(NS).items == []


def test_a_pod_naming_a_missing_claim_stays_pending(cluster: StandinCluster) -> None:
    cluster.require_claims = True
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    handle = backend.submit(spec())
    claim_delete(client.CoreV1Api(cluster.api_client()), NS, "gpu-portal-vol-7")
    job = backend.job_manifest(spec(job_id="instance-10"))
    client.BatchV1Api(cluster.api_client()).create_namespaced_job(NS, job)
    pending = [p for p in cluster.pods(NS) if p["metadata"]["name"].startswith(job["metadata"]["name"])]
    assert [p["status"]["phase"] for p in pending] == ["Pending"]
    assert pending[0]["status"]["conditions"][-1]["message"] == 'persistentvolumeclaim "gpu-portal-vol-7" not found'
    assert backend.status(handle).state == "running"


def test_deleting_a_volume_on_kubernetes_deletes_its_claim(
    cluster: StandinCluster,
    settings: Any,
    alice: Any,
    alice_org: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances.interactive.volumes import volume_create, volume_delete
    from instances.services import backend as boundary

    settings.INSTANCES_BACKEND = "kubernetes"
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)
    volume = volume_create(organization=alice_org, user=alice, name="data", size_gb=3)
    core = client.CoreV1Api(cluster.api_client())
    mount = VolumeMount("data", claim_name(volume.pk), "/volumes/data", 3)
    backend.submit(spec(volume_mounts=(mount,)))
    assert core.read_namespaced_persistent_volume_claim(claim_name(volume.pk), NS).spec.resources.requests == {
        "storage": "3G"
    }
    backend.stop(backend.submit(spec(volume_mounts=(mount,))), grace_s=0)
    with django_capture_on_commit_callbacks(execute=True):
        volume_delete(volume=volume, user=alice)
    assert core.list_namespaced_persistent_volume_claim(NS).items == []
