"""Kubernetes deployments: one Deployment + Service per deployment name, built with the official client's
models and applied with it; the pod runs vLLM's OpenAI-compatible server (the official image) or the product's own
model server, which speak the same API."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import Any

from instances.serving.base import SERVER_MODULE, DeploymentError

ENGINES = ("vllm", "portal")
VLLM_IMAGE = "vllm/vllm-openai:v0.10.2"  # the official image of vLLM's OpenAI-compatible server
VLLM_PORT = 8000  # vLLM's default
VLLM_MODULE = "vllm.entrypoints.openai.api_server"


def kubernetes_manifests(
    *,
    name: str,
    namespace: str,
    image: str,
    model_claim: str,
    model_path: str,
    gpus: int = 0,
    cpu: str = "2",
    memory: str = "8Gi",
    port: int = 8080,
    replicas: int = 1,
    engine: str = "portal",
    vllm_image: str = VLLM_IMAGE,
) -> list[dict[str, Any]]:
    """Deployment + Service serving the export at ``model_path`` inside the PVC ``model_claim`` (mounted read-only
    at ``/models``), the model named ``name`` in requests (``served_model`` of the deployment dict).

    ``engine``: ``"vllm"`` — the official vLLM OpenAI-compatible server (``vllm_image``, ``python3 -m
    vllm.entrypoints.openai.api_server --model /models/<path> --served-model-name <name>`` on port 8000, at least
    one ``nvidia.com/gpu``, a memory-backed ``/dev/shm`` as vLLM's deployment guide asks, no usage reports; the
    startup probe gives the model 10 minutes to load, then readiness and liveness probes ask vLLM's ``/health``);
    ``"portal"`` — the product's own server (``image``: the training image, ``python -m instances.serving.server
    serve`` on ``port``, probes on its ``/health``; ``gpus`` > 0 requests ``nvidia.com/gpu``). Both speak the same
    OpenAI API shape. Built with the official client's models and serialized by
    ``ApiClient.sanitize_for_serialization``. The Service (ClusterIP, port 80) makes the deployment's URL
    ``http://<name>.<namespace>.svc``. ``name`` must be a DNS-1035 label. Raises ``ValueError`` for another
    engine, or ``vllm`` without a GPU.
    """
    from kubernetes import client

    if engine not in ENGINES:
        raise ValueError(f"unknown serving engine {engine!r}; expected one of {', '.join(ENGINES)}")
    labels = {
        "app.kubernetes.io/managed-by": "gpu-portal",
        "app.kubernetes.io/component": "inference",
        "gpu-portal/deployment": name,
    }
    model_dir = f"/models/{model_path.strip('/')}"
    volumes = [
        client.V1Volume(
            name="models",
            persistent_volume_claim=client.V1PersistentVolumeClaimVolumeSource(claim_name=model_claim, read_only=True),
        )
    ]
    mounts = [client.V1VolumeMount(name="models", mount_path="/models", read_only=True)]
    if engine == "vllm":
        if gpus < 1:
            raise ValueError("vLLM serves on GPUs: give gpus >= 1 (or the engine 'portal' for CPU pods)")
        port = VLLM_PORT
        image = vllm_image
        command = ["python3", "-m", VLLM_MODULE]
        args = ["--model", model_dir, "--served-model-name", name, "--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
        env = [
            client.V1EnvVar(name="HF_HUB_OFFLINE", value="1"),
            client.V1EnvVar(name="VLLM_NO_USAGE_STATS", value="1"),
            client.V1EnvVar(name="DO_NOT_TRACK", value="1"),
        ]
        volumes.append(client.V1Volume(name="dshm", empty_dir=client.V1EmptyDirVolumeSource(medium="Memory")))
        mounts.append(client.V1VolumeMount(name="dshm", mount_path="/dev/shm"))  # noqa: S108 - the pod's shm
    else:
        command = [
            "python", "-m", SERVER_MODULE, "serve", "--model-dir", model_dir,
            "--host", "0.0.0.0",  # noqa: S104 - inside the pod, behind the Service
            "--port", str(port), "--served-model-name", name,
        ]  # fmt: skip
        args = None
        env = [client.V1EnvVar(name="HF_HUB_OFFLINE", value="1")]
    limits = {"cpu": cpu, "memory": memory, **({"nvidia.com/gpu": str(gpus)} if gpus else {})}

    def health(period_seconds: int, failure_threshold: int | None = None) -> Any:
        return client.V1Probe(
            http_get=client.V1HTTPGetAction(path="/health", port=port),
            period_seconds=period_seconds,
            failure_threshold=failure_threshold,
        )

    container = client.V1Container(
        name="server",
        image=image,
        command=command,
        args=args,
        ports=[client.V1ContainerPort(container_port=port, name="http")],
        env=env,
        resources=client.V1ResourceRequirements(requests={"cpu": cpu, "memory": memory}, limits=limits),
        startup_probe=health(period_seconds=10, failure_threshold=60),
        readiness_probe=health(period_seconds=10),
        liveness_probe=health(period_seconds=20, failure_threshold=3),
        volume_mounts=mounts,
    )
    deployment = client.V1Deployment(
        api_version="apps/v1",
        kind="Deployment",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=replicas,
            selector=client.V1LabelSelector(match_labels={"gpu-portal/deployment": name}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[container], volumes=volumes),
            ),
        ),
    )
    service = client.V1Service(
        api_version="v1",
        kind="Service",
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels),
        spec=client.V1ServiceSpec(
            selector={"gpu-portal/deployment": name},
            ports=[client.V1ServicePort(name="http", port=80, target_port=port)],
        ),
    )
    api = client.ApiClient()
    return [api.sanitize_for_serialization(deployment), api.sanitize_for_serialization(service)]


DEPLOYMENT_LABEL = "gpu-portal/deployment"
RESTART_ANNOTATION = "gpu-portal/restarted-at"  # a new value rolls the pods, as ``kubectl rollout restart`` does
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
_DNS_1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")


class KubernetesDeployments:
    """Model servers as one Deployment + Service per deployment name (``kubernetes_manifests``), applied with
    the official client.

    Where the model lives: the export is written by the portal's worker under ``model_root``, which is where
    the PersistentVolumeClaim ``model_claim`` is mounted on the worker; ``model_subpath`` is the folder of
    that mount inside the claim ("" = the claim's root). An export at ``<model_root>/legal/v1`` is therefore
    ``<model_subpath>/legal/v1`` in the claim and ``/models/<model_subpath>/legal/v1`` in the pod.

    A deployment dict (JSON-ready) holds ``backend`` ("kubernetes"), ``name``, ``served_model`` (the name),
    ``engine``, ``namespace``, ``url`` (the Service, port 80: ``url_template`` formatted with name and namespace),
    ``model_dir``, ``model_claim``, ``model_path`` (inside the claim), ``image`` (the one the pods run) and
    ``started_at`` (unix seconds).

    Options: ``image`` and ``model_claim`` (required), ``engine`` (``"portal"``, the default here, or ``"vllm"``
    with ``vllm_image``: ``kubernetes_manifests``), ``model_root``, ``model_subpath``, ``namespace``
    (default ``"gpu-portal-apps"``), ``api_client`` / ``in_cluster`` / ``kubeconfig`` (as
    ``instances.backends.kubernetes.KubernetesBackend``: the one client loader, ``load_api_client``), ``gpus``, ``cpu``,
    ``memory``, ``port``, ``ready_timeout_s`` (default 600 s: image pull and model load), ``poll_s``
    (status polling interval, default 2 s), ``url_template``. Raises ``DeploymentError`` for a missing
    image or claim.
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        image: str,
        model_claim: str,
        model_root: str | os.PathLike[str],
        model_subpath: str = "",
        namespace: str = "gpu-portal-apps",
        api_client: Any = None,
        in_cluster: bool = False,
        kubeconfig: str | None = None,
        gpus: int = 0,
        cpu: str = "2",
        memory: str = "8Gi",
        port: int = 8080,
        ready_timeout_s: float = 600.0,
        poll_s: float = 2.0,
        url_template: str = "http://{name}.{namespace}.svc",
        engine: str = "portal",
        vllm_image: str = VLLM_IMAGE,
    ) -> None:
        if engine not in ENGINES:
            raise DeploymentError(f"unknown serving engine {engine!r}; expected one of {', '.join(ENGINES)}")
        if engine == "vllm" and gpus < 1:
            raise DeploymentError("the vLLM engine serves on GPUs: set the option 'gpus' to 1 or more")
        if not model_claim or (engine == "portal" and not image):
            raise DeploymentError("Kubernetes deployments need the options 'image' and 'model_claim'")
        self.engine = engine
        self.vllm_image = vllm_image or VLLM_IMAGE
        self.image = image
        self.model_claim = model_claim
        self.model_root = Path(model_root)
        self.model_subpath = model_subpath.strip("/")
        self.namespace = namespace
        self._api_client = api_client
        self.in_cluster = in_cluster
        self.kubeconfig = kubeconfig
        self.gpus = gpus
        self.cpu = cpu
        self.memory = memory
        self.port = port
        self.ready_timeout_s = ready_timeout_s
        self.poll_s = poll_s
        self.url_template = url_template

    # -- client ----------------------------------------------------------------------------------------------
    @property
    def api_client(self) -> Any:
        """The ``ApiClient``: the given one, else loaded the way the Kubernetes compute backend loads it."""
        if self._api_client is None:
            from instances.backends.kubernetes import load_api_client

            self._api_client = load_api_client(in_cluster=self.in_cluster, kubeconfig=self.kubeconfig)
        return self._api_client

    def _apps(self) -> Any:
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    # -- manifests -------------------------------------------------------------------------------------------
    def model_path(self, model_dir: str | os.PathLike[str]) -> str:
        """The export's folder inside the claim. Raises ``DeploymentError`` when it is not under ``model_root``
        (the pod could not see it)."""
        try:
            rel = Path(model_dir).resolve().relative_to(self.model_root.resolve())
        except ValueError:
            raise DeploymentError(
                f"the export {model_dir} is not under {self.model_root}, where the claim {self.model_claim} is "
                "mounted: the pod cannot read it"
            ) from None
        return str(PurePosixPath(self.model_subpath, rel.as_posix())) if self.model_subpath else rel.as_posix()

    def manifests(
        self, *, name: str, model_dir: str | os.PathLike[str], restarted_at: str | None = None
    ) -> list[dict[str, Any]]:
        """Deployment and Service for ``name`` (``kubernetes_manifests``); ``restarted_at`` sets the pod template
        annotation ``RESTART_ANNOTATION`` so that applying it rolls new pods. Raises ``DeploymentError`` for a
        name that is not a DNS-1035 label or an export outside ``model_root``."""
        if not _DNS_1035.fullmatch(name):
            raise DeploymentError(f"{name!r} is not a DNS-1035 label (a-z, 0-9, '-', at most 63 characters)")
        manifests = kubernetes_manifests(
            name=name,
            namespace=self.namespace,
            image=self.image,
            model_claim=self.model_claim,
            model_path=self.model_path(model_dir),
            gpus=self.gpus,
            cpu=self.cpu,
            memory=self.memory,
            port=self.port,
            engine=self.engine,
            vllm_image=self.vllm_image,
        )
        if restarted_at:
            manifests[0]["spec"]["template"]["metadata"]["annotations"] = {RESTART_ANNOTATION: restarted_at}
        return manifests

    # -- the interface ---------------------------------------------------------------------------------------
    def alive(self, deployment: dict[str, Any]) -> bool:
        """Whether the deployment has a ready replica (pods pass the ``/health`` readiness probe). A deployment
        of another backend, or one deleted from the cluster (404), is not alive. Raises ``DeploymentError``
        when the API server answers another error."""
        from kubernetes.client.exceptions import ApiException

        name = str(deployment.get("name") or "")
        if deployment.get("backend") != self.name or not name:
            return False
        namespace = str(deployment.get("namespace") or self.namespace)
        try:
            obj = self._apps().read_namespaced_deployment_status(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise DeploymentError(f"reading deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
        return _ready(obj)

    def start(
        self, *, name: str, model_dir: str | os.PathLike[str], deployment: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Create (or replace, on 409) the Deployment and create (or patch, on 409) the Service of ``name`` for
        ``model_dir``, then wait until the Deployment has a ready replica; returns the deployment dict.

        Idempotent: a ``deployment`` of this backend that is alive is returned unchanged, and applying the same
        objects again changes nothing. A ``deployment`` that ran before (``started_at``) and is not alive is
        restarted: the pod template gets a new ``RESTART_ANNOTATION``, so the cluster rolls new pods. Raises
        ``DeploymentError`` when the API server refuses an object or no replica is ready within
        ``ready_timeout_s`` (the message carries the Deployment's failing conditions and the pods' waiting
        reasons, e.g. ``ImagePullBackOff``); the objects are deleted first, as the local backend stops its
        process.
        """
        from kubernetes.client.exceptions import ApiException

        if deployment and deployment.get("backend") == self.name and self.alive(deployment):
            return deployment
        restarted_at = None
        if deployment and deployment.get("backend") == self.name and deployment.get("started_at"):
            restarted_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        dep_manifest, svc_manifest = self.manifests(name=name, model_dir=model_dir, restarted_at=restarted_at)
        apps, core = self._apps(), self._core()
        steps = (
            (
                apps.create_namespaced_deployment,
                lambda: apps.replace_namespaced_deployment(name, self.namespace, dep_manifest),
                dep_manifest,
            ),
            (
                core.create_namespaced_service,
                lambda: core.patch_namespaced_service(
                    name, self.namespace, svc_manifest, _content_type=STRATEGIC_MERGE
                ),
                svc_manifest,
            ),
        )
        for create, update, body in steps:
            try:
                try:
                    create(self.namespace, body)
                except ApiException as exc:
                    if exc.status != 409:
                        raise
                    update()  # AlreadyExists: a retried task or a restart brings the object up to date
            except ApiException as exc:
                raise DeploymentError(
                    f"applying {body['kind']} {self.namespace}/{name}: {exc.status} {exc.reason}"
                ) from exc
        result = {
            "backend": self.name,
            "name": name,
            "namespace": self.namespace,
            "url": self.url_template.format(name=name, namespace=self.namespace),
            "model_dir": str(Path(model_dir).resolve()),
            "model_claim": self.model_claim,
            "model_path": self.model_path(model_dir),
            "image": self.vllm_image if self.engine == "vllm" else self.image,
            "engine": self.engine,
            "served_model": name,
            "started_at": int(time.time()),
        }
        self._wait_ready(result)
        return result

    def _wait_ready(self, deployment: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        name, namespace = deployment["name"], deployment["namespace"]
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            try:
                obj = self._apps().read_namespaced_deployment_status(name, namespace)
            except ApiException as exc:
                raise DeploymentError(f"reading deployment {namespace}/{name}: {exc.status} {exc.reason}") from exc
            if _ready(obj):
                return
            if time.monotonic() >= deadline:
                reason = self._not_ready_reason(obj)
                self.stop(deployment)
                raise DeploymentError(
                    f"deployment {namespace}/{name} had no ready replica within {self.ready_timeout_s:g} s: {reason}"
                )
            time.sleep(self.poll_s)

    def _not_ready_reason(self, obj: Any) -> str:
        """The Deployment's false conditions and its pods' scheduling failures and waiting or terminated reasons, in
        words."""
        parts = [
            f"{c.type}={c.status} ({c.reason}: {c.message})"
            for c in (obj.status.conditions or [])
            if str(c.status) != "True"
        ]
        try:
            pods = (
                self._core()
                .list_namespaced_pod(
                    obj.metadata.namespace or self.namespace, label_selector=f"{DEPLOYMENT_LABEL}={obj.metadata.name}"
                )
                .items
            )
        except Exception:  # the reason is best effort; the timeout itself is the error
            pods = []
        for pod in pods:
            for cond in (pod.status.conditions or []) if pod.status else []:
                if cond.type == "PodScheduled" and str(cond.status) == "False":  # e.g. no node with a free GPU
                    parts.append(f"pod {pod.metadata.name}: {cond.reason} ({cond.message or ''})".replace(" ()", ""))
            for cs in (pod.status.container_statuses or []) if pod.status else []:
                state = cs.state
                detail = state.waiting if state and state.waiting else state.terminated if state else None
                if detail is not None and detail.reason:
                    parts.append(
                        f"pod {pod.metadata.name}: {detail.reason} ({detail.message or ''})".replace(" ()", "")
                    )
        return "; ".join(parts) or "no status reported yet"

    def stop(self, deployment: dict[str, Any], grace_s: float = 30.0) -> bool:
        """Delete the Deployment (its pods get ``grace_s`` seconds) and the Service; True when something was
        deleted, False when both were already gone (404) or the dict is not of this backend. Raises
        ``DeploymentError`` for another API error."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = str(deployment.get("name") or "")
        if deployment.get("backend") != self.name or not name:
            return False
        namespace = str(deployment.get("namespace") or self.namespace)
        options = client.V1DeleteOptions(propagation_policy="Background", grace_period_seconds=int(grace_s))
        apps, core = self._apps(), self._core()
        deleted = False
        for kind, delete in (
            ("Deployment", lambda: apps.delete_namespaced_deployment(name, namespace, body=options)),
            ("Service", lambda: core.delete_namespaced_service(name, namespace)),
        ):
            try:
                delete()
                deleted = True
            except ApiException as exc:
                if exc.status != 404:
                    raise DeploymentError(f"deleting {kind} {namespace}/{name}: {exc.status} {exc.reason}") from exc
        return deleted


def _ready(obj: Any) -> bool:
    """A Deployment with at least one ready replica whose status describes its current spec."""
    status, meta = obj.status, obj.metadata
    if status is None:
        return False
    generation, observed = getattr(meta, "generation", None), status.observed_generation
    if generation is not None and observed is not None and observed < generation:
        return False  # the controller has not yet seen the spec we just applied
    return int(status.ready_replicas or 0) >= 1
