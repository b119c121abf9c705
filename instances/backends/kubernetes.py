"""Kubernetes backend: one job attempt = an Indexed Job + a headless Service + a ConfigMap.

Objects (all named ``gp-<job>-a<attempt>``, labelled ``gpu-portal/job``, in one namespace):

* **ConfigMap** with the runtime's JSON config (``job.json``), mounted at ``/etc/gpu-portal``.
* **Service**, headless (``clusterIP: None``, ``publishNotReadyAddresses``), selecting the Job's pods: with
  the pods' ``subdomain`` set to it, pod *i* resolves as ``<job>-<i>.<service>`` (the Indexed Job sets each
  pod's hostname to ``<job>-<index>``), so pod 0 is the torchrun c10d rendezvous host on port 29500.
* **Job**: ``completionMode: Indexed``, ``completions = parallelism =`` number of placed nodes, one pod per
  node, each with ``nvidia.com/gpu`` limits = its GPUs; required node affinity on ``kubernetes.io/hostname``
  values from the scheduler's placement and pod anti-affinity so two pods never share a node; datasets
  mounted read-only (PVC or hostPath), a checkpoint PVC, ``/dev/shm`` in memory; NCCL / RDMA environment;
  ``terminationGracePeriodSeconds`` from the spec (long enough for the final checkpoint); and a
  ``podFailurePolicy``: ``FailJob`` on the runtime's config-error exit code (retrying cannot help),
  ``Ignore`` on the ``DisruptionTarget`` pod condition (preemption, eviction, node drain) so a preemption
  does not use up ``backoffLimit`` (Kubernetes docs, "Handling retriable and non-retriable pod failures
  with Pod failure policy"; needs ``restartPolicy: Never``).

Status reads the Job and its pods. A pod that failed with the ``DisruptionTarget`` condition or exited with
``EXIT_PREEMPTED`` makes the attempt ``preempted``: the portal then stops this attempt and resumes the job
from its newest checkpoint on new capacity (the same path as on the local backend), so the Job's own pod
replacement is only a stopgap until the portal reacts.

``request_checkpoint`` annotates the Job (``gpu-portal/checkpoint-requested-at``). Nothing in the pod reads
annotations: the runtime learns of the request by polling the portal over HTTP; the annotation is a record
for operators (``kubectl describe job``). ``stop`` deletes the Job with ``propagationPolicy: Foreground``
(pods go first, each given its ``terminationGracePeriodSeconds``), then the Service and ConfigMap.

Manifests are plain dicts (validated offline against the Kubernetes OpenAPI schema in the tests) sent
through the official client. The container image is described by ``instances/backends/Dockerfile``.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from instances.backends.base import (
    BackendError,
    ComputeBackend,
    JobSpec,
    JobStatus,
    UnknownHandle,
    state_for_exit_code,
)
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_PREEMPTED
from instances.scheduler import NodeView

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA GPU Feature Discovery
HOSTNAME_LABEL = "kubernetes.io/hostname"
JOB_LABEL = "gpu-portal/job"
DRAINING_ANNOTATION = "gpu-portal/draining"
CHECKPOINT_ANNOTATION = "gpu-portal/checkpoint-requested-at"
CONTAINER = "trainer"
CONFIG_DIR = "/etc/gpu-portal"
RDZV_PORT = 29500
# Rack / switch block first (a site-defined label), then the standard zone label as a coarse fallback.
DEFAULT_TOPOLOGY_LABELS = ("topology.gpu-portal.io/block", "topology.kubernetes.io/zone")
# nvidia.com/gpu.product values -> catalog GPU types; unknown products are reported as labelled.
DEFAULT_GPU_TYPES = {
    "NVIDIA-H100-80GB-HBM3": "H100-80G-SXM",
    "NVIDIA-A100-SXM4-80GB": "A100-80G-SXM",
    "NVIDIA-L40S": "L40S-48G",
    "NVIDIA-GeForce-RTX-4090": "RTX-4090-24G",
}
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def object_name(job_id: str, attempt: int) -> str:
    """``gp-<job>-a<attempt>``: a DNS-1035 label short enough that ``<name>-<index>`` (the pod hostname)
    stays within 63 characters for up to 10,000 pods."""
    slug = _NOT_DNS.sub("-", job_id.lower()).strip("-")[:40].strip("-") or "job"
    return f"gp-{slug}-a{attempt}"


def load_api_client(*, in_cluster: bool = False, kubeconfig: str | None = None) -> Any:
    """The one Kubernetes client loader (the compute backend and the model deployments both use it): an
    ``ApiClient`` from the in-cluster service account, or from ``kubeconfig`` (default ``~/.kube/config``)."""
    from kubernetes import client, config

    if in_cluster:
        config.load_incluster_config()
    else:
        config.load_kube_config(config_file=kubeconfig)
    return client.ApiClient()


class KubernetesBackend(ComputeBackend):
    """Runs job attempts as Indexed Jobs on a cluster through the official ``kubernetes`` client.

    Options: ``namespace`` (default ``"gpu-portal"``); ``api_client`` (a ready ``kubernetes.client.ApiClient``;
    otherwise ``in_cluster=True`` loads the service-account config, else ``kubeconfig`` / the default
    kubeconfig); ``dataset_volume`` (``"pvc"``: DatasetMount.source is a claim name; ``"hostPath"``: a node
    folder); ``checkpoint_pvc`` (claim mounted at ``checkpoint_mount``, unless the checkpoint URI is a remote
    fsspec URL and this is ``None``); ``nccl_socket_ifname`` / ``nccl_ib_hca`` (NCCL_SOCKET_IFNAME /
    NCCL_IB_HCA, omitted when ``None``); ``rdma_resource`` (e.g. ``"rdma/hca_shared_devices_a"``, one per pod
    when set); ``topology_labels``; ``gpu_types`` (product label -> catalog GPU type); ``backoff_limit``
    (crash retries inside one attempt, default 0: the portal resumes from a checkpoint instead);
    ``service_account``; ``shm_size``; ``ttl_seconds_after_finished``.
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        namespace: str = "gpu-portal",
        api_client: Any = None,
        in_cluster: bool = False,
        kubeconfig: str | None = None,
        dataset_volume: str = "pvc",
        checkpoint_pvc: str | None = None,
        checkpoint_mount: str = "/checkpoints",
        nccl_socket_ifname: str | None = None,
        nccl_ib_hca: str | None = None,
        rdma_resource: str | None = None,
        topology_labels: tuple[str, ...] = DEFAULT_TOPOLOGY_LABELS,
        gpu_types: dict[str, str] | None = None,
        backoff_limit: int = 0,
        service_account: str | None = None,
        shm_size: str = "64Gi",
        ttl_seconds_after_finished: int = 86400,
    ) -> None:
        if dataset_volume not in ("pvc", "hostPath"):
            raise BackendError(f"dataset_volume must be 'pvc' or 'hostPath', not {dataset_volume!r}")
        self.namespace = namespace
        self._api_client = api_client
        self.in_cluster = in_cluster
        self.kubeconfig = kubeconfig
        self.dataset_volume = dataset_volume
        self.checkpoint_pvc = checkpoint_pvc
        self.checkpoint_mount = checkpoint_mount
        self.nccl_socket_ifname = nccl_socket_ifname
        self.nccl_ib_hca = nccl_ib_hca
        self.rdma_resource = rdma_resource
        self.topology_labels = topology_labels
        self.gpu_types = DEFAULT_GPU_TYPES if gpu_types is None else gpu_types
        self.backoff_limit = backoff_limit
        self.service_account = service_account
        self.shm_size = shm_size
        self.ttl_seconds_after_finished = ttl_seconds_after_finished

    # -- client ------------------------------------------------------------------------------------------
    @property
    def api_client(self) -> Any:
        """The ``ApiClient``, built on first use from in-cluster config or a kubeconfig."""
        if self._api_client is None:
            self._api_client = load_api_client(in_cluster=self.in_cluster, kubeconfig=self.kubeconfig)
        return self._api_client

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def _batch(self) -> Any:
        from kubernetes import client

        return client.BatchV1Api(self.api_client)

    # -- manifests ---------------------------------------------------------------------------------------
    def _labels(self, spec: JobSpec, name: str) -> dict[str, str]:
        return {
            "app.kubernetes.io/managed-by": "gpu-portal",
            "app.kubernetes.io/component": "training",
            JOB_LABEL: name,
            "gpu-portal/attempt": str(spec.attempt),
        }

    def _config_text(self, spec: JobSpec) -> str:
        if spec.config_json is not None:
            return spec.config_json
        if spec.config_path is not None:
            return Path(spec.config_path).read_text()
        return "{}"

    def config_map_manifest(self, spec: JobSpec) -> dict[str, Any]:
        """ConfigMap holding the runtime's config as ``job.json``."""
        name = object_name(spec.job_id, spec.attempt)
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self._labels(spec, name)},
            "data": {"job.json": self._config_text(spec)},
        }

    def service_manifest(self, spec: JobSpec) -> dict[str, Any]:
        """Headless Service giving each pod a stable DNS name for torchrun's c10d rendezvous."""
        name = object_name(spec.job_id, spec.attempt)
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": self.namespace, "labels": self._labels(spec, name)},
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,  # rendezvous happens before any readiness
                "selector": {JOB_LABEL: name},
                "ports": [{"name": "c10d", "port": RDZV_PORT, "targetPort": RDZV_PORT, "protocol": "TCP"}],
            },
        }

    def _command(self, spec: JobSpec, name: str, gpus_per_node: int) -> list[str]:
        if spec.command is not None:
            return list(spec.command)
        nproc = min(spec.nproc_per_node, gpus_per_node) if gpus_per_node else spec.nproc_per_node
        return [
            "torchrun",
            f"--nnodes={spec.nnodes}",
            f"--nproc-per-node={nproc}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={name}-0.{name}.{self.namespace}.svc:{RDZV_PORT}",
            f"--rdzv-id={name}",
            "--max-restarts=0",
            "-m",
            "instances.runtime",
            "--config",
            f"{CONFIG_DIR}/job.json",
        ]

    def _env(self, spec: JobSpec) -> list[dict[str, Any]]:
        env: dict[str, str] = {
            "PYTHONUNBUFFERED": "1",
            "GPU_PORTAL_JOB_ID": spec.job_id,
            "GPU_PORTAL_ATTEMPT": str(spec.attempt),
            "GPU_PORTAL_CHECKPOINT_URI": spec.checkpoint_uri,
            "NCCL_DEBUG": "WARN",
        }
        if self.nccl_socket_ifname:
            env["NCCL_SOCKET_IFNAME"] = self.nccl_socket_ifname
        if self.nccl_ib_hca:
            env["NCCL_IB_HCA"] = self.nccl_ib_hca
        env.update(spec.env)
        items: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
        items.append(
            {
                "name": "GPU_PORTAL_NODE_INDEX",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }
                },
            }
        )
        return items

    def job_manifest(self, spec: JobSpec) -> dict[str, Any]:
        """The Indexed Job for ``spec`` (see the module docstring). Raises BackendError for an empty
        placement or one whose nodes get different GPU counts (a gang is homogeneous)."""
        spec.validate()
        if not spec.placement:
            raise BackendError("the Kubernetes backend needs a placement (nodes from the scheduler)")
        gpu_counts = {g for _, g in spec.placement}
        if len(gpu_counts) != 1:
            raise BackendError(
                f"every node of a gang must get the same number of GPUs, not {sorted(gpu_counts)}"
            )
        gpus = gpu_counts.pop()
        name = object_name(spec.job_id, spec.attempt)
        labels = self._labels(spec, name)
        nodes = [n for n, _ in spec.placement]

        volumes: list[dict[str, Any]] = [
            {"name": "config", "configMap": {"name": name}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}},
        ]
        mounts: list[dict[str, Any]] = [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - shared memory for NCCL / data loaders
        ]
        for i, ds in enumerate(spec.dataset_mounts):
            vol = f"dataset-{i}"
            if self.dataset_volume == "pvc":
                volumes.append(
                    {"name": vol, "persistentVolumeClaim": {"claimName": ds.source, "readOnly": True}}
                )
            else:
                volumes.append({"name": vol, "hostPath": {"path": ds.source, "type": "Directory"}})
            mounts.append({"name": vol, "mountPath": ds.mount_path, "readOnly": True})
        if self.checkpoint_pvc:
            volumes.append(
                {"name": "checkpoints", "persistentVolumeClaim": {"claimName": self.checkpoint_pvc}}
            )
            mounts.append({"name": "checkpoints", "mountPath": self.checkpoint_mount})

        limits: dict[str, str] = {GPU_RESOURCE: str(gpus)}
        if self.rdma_resource:
            limits[self.rdma_resource] = "1"
        container: dict[str, Any] = {
            "name": CONTAINER,
            "image": spec.image,
            "command": self._command(spec, name, gpus),
            "env": self._env(spec),
            "resources": {"limits": limits},
            "volumeMounts": mounts,
            "ports": [{"name": "c10d", "containerPort": RDZV_PORT, "protocol": "TCP"}],
        }
        if self.rdma_resource:
            container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}  # RDMA memory pinning
        affinity: dict[str, Any] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": nodes}]}
                    ]
                }
            }
        }
        if len(nodes) > 1:
            affinity["podAntiAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {JOB_LABEL: name}}, "topologyKey": HOSTNAME_LABEL}
                ]
            }
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Never",  # required by podFailurePolicy
            "subdomain": name,
            "terminationGracePeriodSeconds": spec.termination_grace_s,
            "affinity": affinity,
            "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [container],
            "volumes": volumes,
        }
        if self.service_account:
            pod_spec["serviceAccountName"] = self.service_account
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {
                "completionMode": "Indexed",
                "completions": len(nodes),
                "parallelism": len(nodes),
                "backoffLimit": self.backoff_limit,
                "ttlSecondsAfterFinished": self.ttl_seconds_after_finished,
                "podFailurePolicy": {
                    "rules": [
                        {
                            "action": "FailJob",
                            "onExitCodes": {
                                "containerName": CONTAINER,
                                "operator": "In",
                                "values": [EXIT_CONFIG_ERROR],
                            },
                        },
                        {
                            "action": "Ignore",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        },
                    ]
                },
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        }

    def manifests(self, spec: JobSpec) -> list[dict[str, Any]]:
        """ConfigMap, Service and Job, in creation order."""
        return [self.config_map_manifest(spec), self.service_manifest(spec), self.job_manifest(spec)]

    # -- the interface -------------------------------------------------------------------------------------
    def parse_handle(self, handle: str) -> tuple[str, str]:
        """(namespace, name) of a ``k8s:<namespace>/<name>`` handle. Raises UnknownHandle if malformed."""
        prefix, _, rest = handle.partition(":")
        ns, _, name = rest.partition("/")
        if prefix != "k8s" or not ns or not name:
            raise UnknownHandle(f"not a Kubernetes backend handle: {handle!r}")
        return ns, name

    def submit(self, spec: JobSpec) -> str:
        """Create the ConfigMap, the Service and the Job; an object that already exists (409) is kept, so a
        second submit of the same attempt creates nothing. Returns ``k8s:<namespace>/<name>``."""
        from kubernetes.client.exceptions import ApiException

        cm, svc, job = self.manifests(spec)
        core, batch = self._core(), self._batch()
        calls = (
            (core.create_namespaced_config_map, cm),
            (core.create_namespaced_service, svc),
            (batch.create_namespaced_job, job),
        )
        for create, body in calls:
            try:
                create(self.namespace, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise BackendError(
                        f"creating {body['kind']} {body['metadata']['name']}: {exc.reason}"
                    ) from exc
        return f"k8s:{self.namespace}/{job['metadata']['name']}"

    def status(self, handle: str) -> JobStatus:
        """State from the Job's conditions and its pods (see :func:`job_status_from`)."""
        from kubernetes.client.exceptions import ApiException

        ns, name = self.parse_handle(handle)
        try:
            job = self._batch().read_namespaced_job(name, ns)
        except ApiException as exc:
            if exc.status == 404:
                return JobStatus("unknown", None, f"job {name} not found in {ns}")
            raise BackendError(f"reading job {name}: {exc.reason}") from exc
        pods = self._core().list_namespaced_pod(ns, label_selector=f"{JOB_LABEL}={name}").items
        sanitize = self.api_client.sanitize_for_serialization
        return job_status_from(sanitize(job), [sanitize(p) for p in pods])

    def request_checkpoint(self, handle: str) -> int:
        """Annotate the Job with the request time (informational: the runtime polls the portal). Returns 1.

        Sent as a JSON merge patch (RFC 7386): without an explicit content type the client (37.x) picks the
        first JSON type it lists, ``application/json-patch+json``, which the API server refuses for an object.
        """
        ns, name = self.parse_handle(handle)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._batch().patch_namespaced_job(
            name, ns, {"metadata": {"annotations": {CHECKPOINT_ANNOTATION: now}}},
            _content_type="application/merge-patch+json",
        )
        return 1

    def stop(self, handle: str, grace_s: float) -> JobStatus:
        """Delete the Job (Foreground propagation, ``grace_s`` on the delete), then its Service and
        ConfigMap; objects already gone are fine. Returns the status read after the delete was accepted
        (usually still running or unknown: deletion completes asynchronously)."""
        from kubernetes.client.exceptions import ApiException

        ns, name = self.parse_handle(handle)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Foreground",
            "gracePeriodSeconds": int(grace_s),
        }
        core = self._core()
        deletes = (
            lambda: self._batch().delete_namespaced_job(name, ns, body=body),
            lambda: core.delete_namespaced_service(name, ns),
            lambda: core.delete_namespaced_config_map(name, ns),
        )
        for delete in deletes:
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise BackendError(f"deleting {name}: {exc.reason}") from exc
        return self.status(handle)

    def inventory(self) -> list[NodeView]:
        """Nodes with allocatable ``nvidia.com/gpu``; free = allocatable minus GPU limits of the pods on them
        that have not finished (see :func:`nodes_from`)."""
        nodes = self._core().list_node()
        pods = self._core().list_pod_for_all_namespaces(
            field_selector="status.phase!=Succeeded,status.phase!=Failed"
        )
        sanitize = self.api_client.sanitize_for_serialization
        return nodes_from(sanitize(nodes), sanitize(pods), self.topology_labels, self.gpu_types)


# -- parsing (pure, over the API's JSON shapes) -----------------------------------------------------------------


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value)  # Python 3.11 reads the trailing Z


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        c["type"]: c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }


def _trainer_exit(pod: dict[str, Any]) -> int | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
            if term is not None:
                return int(term.get("exitCode", 0))
    return None


def job_status_from(job: dict[str, Any], pods: list[dict[str, Any]]) -> JobStatus:
    """Map a Job and its pods (API JSON, camelCase) to a :class:`JobStatus`.

    Rules, first match wins: a pod disrupted (``DisruptionTarget``) or exited ``EXIT_PREEMPTED`` ->
    ``preempted``; Job ``Complete`` -> ``succeeded``; Job ``Failed`` -> the failed pods' exit code mapped by
    :func:`state_for_exit_code` (a config error, a crash); a Job being deleted -> ``stopped`` once no pod is
    left, else ``running``; all pods running -> ``running``; otherwise ``pending``.
    """
    status = job.get("status") or {}
    started = _time(status.get("startTime"))
    finished = _time(status.get("completionTime"))
    job_conds = _conditions(job)
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        disrupted = _conditions(pod).get("DisruptionTarget")
        if phase == "Failed" and disrupted is not None:
            reason = disrupted.get("reason") or "DisruptionTarget"
            msg = f"pod {pod['metadata']['name']} disrupted ({reason}): resume from the newest checkpoint"
            return JobStatus("preempted", _trainer_exit(pod), msg, started, finished)
        if _trainer_exit(pod) == EXIT_PREEMPTED:
            msg = f"pod {pod['metadata']['name']} exited {EXIT_PREEMPTED} (preempted, checkpoint saved)"
            return JobStatus("preempted", EXIT_PREEMPTED, msg, started, finished)
    if "Complete" in job_conds:
        return JobStatus(
            "succeeded",
            0,
            "finished",
            started,
            finished or _time(job_conds["Complete"].get("lastTransitionTime")),
        )
    if "Failed" in job_conds:
        cond = job_conds["Failed"]
        ended = _time(cond.get("lastTransitionTime"))
        codes = [c for c in (_trainer_exit(p) for p in pods) if c not in (None, 0)]
        if codes:
            code = EXIT_CONFIG_ERROR if EXIT_CONFIG_ERROR in codes else codes[0]
            state, msg = state_for_exit_code(code)
            return JobStatus(state, code, f"{msg}; {cond.get('reason', '')}".rstrip("; "), started, ended)
        return JobStatus(
            "failed", None, cond.get("message") or cond.get("reason") or "job failed", started, ended
        )
    if (job.get("metadata") or {}).get("deletionTimestamp"):
        live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
        return JobStatus("running" if live else "stopped", None, "stopping", started, None)
    phases = [(p.get("status") or {}).get("phase") for p in pods]
    wanted = (job.get("spec") or {}).get("parallelism") or 1
    if len(phases) >= wanted and all(ph == "Running" for ph in phases):
        return JobStatus("running", None, f"{len(phases)} pod(s) running", started)
    running = sum(ph == "Running" for ph in phases)
    return JobStatus("pending", None, f"{running} of {wanted} pod(s) running", started)


def nodes_from(
    node_list: dict[str, Any],
    pod_list: dict[str, Any],
    topology_labels: tuple[str, ...] = DEFAULT_TOPOLOGY_LABELS,
    gpu_types: dict[str, str] | None = None,
) -> list[NodeView]:
    """Scheduler nodes from a NodeList and a PodList (API JSON).

    Only nodes with allocatable ``nvidia.com/gpu`` > 0. GPU type from ``nvidia.com/gpu.product`` through
    ``gpu_types`` (unmapped products as labelled); block from the first of ``topology_labels`` present
    (else ``"default"``); state ``cordoned`` when ``spec.unschedulable`` or the Ready condition is not True,
    ``draining`` when additionally annotated ``gpu-portal/draining: "true"``. Free GPUs = allocatable minus
    the ``nvidia.com/gpu`` limits (or requests) of the listed pods bound to the node.
    """
    gpu_types = DEFAULT_GPU_TYPES if gpu_types is None else gpu_types
    used: dict[str, int] = {}
    for pod in pod_list.get("items") or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in (pod.get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            amount = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(
                GPU_RESOURCE
            )
            if amount:
                used[node] = used.get(node, 0) + int(amount)
    out: list[NodeView] = []
    for node in node_list.get("items") or []:
        meta = node.get("metadata") or {}
        total = int(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE) or 0)
        if total <= 0:
            continue
        labels = meta.get("labels") or {}
        product = labels.get(GPU_PRODUCT_LABEL, "unknown")
        block = next((labels[k] for k in topology_labels if labels.get(k)), "default")
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (node.get("status") or {}).get("conditions") or []
        )
        state = "ready"
        if (node.get("spec") or {}).get("unschedulable") or not ready:
            draining = (meta.get("annotations") or {}).get(DRAINING_ANNOTATION) == "true"
            state = "draining" if draining else "cordoned"
        name = meta["name"]
        free = max(0, total - used.get(name, 0))
        out.append(NodeView(name, gpu_types.get(product, product), total, free, block, state))  # type: ignore[arg-type]
    return sorted(out, key=lambda n: n.name)


def dump(manifests: list[dict[str, Any]]) -> str:
    """Manifests as a JSON list (for ``kubectl apply -f -`` by an operator, or a debug page)."""
    return json.dumps(manifests, indent=2)
