"""Kubernetes objects as the backend reads them: the names and labels it uses, and the translation of a Job's
pods, events and nodes into the backend interface's ``JobStatus`` and ``NodeView``. Pure functions over the
API's JSON (``ApiClient().sanitize_for_serialization``), so they are tested on plain dicts."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from instances.backends.base import (
    JobStatus,
    state_for_exit_code,
)
from instances.backends.local_launcher import combine_exit_codes
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED
from instances.scheduler import NodeView

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # set by NVIDIA GPU Feature Discovery
HOSTNAME_LABEL = "kubernetes.io/hostname"
JOB_LABEL = "gpu-portal/job"
DRAINING_ANNOTATION = "gpu-portal/draining"
CHECKPOINT_ANNOTATION = "gpu-portal/checkpoint-requested-at"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
CONTAINER = "trainer"
CONFIG_DIR = "/etc/gpu-portal"
RDZV_PORT = 29500
POD_WORKSPACE = "/run/gpu-portal"  # the launcher's exit files: an emptyDir of the pod
TERMINATION_LOG = "/dev/termination-log"
NOT_RETRIED_EXIT_CODES = [EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED]
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


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    return datetime.fromisoformat(value)  # Python 3.11 reads the trailing Z


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def _trainer_state(pod: dict[str, Any]) -> dict[str, Any]:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        if cs.get("name") == CONTAINER:
            return cs
    return {}


def _trainer_exit(pod: dict[str, Any]) -> int | None:
    """The runtime's exit code: the termination message's ``exit_code`` (written by the launcher), else the
    container's exit code; ``None`` while it runs or when no container status was ever reported."""
    cs = _trainer_state(pod)
    term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
    if term is None:
        return None
    try:
        reported = json.loads(term.get("message") or "")
        if isinstance(reported, dict) and isinstance(reported.get("exit_code"), int):
            return int(reported["exit_code"])
    except ValueError:
        pass
    return int(term.get("exitCode", 0))


def _index(pod: dict[str, Any]) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(INDEX_ANNOTATION)
    return int(value) if value is not None and str(value).isdigit() else None


def _gpus_of(pod: dict[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        total += int(limits.get(GPU_RESOURCE) or 0)
    return total


_EXIT_IN_MESSAGE = re.compile(r"failed with exit code (\d+)")
_DISRUPTED_IN_MESSAGE = re.compile(r"Pod [^/\s]+/(\S+) has condition DisruptionTarget")
NODE_LOSS_REASONS = frozenset({"DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet"})
NODE_LOSS_EVENTS = frozenset({"TaintManagerEviction", "NodeNotReady"})  # Event reasons on a lost node's pods
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})


def _pending_reason(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Why pods are not running yet, from container waiting states, PodScheduled and Warning Events."""
    for pod in pods:
        waiting = (_trainer_state(pod).get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in IMAGE_PULL_REASONS:
            image = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image", "")
            return "image_pull", {
                "pod": pod["metadata"]["name"],
                "image": image,
                "message": waiting.get("message") or waiting["reason"],
            }
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                return "unschedulable", {
                    "pod": pod["metadata"]["name"],
                    "gpus": _gpus_of(pod),
                    "message": cond.get("message") or cond.get("reason") or "",
                }
    warnings = sorted(
        (e for e in events if e.get("type") == "Warning"),
        key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "",
    )
    if warnings:
        ev = warnings[-1]
        pod = next((p for p in pods if p["metadata"]["name"] == ev["involvedObject"].get("name")), pods[0])
        if ev.get("reason") == "FailedScheduling":
            return "unschedulable", {
                "pod": pod["metadata"]["name"],
                "gpus": _gpus_of(pod),
                "message": ev.get("message", ""),
            }
        if ev.get("reason") in ("Failed", "ErrImagePull", "BackOff") and "image" in (ev.get("message") or ""):
            image = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("image", "")
            return "image_pull", {"pod": pod["metadata"]["name"], "image": image, "message": ev.get("message", "")}
    return "", {}


def job_status_from(
    job: dict[str, Any], pods: list[dict[str, Any]], events: list[dict[str, Any]] | None = None
) -> JobStatus:
    """Map a Job, its pods and their Events (API JSON, camelCase) to a :class:`JobStatus`.

    Rules, first match wins:

    * Job ``Complete`` -> ``succeeded``.
    * Job ``Failed``: through a ``DisruptionTarget`` (the FailJob rule's message names it, or a listed pod
      carries the condition) -> ``preempted``, reason ``node_lost`` (taint manager / pod GC) or ``evicted``;
      else the pods' exit codes combined as the local launcher does (a config error beats a crash beats a
      stop beats a preemption) and mapped by :func:`state_for_exit_code`, reason ``oom_killed`` for a memory
      kill; a Job failed with no exit code (deadline, backoff without pods) -> ``failed`` with its message.
    * Job ``FailureTarget`` only, or being deleted with pods left -> ``running`` ("stopping"): pods are still
      getting their grace period; deleted and no pod left -> ``stopped``.
    * every wanted pod Running -> ``running``; otherwise ``pending`` with the reason (``unschedulable``,
      ``image_pull``) from container states, the PodScheduled condition and Warning Events.
    """
    status = job.get("status") or {}
    started = _time(status.get("startTime"))
    finished = _time(status.get("completionTime"))
    job_conds = _conditions(job)
    if "Complete" in job_conds:
        ended = finished or _time(job_conds["Complete"].get("lastTransitionTime"))
        return JobStatus("succeeded", 0, "finished", started, ended)
    if "Failed" in job_conds:
        return _failed_status(job_conds["Failed"], pods, started, events or [])
    deleting = (job.get("metadata") or {}).get("deletionTimestamp")
    live = [p for p in pods if (p.get("status") or {}).get("phase") in ("Pending", "Running")]
    if "FailureTarget" in job_conds or deleting:
        if deleting and not live:
            return JobStatus("stopped", None, "stopped (job deleted)", started, None)
        why = job_conds.get("FailureTarget", {}).get("message") or "job deleted"
        return JobStatus("running", None, f"stopping: {why}", started)
    phases = [(p.get("status") or {}).get("phase") for p in live]
    wanted = (job.get("spec") or {}).get("parallelism") or 1
    running = sum(ph == "Running" for ph in phases)
    if running >= wanted:
        return JobStatus("running", None, f"{running} pod(s) running", started)
    reason, details = _pending_reason(
        [p for p in live if (p.get("status") or {}).get("phase") == "Pending"], events or []
    )
    message = f"{running} of {wanted} pod(s) running"
    if details.get("message"):
        message = f"{message}: {details['message']}"
    return JobStatus("pending", None, message, started, reason=reason, details=details)


def _failed_status(
    cond: dict[str, Any], pods: list[dict[str, Any]], started: datetime | None, events: list[dict[str, Any]]
) -> JobStatus:
    ended = _time(cond.get("lastTransitionTime"))
    message = cond.get("message") or cond.get("reason") or "job failed"
    disrupted_pod = next((p for p in pods if "DisruptionTarget" in _conditions(p)), None)
    named = _DISRUPTED_IN_MESSAGE.search(message)
    if disrupted_pod is not None or named:
        disruption = _conditions(disrupted_pod)["DisruptionTarget"] if disrupted_pod else {}
        pod_name = disrupted_pod["metadata"]["name"] if disrupted_pod else named.group(1)  # type: ignore[union-attr]
        why = disruption.get("reason") or "DisruptionTarget"
        node = ((disrupted_pod or {}).get("spec") or {}).get("nodeName") or ""
        said = {str(e.get("reason") or "") for e in events if (e.get("involvedObject") or {}).get("name") == pod_name}
        if why == "DisruptionTarget" and said & NODE_LOSS_EVENTS:
            why = sorted(said & NODE_LOSS_EVENTS)[0]
        reason = "node_lost" if why in NODE_LOSS_REASONS | NODE_LOSS_EVENTS else "evicted"
        code = _trainer_exit(disrupted_pod) if disrupted_pod else None
        text = f"pod {pod_name} disrupted ({why}): resume from the newest checkpoint"
        return JobStatus(
            "preempted", code, text, started, ended, reason=reason, details={"pod": pod_name, "why": why, "node": node}
        )
    codes = [c for c in (_trainer_exit(p) for p in pods) if c not in (None, 0)]
    if not codes and (found := _EXIT_IN_MESSAGE.search(message)):
        codes = [int(found.group(1))]
    if not codes:
        return JobStatus("failed", None, message, started, ended)
    code = combine_exit_codes(codes)
    state, text = state_for_exit_code(code)
    oom = next(
        (
            p
            for p in pods
            if ((_trainer_state(p).get("state") or {}).get("terminated") or {}).get("reason") == "OOMKilled"
        ),
        None,
    )
    if oom is not None and state == "failed" and code not in NOT_RETRIED_EXIT_CODES:
        return JobStatus(
            "failed",
            code,
            f"out of memory (OOMKilled) in pod {oom['metadata']['name']}",
            started,
            ended,
            reason="oom_killed",
            details={"pod": oom["metadata"]["name"]},
        )
    return JobStatus(state, code, f"{text}; {cond.get('reason', '')}".rstrip("; "), started, ended)


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
            amount = (res.get("limits") or {}).get(GPU_RESOURCE) or (res.get("requests") or {}).get(GPU_RESOURCE)
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
