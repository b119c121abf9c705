"""JupyterLab in an instance's pod on the Kubernetes backend (no Django): the objects and their lifecycle.

When the attempt's ``JobSpec.env`` asks for Jupyter (``GPU_PORTAL_JUPYTER=1``, set by the portal), the Job's
manifests (:meth:`KubernetesBackend.manifests`) get, besides the ConfigMap, headless Service and Job:

* a **Secret** ``<name>-jupyter`` holding the per-instance secret (so it is in no pod spec or Job manifest);
* in the Job's pod template, a **native sidecar** (an init container with ``restartPolicy: Always``,
  Kubernetes ≥ 1.29): the same image runs ``python -m jupyterlab`` with the portal's identity provider on port
  8888, the secret from the Secret (``secretKeyRef``), the pod's workspace (an ``emptyDir`` shared with the
  main container at ``/workspace``) as its root and the datasets read-only under ``/workspace/data/<name>``.
  A native sidecar ends when the main container ends, so the Job still completes, and it shares the pod's
  lifecycle: ``stop`` (deleting the Job) ends it; the pod's GPU request covers it, so metering does too;
* a ClusterIP **Service** ``<name>-jupyter`` on the first pod (completion index 0);
* an **Ingress** ``<name>-jupyter`` routing ``http(s)://<host>/jupyter/<instance>/`` to that Service, with a
  host per instance (``GPU_PORTAL_JUPYTER_HOST``, from the portal's ``INSTANCES_JUPYTER_DOMAIN``): one origin
  per instance, so a page served by one user's server can never script another instance's JupyterLab (the
  reason JupyterHub recommends subdomains).

The Jupyter variables are taken out of the main container's environment. Everything is labelled with the
Job's ``gpu-portal/job`` label and deleted with it by :func:`jupyter_k8s_delete`.
"""

from __future__ import annotations

from typing import Any, cast

from instances.interactive.jupyter_process import BASE_URL_ENV, ENABLE_ENV, jupyter_argv, jupyter_environment
from instances.interactive.tickets import ACCESS_URL_ENV, INSTANCE_ENV, RECHECK_S_ENV, SECRET_ENV

HOST_ENV = "GPU_PORTAL_JUPYTER_HOST"
PORT = 8888
CONTAINER = "jupyter"
WORKSPACE = "/workspace"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"  # set on Indexed Job pods (Kubernetes ≥ 1.28)
_OURS = (ENABLE_ENV, SECRET_ENV, INSTANCE_ENV, BASE_URL_ENV, HOST_ENV, ACCESS_URL_ENV, RECHECK_S_ENV)


def jupyter_object_name(name: str) -> str:
    """``<job object name>-jupyter`` (Secret, Service and Ingress share it)."""
    return f"{name}-jupyter"


def jupyter_k8s_extend(manifests: list[dict[str, Any]], env: dict[str, str]) -> list[dict[str, Any]]:
    """``manifests`` (ConfigMap, Service, Job) with the Jupyter objects when ``env`` asks for them: the Secret
    first (pods need it), then the originals (the Job's pod template given the sidecar), then Service and
    Ingress. Unchanged when Jupyter is not wanted."""
    if env.get(ENABLE_ENV) != "1" or not env.get(SECRET_ENV):
        return manifests
    job = next(m for m in manifests if m["kind"] == "Job")
    meta = job["metadata"]
    name, namespace, labels = meta["name"], meta["namespace"], dict(meta.get("labels") or {})
    obj = jupyter_object_name(name)
    pod = job["spec"]["template"]["spec"]
    main = pod["containers"][0]
    main["env"] = [e for e in main.get("env", []) if e["name"] not in _OURS]
    main.setdefault("volumeMounts", []).append({"name": "workspace", "mountPath": WORKSPACE})
    main.setdefault("workingDir", WORKSPACE)
    pod["volumes"].append({"name": "workspace", "emptyDir": {}})
    mounts: list[dict[str, Any]] = [{"name": "workspace", "mountPath": WORKSPACE}]
    for mount in main.get("volumeMounts", []):
        if mount["name"].startswith("dataset-"):
            where = f"{WORKSPACE}/data/{mount['mountPath'].rsplit('/', 1)[-1]}"
            mounts.append({"name": mount["name"], "mountPath": where, "readOnly": True})
    state = f"{WORKSPACE}/.jupyter"
    ours = {k: env[k] for k in (INSTANCE_ENV, ACCESS_URL_ENV, RECHECK_S_ENV) if env.get(k)}
    plain = jupyter_environment({**ours, "PYTHONUNBUFFERED": "1"}, state)
    command = [
        *jupyter_argv(
            python="python",
            ip="0.0.0.0",  # noqa: S104 - reached through its Service only
            port=PORT,
            base_url=env.get(BASE_URL_ENV, "/"),
            root_dir=WORKSPACE,
        ),
        "--ServerApp.trust_xheaders=True",  # behind the Ingress: https is seen, so the login cookie is Secure
    ]
    sidecar = {
        "name": CONTAINER,
        "image": main["image"],
        "restartPolicy": "Always",  # a native sidecar: ends with the pod's main container
        "command": command,
        "workingDir": WORKSPACE,
        "env": [
            *({"name": k, "value": v} for k, v in plain.items()),
            {"name": SECRET_ENV, "valueFrom": {"secretKeyRef": {"name": obj, "key": "secret"}}},
        ],
        "ports": [{"name": "jupyter", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 2},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "volumeMounts": mounts,
    }
    pod.setdefault("initContainers", []).append(sidecar)
    obj_meta = {"name": obj, "namespace": namespace, "labels": {**labels, "app.kubernetes.io/component": "jupyter"}}
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": obj_meta,
        "type": "Opaque",
        "stringData": {"secret": env[SECRET_ENV]},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": obj_meta,
        "spec": {
            "selector": {**{k: v for k, v in labels.items() if k == "gpu-portal/job"}, INDEX_LABEL: "0"},
            "ports": [{"name": "jupyter", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
        },
    }
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": env.get(BASE_URL_ENV, "/"),
                    "pathType": "Prefix",
                    "backend": {"service": {"name": obj, "port": {"number": PORT}}},
                }
            ]
        }
    }
    if env.get(HOST_ENV):
        rule["host"] = env[HOST_ENV]
    ingress = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": obj_meta,
        "spec": {"rules": [rule]},
    }
    return [secret, *manifests, service, ingress]


def jupyter_k8s_create(api_client: Any, body: dict[str, Any]) -> None:
    """Create a Secret or Ingress built above (the backend creates the kinds it knows itself). Raises the
    client's ``ApiException``."""
    from kubernetes import client

    namespace = body["metadata"]["namespace"]
    if body["kind"] == "Secret":
        client.CoreV1Api(api_client).create_namespaced_secret(namespace, cast(Any, body))  # a dict body is fine
    elif body["kind"] == "Ingress":
        client.NetworkingV1Api(api_client).create_namespaced_ingress(namespace, cast(Any, body))
    else:
        raise ValueError(f"not a Jupyter object kind: {body['kind']}")


def jupyter_k8s_delete(api_client: Any, namespace: str, name: str) -> None:
    """Delete the Jupyter Ingress, Service and Secret of Job object ``name``; missing ones (404) are fine."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core, net, obj = client.CoreV1Api(api_client), client.NetworkingV1Api(api_client), jupyter_object_name(name)
    for delete in (net.delete_namespaced_ingress, core.delete_namespaced_service, core.delete_namespaced_secret):
        try:
            delete(obj, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise
