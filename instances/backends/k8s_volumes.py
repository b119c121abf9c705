"""Persistent volumes on Kubernetes: one PersistentVolumeClaim per portal volume, mounted read-write in the
pods of the attempts it is attached to. Pure manifest builders plus the two API calls (ensure, delete);
used by :mod:`instances.backends.kubernetes` (pod volumes, claims created before the Job) and by
``instances.interactive.volumes`` (the claim deleted with the volume).

The claim asks for ``<size_gb>G`` of storage with ``ReadWriteOnce`` access: the cluster's storage class
provisions a disk of that size and its filesystem enforces it (writes fail with ENOSPC when full), and the
volume is mounted by pods of one node at a time. The portal's one-writer rule (one active instance per
volume) is stricter than ReadWriteOnce, which would let two pods of the same node share it.
"""

from __future__ import annotations

from typing import Any

from instances.backends.base import BackendError, VolumeMount

VOLUME_LABEL = "gpu-portal/volume"


def claim_name(volume_id: int) -> str:
    """The PersistentVolumeClaim name of portal volume ``volume_id`` (a DNS-1123 name)."""
    return f"gpu-portal-vol-{volume_id}"


def pvc_manifest(volume: VolumeMount, namespace: str, storage_class: str | None = None) -> dict[str, Any]:
    """The claim of ``volume`` (``volume.source`` is the claim name): ReadWriteOnce, ``size_gb`` G requested."""
    if volume.size_gb < 1:
        raise BackendError(f"volume {volume.name!r}: size must be at least 1 GB, not {volume.size_gb}")
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{volume.size_gb}G"}},
        "volumeMode": "Filesystem",
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": volume.source,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "gpu-portal", VOLUME_LABEL: volume.name},
        },
        "spec": spec,
    }


def pod_volumes(volumes: tuple[VolumeMount, ...]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(pod ``volumes`` entries, container ``volumeMounts`` entries) for the attached volumes, read-write."""
    pod = [{"name": f"volume-{i}", "persistentVolumeClaim": {"claimName": v.source}} for i, v in enumerate(volumes)]
    mounts = [{"name": f"volume-{i}", "mountPath": v.mount_path} for i, v in enumerate(volumes)]
    return pod, mounts


def claims_ensure(core: Any, namespace: str, volumes: tuple[VolumeMount, ...], storage_class: str | None) -> None:
    """Create the claim of each volume unless it exists (409 is kept: the data lives in it). Raises
    BackendError for any other refusal."""
    from kubernetes.client.exceptions import ApiException

    for volume in volumes:
        body = pvc_manifest(volume, namespace, storage_class)
        try:
            core.create_namespaced_persistent_volume_claim(namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise BackendError(f"creating PersistentVolumeClaim {volume.source}: {exc.reason}") from exc


def claim_delete(core: Any, namespace: str, name: str) -> bool:
    """Delete a claim (its data goes with it, as the storage class's reclaim policy says). Returns False when
    it did not exist (never created, or already deleted)."""
    from kubernetes.client.exceptions import ApiException

    try:
        core.delete_namespaced_persistent_volume_claim(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise BackendError(f"deleting PersistentVolumeClaim {name}: {exc.reason}") from exc
    return True
