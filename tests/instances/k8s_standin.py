"""A Kubernetes control plane stand-in for tests and benchmarks: a local HTTP server with cluster semantics.

There is no Kubernetes API server on the portal's build machines, and a recorder of API calls cannot tell a
backend that waits for a state the cluster never reaches. :class:`StandinCluster` serves the REST paths the
portal uses (``/apis/batch/v1`` Jobs, ``/apis/apps/v1`` Deployments, ``/api/v1`` Pods, pod logs, evictions,
Services, ConfigMaps, Nodes, Events) on ``127.0.0.1`` at a random port, through which the official
``kubernetes`` client talks to it unchanged (``cluster.api_client()``), and it *behaves* like the control
plane for them:

* **Job controller** (Indexed completion): one pod per index up to ``parallelism``, named
  ``<job>-<index>-<suffix>`` with hostname ``<job>-<index>``, the ``batch.kubernetes.io/job-completion-index``
  annotation and label, ``ownerReferences`` to the Job; a failed pod is matched against ``podFailurePolicy``
  rules in order (``onExitCodes`` In / NotIn with ``containerName``; ``onPodConditions``): ``Ignore`` -> not
  counted and the index gets a new pod, ``FailJob`` -> the Job gets ``FailureTarget`` with the API server's
  message ("Pod ns/p has condition DisruptionTarget matching FailJob rule at index 1"), its other pods are
  terminated (each given its grace period), and ``Failed`` follows once none is left; ``Count`` (and no
  matching rule) counts against ``backoffLimit``; every index succeeded -> ``Complete``. Status carries
  ``active`` / ``ready`` / ``succeeded`` / ``failed`` / ``completedIndexes`` / ``startTime`` / ``completionTime``.
* **Scheduler**: a pending pod binds to a Ready, schedulable node with enough free ``nvidia.com/gpu``
  (allocatable minus the limits of unfinished pods on it) that satisfies its required node affinity
  (``kubernetes.io/hostname`` In) and pod anti-affinity on the hostname; otherwise it stays Pending with the
  ``PodScheduled=False/Unschedulable`` condition and a ``FailedScheduling`` Event worded as the real
  scheduler words it ("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.").
* **Kubelet**: a bound pod runs (image pull errors for images in ``bad_images``: ``ErrImagePull`` waiting
  state and a ``Failed`` Event); :meth:`StandinCluster.container_exit` ends its container with an exit code,
  reason (``Completed`` / ``Error`` / ``OOMKilled``) and termination message; logs are whatever the test
  wrote with :meth:`StandinCluster.write_log`.
* **Deletion and eviction**: deleting a pod marks it terminating (``deletionTimestamp``) and "sends SIGTERM":
  the container reacts as ``sigterm_exit`` says (by default it exits ``85`` at once, like the runtime after its
  final checkpoint); one that does not exit within the grace period is killed with 137 when the clock passes
  it. A terminated, deleted pod disappears. The Eviction API adds ``DisruptionTarget``
  (``EvictionByEvictionAPI``) first. Deleting a Job propagates: ``Foreground`` keeps the Job (with
  ``deletionTimestamp``) until its pods are gone, ``Background`` removes it at once and deletes the pods,
  ``Orphan`` (the Job's default) leaves them.
* **Node lifecycle**: a node set NotReady is tainted ``unreachable``; after ``not_ready_eviction_s`` (the
  default toleration, 300 s) its pods get ``DisruptionTarget`` (``DeletionByTaintManager``) and fail. A node
  removed from the inventory fails its pods at once (``DeletionByPodGC``).
* **Deployments**: ``replicas`` pods of the current pod template (scheduled and run as above, so a missing
  GPU or a bad image keeps them from being ready); ``readyReplicas`` / ``observedGeneration`` / the
  ``Available`` condition follow them; a replaced template replaces the pods.
* **PersistentVolumeClaims**: bound at once at the size requested (a dynamic provisioner); with
  ``require_claims = True`` a pod naming a claim that does not exist stays Pending (``persistentvolumeclaim
  "x" not found``), as the scheduler keeps it (off by default: dataset and checkpoint claims are not modelled).
* **Metrics API** (``metrics.k8s.io/v1beta1`` PodMetrics, as metrics-server serves them): a Running pod
  reports, per container, the usage a test set in :attr:`StandinCluster.pod_usage` (``{(namespace, pod):
  {container: {"cpu": "950m", "memory": "200Mi"}}}``), ``0`` where none was set; ``metrics_api = False``
  answers 404 as a cluster without metrics-server does.
* Every write bumps a cluster-wide ``resourceVersion``; bodies POSTed / PUT are validated in strict mode
  against the OpenAPI schema (``kubernetes-validate``, ``schema_version``) and refused with 422 like an API
  server's validation; names collide with 409; missing objects are 404 ``Status`` objects.

Time is the stand-in's own clock, moved only by :meth:`StandinCluster.advance` — no test sleeps. Controllers
run after every request and every clock move, under one lock, so what a client reads is already settled.

What a real cluster adds and this does not: the kubelet and a container runtime (images are not pulled, nothing
runs: exits and logs are scripted), CNI and cluster DNS (the headless Service only exists; NetworkPolicies are
stored, validated and deleted, never enforced), the scheduler's scoring and preemption (first fitting node by name),
PodDisruptionBudgets, admission (quotas, PodSecurity, defaulting beyond the few fields set here), watches, RBAC, the
TTL-after-finished controller, ``activeDeadlineSeconds``, container restarts (``restartPolicy: Never`` is assumed),
real NCCL over real GPUs, readiness probes (a running container is Ready), and the Deployment controller's rolling
update (here a changed pod template replaces the pods at once, like ``strategy: Recreate``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import secrets
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GPU = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
SIGKILL_EXIT = 137
NOT_READY_EVICTION_S = 300

# (group path, plural) -> kind, for the collections served.
KINDS = {
    ("batch/v1", "jobs"): "Job",
    ("apps/v1", "deployments"): "Deployment",
    ("v1", "pods"): "Pod",
    ("v1", "services"): "Service",
    ("v1", "configmaps"): "ConfigMap",
    ("v1", "secrets"): "Secret",
    ("v1", "events"): "Event",
    ("v1", "nodes"): "Node",
    ("networking.k8s.io/v1", "ingresses"): "Ingress",
    ("networking.k8s.io/v1", "networkpolicies"): "NetworkPolicy",
    ("v1", "persistentvolumeclaims"): "PersistentVolumeClaim",
}
VALIDATED = frozenset(
    {"Job", "Deployment", "Service", "ConfigMap", "Secret", "Ingress", "NetworkPolicy", "PersistentVolumeClaim"}
)


class ApiError(Exception):
    """Answered as a ``Status`` object with this HTTP code."""

    REASONS = {404: "NotFound", 409: "AlreadyExists", 422: "Invalid", 400: "BadRequest", 405: "MethodNotAllowed"}

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": str(self),
            "reason": self.REASONS.get(self.code, "Unknown"),
            "code": self.code,
        }


def _ts(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod["spec"].get("containers") or []:
        res = c.get("resources") or {}
        amount = (res.get("limits") or {}).get(GPU) or (res.get("requests") or {}).get(GPU)
        total += int(amount or 0)
    return total


def _selector_matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (s.strip() for s in selector.split(","))):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def _field(obj: dict[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, dict) else None
    return cur


def _fields_match(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, (s.strip() for s in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if str(_field(obj, key) or "") == value:
                return False
        else:
            key, _, value = term.partition("=")
            if str(_field(obj, key.rstrip("=")) or "") != value:
                return False
    return True


class StandinCluster:
    """An in-memory control plane served over HTTP. Use as a context manager (starts and stops the server).

    ``schema_version``: Kubernetes release whose OpenAPI schema validates POSTed bodies. ``sigterm_exit``:
    ``(exit_code, seconds)`` a container answers SIGTERM with, or ``None`` to ignore it (then SIGKILL at the
    end of the grace period). ``bad_images``: images whose pull fails. Objects are API JSON (camelCase).
    """

    def __init__(self, *, schema_version: str = "1.33.0", start: datetime | None = None) -> None:
        self.schema_version = schema_version
        self.now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}  # (kind, namespace, name) -> object
        self.logs: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> lines
        self.sigterm_exit: tuple[int, float] | None = (85, 0.0)
        self.bad_images: set[str] = set()
        self.require_claims = False  # True: a pod naming a missing PersistentVolumeClaim stays Pending
        self.not_ready_eviction_s = NOT_READY_EVICTION_S
        self.requests: list[tuple[str, str, Any]] = []  # (method, path, JSON body) of every request
        self.pod_usage: dict[tuple[str, str], dict[str, dict[str, str]]] = {}  # metrics API, see the docstring
        self.metrics_api = True
        self._rv = itertools.count(1)
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._accounted: set[str] = set()  # uids of finished pods the Job controller has counted
        self._sigterm_at: dict[str, datetime] = {}  # pod uid -> when it was told to stop
        self._completed: dict[str, set[int]] = {}  # job uid -> indexes whose pod succeeded

    # -- server ---------------------------------------------------------------------------------------------
    def __enter__(self) -> StandinCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Serve on 127.0.0.1 at a free port (see :attr:`url`)."""
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                code, body, ctype = cluster.handle(
                    self.command, self.path, raw, content_type=self.headers.get("Content-Type") or ""
                )
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="k8s-standin", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and join the server thread."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def url(self) -> str:
        assert self._server is not None, "start() the cluster first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def api_client(self) -> Any:
        """An official ``kubernetes.client.ApiClient`` pointed at this stand-in."""
        from kubernetes import client

        return client.ApiClient(client.Configuration(host=self.url))

    # -- test controls (the parts of a cluster a test plays) ------------------------------------------------
    def add_node(
        self, name: str, *, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3", labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A Ready node with ``gpus`` allocatable ``nvidia.com/gpu`` and the GPU product label."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {HOSTNAME: name, "nvidia.com/gpu.product": product, **(labels or {})}},
            "spec": {},
            "status": {
                "allocatable": {"cpu": "96", GPU: str(gpus)},
                "capacity": {"cpu": "96", GPU: str(gpus)},
                "conditions": [
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastTransitionTime": _ts(self.now)}
                ],
            },
        }
        with self._lock:
            self._store(node, "")
            self._reconcile()
        return node

    def set_node_ready(self, name: str, ready: bool) -> None:
        """Kubelet heartbeats stop (``ready=False``: condition Unknown, ``unreachable`` NoExecute taint) or
        resume. Pods on a NotReady node fail after ``not_ready_eviction_s`` of cluster time."""
        with self._lock:
            node = self._get("Node", "", name)
            cond = node["status"]["conditions"][0]
            cond.update(
                status="True" if ready else "Unknown",
                reason="KubeletReady" if ready else "NodeStatusUnknown",
                lastTransitionTime=_ts(self.now),
            )
            node["spec"]["taints"] = (
                []
                if ready
                else [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": _ts(self.now)}]
            )
            self._touch(node)
            self._reconcile()

    def remove_node(self, name: str) -> None:
        """The node object is deleted (machine gone): pod GC fails its pods at once."""
        with self._lock:
            self.objects.pop(("Node", "", name), None)
            self._reconcile()

    def pods(self, namespace: str | None = None, selector: str = "") -> list[dict[str, Any]]:
        """Pods (in ``namespace``) whose labels match ``selector`` (``k=v,k=v``), by name."""
        with self._lock:
            return sorted(
                (
                    o
                    for (k, ns, _), o in self.objects.items()
                    if k == "Pod"
                    and namespace in (None, ns)
                    and _selector_matches(o["metadata"].get("labels") or {}, selector)
                ),
                key=lambda p: p["metadata"]["name"],
            )

    def pod(self, namespace: str, name_prefix: str) -> dict[str, Any]:
        """The one live pod whose name starts with ``name_prefix`` (e.g. ``<job>-1-``)."""
        found = [
            p
            for p in self.pods(namespace)
            if p["metadata"]["name"].startswith(name_prefix)
            and not p["metadata"].get("deletionTimestamp")
            and not self._terminated(p)
        ]
        if len(found) != 1:
            raise LookupError(f"{len(found)} live pods named {name_prefix}*")
        return found[0]

    def container_exit(self, namespace: str, pod: str, code: int, *, message: str = "", reason: str = "") -> None:
        """The pod's containers exit with ``code`` (``reason`` defaults to Completed / Error; ``OOMKilled``
        for a memory kill) and ``message`` as their termination message."""
        with self._lock:
            self._terminate(self._get("Pod", namespace, pod), code, message=message, reason=reason)
            self._reconcile()

    def write_log(self, namespace: str, pod: str, text: str) -> None:
        """Append ``text`` (lines) to the pod's container log."""
        with self._lock:
            self._get("Pod", namespace, pod)
            self.logs.setdefault((namespace, pod), []).extend(text.splitlines())

    def advance(self, seconds: float) -> None:
        """Move the cluster clock (grace periods, tolerations) and run the controllers."""
        with self._lock:
            self.now += timedelta(seconds=seconds)
            self._reconcile()

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Job object, or None once deleted."""
        with self._lock:
            return self.objects.get(("Job", namespace, name))

    # -- storage --------------------------------------------------------------------------------------------
    def _get(self, kind: str, ns: str, name: str) -> dict[str, Any]:
        obj = self.objects.get((kind, ns, name))
        if obj is None:
            plural = next(p for (_, p), k in KINDS.items() if k == kind)
            raise ApiError(404, f'{plural} "{name}" not found')
        return obj

    def _touch(self, obj: dict[str, Any]) -> None:
        obj["metadata"]["resourceVersion"] = str(next(self._rv))

    def _store(self, obj: dict[str, Any], ns: str) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        key = (obj["kind"], ns, meta.get("name", ""))
        if not key[2]:
            raise ApiError(422, "metadata.name: Required value")
        if key in self.objects:
            raise ApiError(409, f'{obj["kind"].lower()}s "{key[2]}" already exists')
        if ns:
            meta["namespace"] = ns
        meta.update(uid=secrets.token_hex(16), creationTimestamp=_ts(self.now), generation=1)
        self._touch(obj)
        self.objects[key] = obj
        return obj

    def _event(self, obj: dict[str, Any], reason: str, message: str, type_: str = "Normal") -> None:
        ns = obj["metadata"].get("namespace", "default")
        name = obj["metadata"]["name"]
        for (k, ens, _), ev in self.objects.items():  # repeat -> count, as the event recorder does
            if (
                k == "Event"
                and ens == ns
                and ev["involvedObject"]["name"] == name
                and ev["reason"] == reason
                and ev["message"] == message
            ):
                ev["count"] += 1
                ev["lastTimestamp"] = _ts(self.now)
                return
        self._store(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{name}.{secrets.token_hex(8)}", "namespace": ns},
                "involvedObject": {
                    "kind": obj["kind"],
                    "name": name,
                    "namespace": ns,
                    "uid": obj["metadata"].get("uid", ""),
                },
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": _ts(self.now),
                "lastTimestamp": _ts(self.now),
                "source": {"component": "standin"},
            },
            ns,
        )

    # -- HTTP -----------------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, raw_body: bytes, *, content_type: str = "") -> tuple[int, Any, str]:
        """Answer one request: ``(status code, JSON body or text, content type)``. A PATCH must say its
        kind: a JSON merge patch or strategic merge patch is an object; a JSON Patch (RFC 6902) is a list."""
        parts = urlsplit(raw_path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        with self._lock:
            try:
                body = json.loads(raw_body) if raw_body else {}
                self.requests.append((method, parts.path, json.loads(raw_body) if raw_body else {}))
                if method == "PATCH" and ("json-patch" in content_type) == isinstance(body, dict):
                    raise ApiError(422, f"the body of the request does not suit {content_type or 'no content type'}")
                code, out = self._route(method, parts.path.strip("/").split("/"), query, body)
                self._reconcile()
            except ApiError as exc:
                return exc.code, exc.body(), "application/json"
            except (ValueError, KeyError, TypeError) as exc:
                return 400, ApiError(400, f"bad request: {exc}").body(), "application/json"
        if isinstance(out, str):
            return code, out, "text/plain"
        return code, out, "application/json"

    def _route(self, method: str, segs: list[str], query: dict[str, str], body: Any) -> tuple[int, Any]:
        if segs[:3] == ["apis", "metrics.k8s.io", "v1beta1"] and method == "GET" and self.metrics_api:
            return 200, self._pod_metrics(segs[3:], query)
        if segs[:2] == ["api", "v1"]:
            group, rest = "v1", segs[2:]
        elif segs[:1] == ["apis"] and len(segs) >= 3:
            group, rest = f"{segs[1]}/{segs[2]}", segs[3:]
        else:
            raise ApiError(404, f"no route for /{'/'.join(segs)}")
        ns = ""
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        if not rest or (group, rest[0]) not in KINDS:
            raise ApiError(404, f"no route for /{'/'.join(segs)}")
        kind = KINDS[(group, rest[0])]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if not name:
            if method == "GET":
                return 200, self._list(kind, ns, query)
            if method == "POST":
                return 201, self._create(kind, ns, body)
            raise ApiError(405, method)
        if sub == "log" and kind == "Pod":
            self._get(kind, ns, name)
            lines = self.logs.get((ns, name), [])
            if query.get("tailLines"):
                lines = lines[-int(query["tailLines"]) :]
            return 200, "".join(f"{line}\n" for line in lines)
        if sub == "eviction" and kind == "Pod" and method == "POST":
            return 201, self._evict(ns, name, body)
        obj = self._get(kind, ns, name)
        if method == "GET":
            return 200, obj
        if method == "PATCH":
            self._merge(obj, body)
            self._touch(obj)
            return 200, obj
        if method == "PUT":
            self._validate(kind, body)
            body["metadata"].update(
                {k: obj["metadata"][k] for k in ("uid", "creationTimestamp", "namespace") if k in obj["metadata"]}
            )
            body["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
            body["status"] = obj.get("status", {})
            self.objects[(kind, ns, name)] = body
            self._touch(body)
            return 200, body
        if method == "DELETE":
            return 200, self._delete(obj, body or {}, query)
        raise ApiError(405, method)

    def _merge(self, target: dict[str, Any], patch: dict[str, Any]) -> None:
        for key, value in patch.items():  # JSON merge patch, RFC 7386
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                self._merge(target[key], value)
            else:
                target[key] = value

    def _validate(self, kind: str, body: Any) -> None:
        if kind not in VALIDATED:
            return
        import kubernetes_validate

        if not isinstance(body, dict) or body.get("kind") != kind:
            raise ApiError(400, f"body is not a {kind}")
        try:
            kubernetes_validate.validate(body, self.schema_version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise ApiError(422, f"{kind} is invalid: {exc.message}") from None

    def _pod_metrics(self, rest: list[str], query: dict[str, str]) -> dict[str, Any]:
        """``GET …/namespaces/<ns>/pods``: PodMetrics of the Running pods (see the module docstring)."""
        if len(rest) != 3 or rest[0] != "namespaces" or rest[2] != "pods":
            raise ApiError(404, f"no route for metrics {'/'.join(rest)}")
        items = []
        for pod in self._list("Pod", rest[1], query)["items"]:
            if pod["status"].get("phase") != "Running":
                continue
            usage = self.pod_usage.get((rest[1], pod["metadata"]["name"]), {})
            containers = [
                {"name": c["name"], "usage": usage.get(c["name"], {"cpu": "0", "memory": "0"})}
                for c in pod["spec"]["containers"]
            ]
            items.append(
                {
                    "metadata": {"name": pod["metadata"]["name"], "namespace": rest[1]},
                    "timestamp": _ts(self.now),
                    "window": "30s",
                    "containers": containers,
                }
            )
        return {"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}

    def _list(self, kind: str, ns: str, query: dict[str, str]) -> dict[str, Any]:
        items = [o for (k, ons, _), o in self.objects.items() if k == kind and (not ns or ons == ns)]
        if query.get("labelSelector"):
            items = [o for o in items if _selector_matches(o["metadata"].get("labels") or {}, query["labelSelector"])]
        if query.get("fieldSelector"):
            items = [o for o in items if _fields_match(o, query["fieldSelector"])]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        version = (
            "v1"
            if kind in ("Pod", "Service", "ConfigMap", "Event", "Node", "PersistentVolumeClaim")
            else ("batch/v1" if kind == "Job" else "apps/v1")
        )
        return {
            "apiVersion": version,
            "kind": f"{kind}List",
            "metadata": {"resourceVersion": str(next(self._rv))},
            "items": items,
        }

    def _create(self, kind: str, ns: str, body: Any) -> dict[str, Any]:
        self._validate(kind, body)
        if kind == "Job":
            spec = body["spec"]
            spec.setdefault("parallelism", 1)
            spec.setdefault("completions", spec["parallelism"])
            spec.setdefault("backoffLimit", 6)
            spec.setdefault("completionMode", "NonIndexed")
            body["status"] = {}
        elif kind == "Deployment":
            body["status"] = {}
        elif kind == "Pod":
            body.setdefault("status", {"phase": "Pending", "conditions": []})
        elif kind == "PersistentVolumeClaim":  # a dynamic provisioner binds it at once, at the size asked
            requested = body["spec"]["resources"]["requests"]["storage"]
            body["status"] = {
                "phase": "Bound",
                "accessModes": body["spec"]["accessModes"],
                "capacity": {"storage": requested},
            }
        elif kind == "Service" and body["spec"].get("type") == "NodePort":  # allocated from 30000-32767
            services = [o for o in self.objects.values() if o["kind"] == "Service"]
            taken = {p.get("nodePort") for o in services for p in o["spec"]["ports"]}
            for port in body["spec"]["ports"]:
                port.setdefault("nodePort", min(set(range(30000, 32768)) - taken))
        obj = self._store(body, ns)
        if kind == "Job":
            self._event(obj, "Created", f"Job {ns}/{obj['metadata']['name']} created")
        return obj

    # -- deletion -------------------------------------------------------------------------------------------
    def _delete(self, obj: dict[str, Any], options: dict[str, Any], query: dict[str, str]) -> dict[str, Any]:
        kind, meta = obj["kind"], obj["metadata"]
        policy = (
            options.get("propagationPolicy")
            or query.get("propagationPolicy")
            or ("Orphan" if kind == "Job" else "Background")
        )
        if kind == "Pod":
            grace = options.get("gracePeriodSeconds")
            self._delete_pod(obj, grace)
            return obj
        owned = [
            p
            for p in self.pods(meta.get("namespace"))
            if any(r.get("uid") == meta["uid"] for r in p["metadata"].get("ownerReferences") or [])
        ]
        if policy == "Foreground" and owned:
            meta.setdefault("deletionTimestamp", _ts(self.now))
            meta["finalizers"] = sorted(set(meta.get("finalizers") or []) | {"foregroundDeletion"})
            for pod in owned:
                self._delete_pod(pod, None)
            self._touch(obj)
            return obj
        self.objects.pop((kind, meta.get("namespace", ""), meta["name"]), None)
        if kind in ("Service", "PersistentVolumeClaim"):  # answered with the object, others with a Status
            return obj
        for pod in owned:
            if policy == "Orphan":
                pod["metadata"]["ownerReferences"] = []
            else:
                self._delete_pod(pod, None)
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": meta["name"], "kind": kind.lower() + "s", "uid": meta["uid"]},
        }

    def _delete_pod(self, pod: dict[str, Any], grace: int | None) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        if grace is None:
            grace = int(pod["spec"].get("terminationGracePeriodSeconds", 30))
        meta["deletionTimestamp"] = _ts(self.now + timedelta(seconds=grace))
        meta["deletionGracePeriodSeconds"] = grace
        self._sigterm_at[meta["uid"]] = self.now
        if pod["status"].get("phase") == "Running":
            self._event(pod, "Killing", f"Stopping container {pod['spec']['containers'][0]['name']}")
        self._touch(pod)

    def _evict(self, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        pod = self._get("Pod", ns, name)
        self._add_condition(pod, "DisruptionTarget", "EvictionByEvictionAPI", "Eviction API: evicting")
        grace = (body.get("deleteOptions") or {}).get("gracePeriodSeconds")
        self._delete_pod(pod, grace)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    # -- pods -----------------------------------------------------------------------------------------------
    def _add_condition(self, pod: dict[str, Any], type_: str, reason: str, message: str, status: str = "True"):
        conds = [c for c in pod["status"].setdefault("conditions", []) if c["type"] != type_]
        conds.append(
            {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": _ts(self.now)}
        )
        pod["status"]["conditions"] = conds
        self._touch(pod)

    def _terminated(self, pod: dict[str, Any]) -> bool:
        return pod["status"].get("phase") in ("Succeeded", "Failed")

    def _terminate(self, pod: dict[str, Any], code: int | None, *, message: str = "", reason: str = "") -> None:
        if self._terminated(pod):
            return
        statuses = []
        for c in pod["spec"]["containers"]:
            state: dict[str, Any] = {}
            if code is not None:
                started = pod["status"].get("startTime") or _ts(self.now)
                state = {
                    "terminated": {
                        "exitCode": code,
                        "reason": reason or ("Completed" if code == 0 else "Error"),
                        "message": message,
                        "startedAt": started,
                        "finishedAt": _ts(self.now),
                    }
                }
            statuses.append(
                {
                    "name": c["name"],
                    "image": c["image"],
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": state,
                }
            )
        pod["status"]["containerStatuses"] = statuses
        pod["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        self._add_condition(pod, "Ready", "PodCompleted", "", status="False")

    def _schedule(self, pod: dict[str, Any]) -> None:
        need = _gpus(pod)
        for vol in (pod["spec"].get("volumes") or []) if self.require_claims else []:  # VolumeBinding
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and ("PersistentVolumeClaim", pod["metadata"]["namespace"], claim) not in self.objects:
                message = f'persistentvolumeclaim "{claim}" not found'
                if {c.get("message") for c in pod["status"].get("conditions") or []} != {message}:
                    self._add_condition(pod, "PodScheduled", "Unschedulable", message, status="False")
                    self._event(pod, "FailedScheduling", message, "Warning")
                return
        nodes = sorted((o for (k, _, _), o in self.objects.items() if k == "Node"), key=lambda n: n["metadata"]["name"])
        used: dict[str, int] = {}
        for other in self.pods():
            node = other["spec"].get("nodeName")
            if node and not self._terminated(other):
                used[node] = used.get(node, 0) + _gpus(other)
        affinity = pod["spec"].get("affinity") or {}
        allowed: set[str] | None = None
        for term in (
            (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {}
        ).get("nodeSelectorTerms") or []:
            for expr in term.get("matchExpressions") or []:
                if expr.get("key") == HOSTNAME and expr.get("operator") == "In":
                    allowed = (allowed or set()) | set(expr.get("values") or [])
        anti = [
            t["labelSelector"].get("matchLabels") or {}
            for t in (
                (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
            )
        ]
        reasons: dict[str, int] = {}
        for node in nodes:
            name = node["metadata"]["name"]
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
            alloc = int(node["status"]["allocatable"].get(GPU, 0))
            if not ready or node["spec"].get("taints"):
                why = "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
            elif node["spec"].get("unschedulable"):
                why = "node(s) were unschedulable"
            elif allowed is not None and name not in allowed:
                why = "node(s) didn't match Pod's node affinity/selector"
            elif any(
                _selector_matches(o["metadata"].get("labels") or {}, ",".join(f"{k}={v}" for k, v in m.items()))
                and o["spec"].get("nodeName") == name
                and not self._terminated(o)
                for m in anti
                for o in self.pods(pod["metadata"].get("namespace"))
            ):
                why = "node(s) didn't match pod anti-affinity rules"
            elif alloc - used.get(name, 0) < need:
                why = f"Insufficient {GPU}"
            else:
                pod["spec"]["nodeName"] = name
                self._add_condition(pod, "PodScheduled", "", "")
                self._event(
                    pod,
                    "Scheduled",
                    f"Successfully assigned {pod['metadata']['namespace']}/{pod['metadata']['name']} to {name}",
                )
                return
            reasons[why] = reasons.get(why, 0) + 1
        detail = ", ".join(sorted(f"{n} {w}" for w, n in reasons.items()))  # as kube-scheduler's FitError
        message = f"0/{len(nodes)} nodes are available: {detail}." if nodes else "no nodes available to schedule pods"
        conds = {c["type"]: c for c in pod["status"].get("conditions") or []}
        if (conds.get("PodScheduled") or {}).get("message") != message:
            self._add_condition(pod, "PodScheduled", "Unschedulable", message, status="False")
            self._event(pod, "FailedScheduling", message, "Warning")

    def _kubelet(self, pod: dict[str, Any]) -> None:
        status = pod["status"]
        image = pod["spec"]["containers"][0]["image"]
        if status.get("phase") != "Pending":
            return
        if image in self.bad_images:
            if not status.get("containerStatuses"):
                msg = f'Failed to pull image "{image}": rpc error: code = NotFound desc = manifest unknown'
                status["containerStatuses"] = [
                    {
                        "name": c["name"],
                        "image": c["image"],
                        "imageID": "",
                        "ready": False,
                        "restartCount": 0,
                        "state": {"waiting": {"reason": "ErrImagePull", "message": msg}},
                    }
                    for c in pod["spec"]["containers"]
                ]
                self._event(pod, "Failed", msg, "Warning")
                self._touch(pod)
            return
        status.update(phase="Running", startTime=_ts(self.now), hostIP="10.0.0.1", podIP="10.1.0.1")
        status["containerStatuses"] = [
            {
                "name": c["name"],
                "image": c["image"],
                "imageID": f"{c['image']}@sha256:0",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": _ts(self.now)}},
            }
            for c in pod["spec"]["containers"]
        ]
        self._add_condition(pod, "Ready", "", "")
        self._event(pod, "Started", f"Started container {pod['spec']['containers'][0]['name']}")

    # -- controllers ----------------------------------------------------------------------------------------
    def _reconcile(self) -> None:
        for _ in range(10):  # until nothing changes (a few rounds settle any state)
            before = next(self._rv)
            self._node_lifecycle()
            self._terminating_pods()
            for key in [k for k in self.objects if k[0] == "Job"]:
                if key in self.objects:
                    self._job_controller(self.objects[key])
            for key in [k for k in self.objects if k[0] == "Deployment"]:
                if key in self.objects:
                    self._deployment_controller(self.objects[key])
            for pod in self.pods():
                if pod["status"].get("phase") == "Pending" and not pod["metadata"].get("deletionTimestamp"):
                    if not pod["spec"].get("nodeName"):
                        self._schedule(pod)
                    if pod["spec"].get("nodeName"):
                        self._kubelet(pod)
            self._collect_garbage()
            if next(self._rv) == before + 1:
                return

    def _node_lifecycle(self) -> None:
        nodes = {k[2]: o for k, o in self.objects.items() if k[0] == "Node"}
        for pod in self.pods():
            node_name = pod["spec"].get("nodeName")
            if not node_name or self._terminated(pod):
                continue
            node = nodes.get(node_name)
            if node is None:
                self._add_condition(pod, "DisruptionTarget", "DeletionByPodGC", "PodGC: node no longer exists")
                self._terminate(pod, None)
                self._delete_pod(pod, 0)
                continue
            cond = node["status"]["conditions"][0]
            since = datetime.fromisoformat(cond["lastTransitionTime"])
            if cond["status"] != "True" and self.now - since >= timedelta(seconds=self.not_ready_eviction_s):
                self._add_condition(
                    pod, "DisruptionTarget", "DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint"
                )
                self._event(
                    pod,
                    "TaintManagerEviction",
                    f"Marking for deletion Pod {pod['metadata']['namespace']}/{pod['metadata']['name']}",
                )
                self._terminate(pod, None)  # the kubelet is gone: no exit code is ever reported
                self._delete_pod(pod, 0)

    def _terminating_pods(self) -> None:
        for pod in self.pods():
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp") or self._terminated(pod):
                continue
            if pod["status"].get("phase") == "Pending":
                self._terminate(pod, None)
                continue
            told = self._sigterm_at.get(meta["uid"], self.now)
            deadline = datetime.fromisoformat(meta["deletionTimestamp"])
            if self.sigterm_exit is not None and told + timedelta(seconds=self.sigterm_exit[1]) <= min(
                self.now, deadline
            ):
                self._terminate(pod, self.sigterm_exit[0])
            elif self.now >= deadline:
                self._terminate(pod, SIGKILL_EXIT)

    def _collect_garbage(self) -> None:
        jobs = {o["metadata"]["uid"] for (k, _, _), o in self.objects.items() if k == "Job"}
        for pod in self.pods():
            meta = pod["metadata"]
            if not (meta.get("deletionTimestamp") and self._terminated(pod)):
                continue
            # The Job controller's tracking finalizer holds a pod until its Job has counted it (or is gone).
            held = (
                "batch.kubernetes.io/job-tracking" in (meta.get("finalizers") or [])
                and meta["uid"] not in self._accounted
                and any(r.get("uid") in jobs for r in meta.get("ownerReferences") or [])
            )
            if not held:
                self.objects.pop(("Pod", meta["namespace"], meta["name"]), None)
        for key, job in list(self.objects.items()):
            if key[0] == "Job" and job["metadata"].get("deletionTimestamp") and not self._owned(job):
                del self.objects[key]

    def _owned(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        uid = job["metadata"]["uid"]
        return [
            p
            for p in self.pods(job["metadata"]["namespace"])
            if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    @staticmethod
    def _conds(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or [] if c["status"] == "True"}

    def _job_condition(self, job: dict[str, Any], type_: str, reason: str, message: str) -> None:
        job["status"].setdefault("conditions", []).append(
            {
                "type": type_,
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": _ts(self.now),
                "lastTransitionTime": _ts(self.now),
            }
        )
        self._touch(job)

    def _match_rule(self, job: dict[str, Any], pod: dict[str, Any]) -> tuple[str, str] | None:
        """(action, message) of the first podFailurePolicy rule matching a failed pod, else None."""
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        rules = ((job["spec"].get("podFailurePolicy") or {}).get("rules")) or []
        for i, rule in enumerate(rules):
            codes = rule.get("onExitCodes")
            if codes:
                for cs in pod["status"].get("containerStatuses") or []:
                    term = (cs.get("state") or {}).get("terminated")
                    if term is None or term["exitCode"] == 0:
                        continue
                    if codes.get("containerName") and codes["containerName"] != cs["name"]:
                        continue
                    inside = term["exitCode"] in codes["values"]
                    if inside == (codes["operator"] == "In"):
                        return rule["action"], (
                            f"Container {cs['name']} for pod {ns}/{name} failed with exit code "
                            f"{term['exitCode']} matching {rule['action']} rule at index {i}"
                        )
            for pc in rule.get("onPodConditions") or []:
                cond = self._conds(pod).get(pc["type"])
                if cond is not None and pc.get("status", "True") == "True":
                    return rule["action"], (
                        f"Pod {ns}/{name} has condition {pc['type']} matching {rule['action']} rule at index {i}"
                    )
        return None

    def _job_controller(self, job: dict[str, Any]) -> None:
        spec, status, meta = job["spec"], job["status"], job["metadata"]
        pods = self._owned(job)
        if "startTime" not in status and not spec.get("suspend"):
            status["startTime"] = _ts(self.now)
        done = {"Complete", "Failed", "FailureTarget"} & set(self._conds(job))
        succeeded_idx = self._completed.setdefault(meta["uid"], set())
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if not self._terminated(pod) or uid in self._accounted:
                continue
            self._accounted.add(uid)
            index = int(pod["metadata"]["annotations"][INDEX_ANNOTATION])
            if spec["completionMode"] != "Indexed":
                index = -1 - status.get("succeeded", 0)  # any pod's success counts once
            if pod["status"]["phase"] == "Succeeded":
                status["succeeded"] = status.get("succeeded", 0) + 1
                succeeded_idx.add(index)
                continue
            if done:
                continue
            matched = self._match_rule(job, pod)
            action, message = matched or ("Count", "")
            if action == "FailJob":
                self._job_condition(job, "FailureTarget", "PodFailurePolicy", message)
                done = {"FailureTarget"}
            elif action == "Count":
                status["failed"] = status.get("failed", 0) + 1
                if status["failed"] > spec["backoffLimit"]:
                    self._job_condition(
                        job, "FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
                    )
                    done = {"FailureTarget"}
        status["completedIndexes"] = ",".join(map(str, sorted(succeeded_idx)))
        live = [p for p in pods if not self._terminated(p)]
        if done or meta.get("deletionTimestamp"):
            if "FailureTarget" in done:
                for pod in live:
                    self._delete_pod(pod, None)
                if not live and "Failed" not in self._conds(job):
                    cond = self._conds(job)["FailureTarget"]
                    self._job_condition(job, "Failed", cond["reason"], cond["message"])
            self._job_status_counts(job, live)
            return
        completions = int(spec["completions"])
        if len(succeeded_idx) >= completions or status.get("succeeded", 0) >= completions:
            status["completionTime"] = _ts(self.now)
            reached = "Reached expected number of succeeded pods"
            self._job_condition(job, "SuccessCriteriaMet", "CompletionsReached", reached)
            self._job_condition(job, "Complete", "CompletionsReached", reached)
            self._job_status_counts(job, live)
            return
        busy = {int(p["metadata"]["annotations"][INDEX_ANNOTATION]) for p in live}
        wanted = [i for i in range(completions) if i not in succeeded_idx and i not in busy]
        room = int(spec["parallelism"]) - len(live)
        for index in wanted[: max(0, room)]:
            self._create_job_pod(job, index)
        self._job_status_counts(job, [p for p in self._owned(job) if not self._terminated(p)])

    def _job_status_counts(self, job: dict[str, Any], live: list[dict[str, Any]]) -> None:
        status = job["status"]
        active = sum(1 for p in live if not p["metadata"].get("deletionTimestamp"))
        ready = sum(1 for p in live if "Ready" in self._conds(p))
        if (status.get("active"), status.get("ready")) != (active, ready):
            status["active"], status["ready"] = active, ready
            self._touch(job)

    def _create_job_pod(self, job: dict[str, Any], index: int) -> None:
        meta = job["metadata"]
        template = json.loads(json.dumps(job["spec"]["template"]))
        pod_meta = template.get("metadata") or {}
        labels = dict(pod_meta.get("labels") or {})
        labels.update(
            {
                JOB_NAME_LABEL: meta["name"],
                "job-name": meta["name"],
                INDEX_ANNOTATION: str(index),
                "controller-uid": meta["uid"],
            }
        )
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{meta['name']}-{index}-{secrets.token_hex(3)[:5]}",
                "labels": labels,
                "annotations": {**(pod_meta.get("annotations") or {}), INDEX_ANNOTATION: str(index)},
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
                "finalizers": ["batch.kubernetes.io/job-tracking"],
            },
            "spec": {**template["spec"], "hostname": f"{meta['name']}-{index}"},
            "status": {"phase": "Pending", "conditions": []},
        }
        self._store(pod, meta["namespace"])
        self._event(job, "SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")

    def _deployment_controller(self, dep: dict[str, Any]) -> None:
        """ReplicaSet behaviour folded in: ``replicas`` pods of the current template (label
        ``pod-template-hash``); pods of an older template are deleted (a Recreate rollout); ready replicas are
        the current pods whose kubelet reports them Ready."""
        spec, status, meta = dep["spec"], dep.setdefault("status", {}), dep["metadata"]
        if meta.get("deletionTimestamp"):
            return
        template = spec["template"]
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
        pods = self._owned(dep)
        current = []
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp") or self._terminated(pod):
                continue
            if (pod["metadata"].get("labels") or {}).get("pod-template-hash") != digest:
                self._delete_pod(pod, None)
            else:
                current.append(pod)
        replicas = int(spec.get("replicas", 1))
        for _ in range(replicas - len(current)):
            labels = {**((template.get("metadata") or {}).get("labels") or {}), "pod-template-hash": digest}
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{meta['name']}-{digest[:8]}-{secrets.token_hex(3)[:5]}",
                    "labels": labels,
                    "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "Deployment",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": json.loads(json.dumps(template["spec"])),
                "status": {"phase": "Pending", "conditions": []},
            }
            current.append(self._store(pod, meta["namespace"]))
        ready = sum(1 for p in current if "Ready" in self._conds(p))
        want = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(current),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": len(current),
        }
        if any(status.get(k) != v for k, v in want.items()):
            status.update(want)
            status["conditions"] = [
                {
                    "type": "Available",
                    "status": "True" if ready else "False",
                    "reason": "MinimumReplicasAvailable" if ready else "MinimumReplicasUnavailable",
                    "message": f"{ready} of {replicas} replicas ready",
                    "lastTransitionTime": _ts(self.now),
                }
            ]
            self._touch(dep)
