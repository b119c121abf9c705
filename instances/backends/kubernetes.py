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
  ``podFailurePolicy`` (needs ``restartPolicy: Never``; Kubernetes docs, "Handling retriable and
  non-retriable pod failures with Pod failure policy"): ``FailJob`` on the runtime's config-error and
  resume-refused exit codes (retrying cannot help), and ``FailJob`` on the ``DisruptionTarget`` pod condition
  (preemption, eviction, a lost node). A gang cannot go on with one pod replaced — the other ranks' collective
  calls fail — so a disruption ends the whole Job at once: its other pods get SIGTERM (the runtime saves a
  checkpoint), and the Job's ``Failed`` condition keeps the cause ("Pod ns/p has condition DisruptionTarget
  matching FailJob rule at index 1") after the evicted pod itself is gone. An ``Ignore`` rule would instead
  hide the disruption: the replacement pod starts alone and the surviving ranks crash.
* The container runs ``local_launcher -- torchrun … rank_shim -m instances.runtime``, so its exit code is
  the runtime's own (torchrun alone exits 1 for any worker failure) and the termination message carries it.

Status reads the Job, its pods and, for pods still Pending, their Events (see :func:`job_status_from`): a Job
failed through a ``DisruptionTarget`` makes the attempt ``preempted`` (reason ``evicted`` or ``node_lost``),
and the portal resumes the job from its newest checkpoint on new capacity; a Job that no longer exists (404:
deleted outside the portal, or garbage-collected) is ``failed`` without an exit code (reason ``deleted``),
which the portal treats as lost capacity (``preempted``, resumed) or, while stopping, as stopped.

``request_checkpoint`` annotates the Job (``gpu-portal/checkpoint-requested-at``). Nothing in the pod reads
annotations: the runtime learns of the request by polling the portal over HTTP; the annotation is a record
for operators (``kubectl describe job``). ``stop`` deletes the Job with ``propagationPolicy: Foreground``
(pods go first, each given its ``terminationGracePeriodSeconds``), then the Service and ConfigMap.

Manifests are plain dicts (validated offline against the Kubernetes OpenAPI schema in the tests) sent
through the official client. The container image is described by ``instances/backends/Dockerfile``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from instances.backends import k8s_volumes
from instances.backends.base import (
    KEEPALIVE_MODULE,
    BackendError,
    ComputeBackend,
    JobSpec,
    JobStatus,
    UnknownHandle,
    split_log_lines,
)
from instances.backends.k8s_network import NetworkOptions, network_policy_add, network_policy_name
from instances.backends.k8s_objects import (  # noqa: F401 - names of this module before the split
    _DISRUPTED_IN_MESSAGE,
    _NOT_DNS,
    CHECKPOINT_ANNOTATION,
    CONFIG_DIR,
    CONTAINER,
    DEFAULT_GPU_TYPES,
    DEFAULT_TOPOLOGY_LABELS,
    DRAINING_ANNOTATION,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    HOSTNAME_LABEL,
    INDEX_ANNOTATION,
    JOB_LABEL,
    NOT_RETRIED_EXIT_CODES,
    POD_WORKSPACE,
    RDZV_PORT,
    TERMINATION_LOG,
    _conditions,
    _failed_status,
    _gpus_of,
    _index,
    _pending_reason,
    _time,
    _trainer_exit,
    _trainer_state,
    dump,
    job_status_from,
    nodes_from,
)
from instances.interactive.ssh_k8s import SSH_PORT, ssh_manifests_add, ssh_object_name
from instances.scheduler import NodeView


def object_name(job_id: str, attempt: int) -> str:
    """``gp-<job>-a<attempt>``: a DNS-1035 label short enough that ``<name>-<index>`` (the pod hostname)
    stays within 63 characters for up to 10,000 pods."""
    slug = _NOT_DNS.sub("-", job_id.lower()).strip("-")[:40].strip("-") or "job"
    return f"gp-{slug}-a{attempt}"


def _network_options(value: dict[str, Any] | bool | None) -> NetworkOptions:
    """The ``network_policy`` option as :class:`NetworkOptions`. Raises ``BackendError`` for unknown fields."""
    if value is None or value is True:
        return NetworkOptions()
    if value is False:
        return NetworkOptions(enabled=False)
    try:
        fields = dict(value)
        if "egress_denied_cidrs" in fields:
            fields["egress_denied_cidrs"] = tuple(fields["egress_denied_cidrs"])
        return NetworkOptions(**fields)
    except TypeError as exc:
        raise BackendError(f"network_policy: {exc}") from exc


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
    ``service_account``; ``shm_size``; ``ttl_seconds_after_finished``; ``volume_storage_class`` (the
    storage class of persistent volumes' claims, the cluster default when ``None``); ``network_policy``
    (each Job's NetworkPolicy, :mod:`instances.backends.k8s_network`: ``None`` = the defaults, ``False`` = none,
    a dict = :class:`~instances.backends.k8s_network.NetworkOptions` fields, e.g.
    ``{"portal_pod_labels": {"app": "portal-web"}, "portal_port": 8000}``).
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
        volume_storage_class: str | None = None,
        network_policy: dict[str, Any] | bool | None = None,
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
        self.volume_storage_class = volume_storage_class
        self.network = _network_options(network_policy)

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
        """The container's argv. The runtime runs as ``local_launcher -- torchrun … rank_shim -m
        instances.runtime``: torchrun exits 1 whatever its workers returned, so each rank's shim records its
        exit code, and the launcher (the container's first process, forwarding SIGTERM to torchrun) exits
        with the combined code and writes it to the termination message (``/dev/termination-log``). So a
        config error (64) or a refused resume (87) reaches the portal as itself, not as a crash.

        An interactive instance runs its command as given; without one (``[]``) the launcher keeps the pod
        alive (:data:`KEEPALIVE_MODULE` under it, until the Job is deleted) for JupyterLab and SSH: the launcher,
        the container's first process, forwards the kubelet's SIGTERM and reaps what sshd's sessions leave."""
        launcher = [
            "python",
            "-m",
            "instances.backends.local_launcher",
            f"--workspace={POD_WORKSPACE}",
            f"--termination-log={TERMINATION_LOG}",
            "--forward-signals",
            "--",
        ]
        if spec.command is not None:
            return list(spec.command) or [*launcher, "python", "-m", KEEPALIVE_MODULE]
        nproc = min(spec.nproc_per_node, gpus_per_node) if gpus_per_node else spec.nproc_per_node
        return [
            *launcher,
            "torchrun",
            f"--nnodes={spec.nnodes}",
            f"--nproc-per-node={nproc}",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint={name}-0.{name}.{self.namespace}.svc:{RDZV_PORT}",
            f"--rdzv-id={name}",
            "--max-restarts=0",
            "-m",
            "instances.backends.rank_shim",
            "--exit-dir",  # rank_shim reads "--exit-dir D" as two arguments
            f"{POD_WORKSPACE}/ranks",
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
                    "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
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
            raise BackendError(f"every node of a gang must get the same number of GPUs, not {sorted(gpu_counts)}")
        gpus = gpu_counts.pop()
        name = object_name(spec.job_id, spec.attempt)
        labels = self._labels(spec, name)
        nodes = [n for n, _ in spec.placement]

        volumes: list[dict[str, Any]] = [
            {"name": "config", "configMap": {"name": name}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": self.shm_size}},
            {"name": "launcher", "emptyDir": {"sizeLimit": "16Mi"}},
        ]
        mounts: list[dict[str, Any]] = [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},  # noqa: S108 - shared memory for NCCL / data loaders
            {"name": "launcher", "mountPath": POD_WORKSPACE},
        ]
        for i, ds in enumerate(spec.dataset_mounts):
            vol = f"dataset-{i}"
            if self.dataset_volume == "pvc":
                volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": ds.source, "readOnly": True}})
            else:
                volumes.append({"name": vol, "hostPath": {"path": ds.source, "type": "Directory"}})
            mounts.append({"name": vol, "mountPath": ds.mount_path, "readOnly": True})
        if self.checkpoint_pvc:
            volumes.append({"name": "checkpoints", "persistentVolumeClaim": {"claimName": self.checkpoint_pvc}})
            mounts.append({"name": "checkpoints", "mountPath": self.checkpoint_mount})
        volume_pods, volume_mounts = k8s_volumes.pod_volumes(spec.volume_mounts)  # persistent volumes, read-write
        volumes += volume_pods
        mounts += volume_mounts

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
            "terminationMessagePath": TERMINATION_LOG,
            "terminationMessagePolicy": "FallbackToLogsOnError",
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
                                "values": NOT_RETRIED_EXIT_CODES,
                            },
                        },
                        {
                            "action": "FailJob",
                            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                        },
                    ]
                },
                "template": {"metadata": {"labels": labels}, "spec": pod_spec},
            },
        }

    def manifests(self, spec: JobSpec) -> list[dict[str, Any]]:
        """The Job's NetworkPolicy (first: no pod runs without it, ``k8s_network``), ConfigMap, Service and Job,
        in creation order, with the Jupyter objects (``instances/interactive/jupyter_k8s.py``) and the SSH Service
        (``instances/interactive/ssh_k8s.py``) when the spec asks for them."""
        from instances.interactive.jupyter_k8s import PORT as JUPYTER_PORT
        from instances.interactive.jupyter_k8s import jupyter_k8s_extend

        manifests = [self.config_map_manifest(spec), self.service_manifest(spec), self.job_manifest(spec)]
        manifests = jupyter_k8s_extend(manifests, spec.env)
        manifests = ssh_manifests_add(manifests, env=spec.env, job_label=JOB_LABEL)
        return network_policy_add(
            manifests, job_label=JOB_LABEL, options=self.network, jupyter_port=JUPYTER_PORT, ssh_port=SSH_PORT
        )

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
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        from instances.interactive.jupyter_k8s import jupyter_k8s_create

        manifests = self.manifests(spec)
        job = next(m for m in manifests if m["kind"] == "Job")
        core, batch = self._core(), self._batch()
        k8s_volumes.claims_ensure(core, self.namespace, spec.volume_mounts, self.volume_storage_class)
        creators = {
            "NetworkPolicy": client.NetworkingV1Api(self.api_client).create_namespaced_network_policy,
            "ConfigMap": core.create_namespaced_config_map,
            "Service": core.create_namespaced_service,
            "Job": batch.create_namespaced_job,
        }
        for body in manifests:
            create = creators.get(body["kind"], lambda _ns, b: jupyter_k8s_create(self.api_client, b))
            try:
                create(self.namespace, body)
            except ApiException as exc:
                if exc.status != 409:
                    raise BackendError(f"creating {body['kind']} {body['metadata']['name']}: {exc.reason}") from exc
        return f"k8s:{self.namespace}/{job['metadata']['name']}"

    def status(self, handle: str) -> JobStatus:
        """State from the Job's conditions, its pods and the Events of its Pending pods (see
        :func:`job_status_from`). A Job that is gone (404) is ``failed`` with no exit code and reason
        ``deleted``: it will never report again, so the portal must not wait for it."""
        from kubernetes.client.exceptions import ApiException

        ns, name = self.parse_handle(handle)
        try:
            job = self._batch().read_namespaced_job(name, ns)
        except ApiException as exc:
            if exc.status == 404:
                return JobStatus(
                    "failed",
                    None,
                    f"job {name} not found in {ns}: deleted outside the portal",
                    reason="deleted",
                    details={"job": name, "namespace": ns},
                )
            raise BackendError(f"reading job {name}: {exc.reason}") from exc
        core = self._core()
        sanitize = self.api_client.sanitize_for_serialization
        pods = [sanitize(p) for p in core.list_namespaced_pod(ns, label_selector=f"{JOB_LABEL}={name}").items]
        job_json = sanitize(job)
        about = [p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Pending"]
        failed = _conditions(job_json).get("Failed") or {}
        named = _DISRUPTED_IN_MESSAGE.search(failed.get("message") or "")
        if named and named.group(1) not in {p["metadata"]["name"] for p in pods}:
            about.append(named.group(1))  # the disrupted pod is gone; its Events say why
        events: list[dict[str, Any]] = []
        for pod_name in about:
            field = f"involvedObject.name={pod_name}"
            events.extend(sanitize(e) for e in core.list_namespaced_event(ns, field_selector=field).items)
        return job_status_from(job_json, pods, events)

    def logs(self, handle: str, *, rank: int = 0, lines: int | None = 200) -> list[str] | None:
        """The last ``lines`` lines (``None``: the whole log the kubelet still holds — its current file, up to
        its rotation size) of the trainer container of the pod with completion index ``rank`` (the node rank;
        torchrun's local ranks share the pod's log), read with ``read_namespaced_pod_log``; lines are split at
        ``\\n`` only (a ``\\r`` of a progress bar stays inside its line). ``None`` when no such pod exists (any
        more): a rank outside the gang, or a Job gone."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        ns, name = self.parse_handle(handle)
        sanitize = self.api_client.sanitize_for_serialization
        core = self._core()
        try:
            pods = [sanitize(p) for p in core.list_namespaced_pod(ns, label_selector=f"{JOB_LABEL}={name}").items]
            mine = [p for p in pods if _index(p) == rank]
            if not mine:
                return None
            pod = max(mine, key=lambda p: p["metadata"].get("creationTimestamp") or "")  # the newest try of it
            tail = {"tail_lines": lines} if lines is not None else {}
            text = core.read_namespaced_pod_log(pod["metadata"]["name"], ns, container=CONTAINER, **tail)
        except ApiException as exc:
            if exc.status in (400, 404):  # gone, or its container never started
                return None
            raise BackendError(f"reading the log of {name} rank {rank}: {exc.reason}") from exc
        except (HTTPError, OSError) as exc:  # the API server cannot be reached
            raise BackendError(f"reading the log of {name} rank {rank}: {exc}") from exc
        found = split_log_lines(str(text or ""))
        return found if lines is None else found[-lines:]

    def request_checkpoint(self, handle: str) -> int:
        """Annotate the Job with the request time (informational: the runtime polls the portal). Returns 1.

        Sent as a JSON merge patch (RFC 7386): without an explicit content type the client (37.x) picks the
        first JSON type it lists, ``application/json-patch+json``, which the API server refuses for an object.
        """
        ns, name = self.parse_handle(handle)
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self._batch().patch_namespaced_job(
            name,
            ns,
            {"metadata": {"annotations": {CHECKPOINT_ANNOTATION: now}}},
            _content_type="application/merge-patch+json",
        )
        return 1

    def stop(self, handle: str, grace_s: float) -> JobStatus:
        """Delete the Job (Foreground propagation, ``grace_s`` on the delete), then its Service and
        ConfigMap; objects already gone are fine. Returns the status read after the delete was accepted:
        usually ``running`` ("stopping") while pods get their grace period, ``stopped`` once the Job is gone
        (deletion completes asynchronously; the portal's reconcile sees the rest)."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        ns, name = self.parse_handle(handle)
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Foreground",
            "gracePeriodSeconds": int(grace_s),
        }
        from instances.interactive.jupyter_k8s import jupyter_k8s_delete

        core = self._core()
        deletes = (
            lambda: self._batch().delete_namespaced_job(name, ns, body=body),
            lambda: core.delete_namespaced_service(name, ns),
            lambda: core.delete_namespaced_config_map(name, ns),
            lambda: jupyter_k8s_delete(self.api_client, ns, name),
            lambda: core.delete_namespaced_service(ssh_object_name(name), ns),  # SSH, when it was set up
            lambda: core.delete_namespaced_secret(ssh_object_name(name), ns),
            lambda: client.NetworkingV1Api(self.api_client).delete_namespaced_network_policy(
                network_policy_name(name), ns
            ),  # last: the pods are on their way out
        )
        for delete in deletes:
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise BackendError(f"deleting {name}: {exc.reason}") from exc
        after = self.status(handle)
        if after.reason == "deleted":  # gone because we deleted it
            return JobStatus("stopped", None, f"stopped (job {name} deleted)")
        return after

    def inventory(self) -> list[NodeView]:
        """Nodes with allocatable ``nvidia.com/gpu``; free = allocatable minus GPU limits of the pods on them
        that have not finished (see :func:`nodes_from`)."""
        nodes = self._core().list_node()
        pods = self._core().list_pod_for_all_namespaces(field_selector="status.phase!=Succeeded,status.phase!=Failed")
        sanitize = self.api_client.sanitize_for_serialization
        return nodes_from(sanitize(nodes), sanitize(pods), self.topology_labels, self.gpu_types)


# -- parsing (pure, over the API's JSON shapes) -----------------------------------------------------------------
