"""Backend failure and waiting reasons in words, in the user's language (English and Chinese).

A backend reports a machine-readable ``JobStatus.reason`` with ``details`` (``instances.backends.kubernetes``:
Events, pod conditions, container states); :func:`status_reason` turns it into the sentence the console shows
as the instance's and the attempt's status reason. Reasons without a sentence here keep the backend's own
English message.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from instances.backends.base import JobStatus


def _why(code: str) -> str:
    """A ``DisruptionTarget`` reason (or Event reason) in words; unknown codes as they are."""
    words = {
        "EvictionByEvictionAPI": _("evicted by a node drain"),
        "PreemptionByScheduler": _("preempted by a higher-priority workload"),
        "DeletionByTaintManager": _("node unreachable"),
        "TaintManagerEviction": _("node unreachable"),
        "DeletionByPodGC": _("node removed from the cluster"),
        "TerminationByKubelet": _("node shutting down or out of resources"),
        "DisruptionTarget": _("cluster disruption"),
    }
    return words.get(code, code)


def status_reason(status: JobStatus, *, gpu_type: str = "") -> str:
    """The sentence for ``status`` (≤ 300 characters): its ``reason`` in words, else its ``message``.

    ``gpu_type``: the catalog code of the instance's GPUs, named when no node has room
    ("no node with 8 free H100-80G-SXM GPUs"). Translated with the active language.
    """
    d: dict[str, Any] = status.details or {}
    reason = status.reason
    if reason == "unschedulable":
        text = _("Waiting for capacity: no node with %(gpus)d free %(gpu)s GPUs (%(detail)s)") % {
            "gpus": int(d.get("gpus") or 0),
            "gpu": gpu_type or "GPU",
            "detail": d.get("message", ""),
        }
    elif reason == "image_pull":
        text = _("The container image %(image)s cannot be pulled (%(detail)s)") % {
            "image": d.get("image", ""),
            "detail": d.get("message", ""),
        }
    elif reason == "oom_killed":
        text = _("Out of memory: pod %(pod)s was killed (OOMKilled); use a smaller micro-batch or more GPUs") % {
            "pod": d.get("pod", "")
        }
    elif reason == "evicted":
        text = _("Preempted: pod %(pod)s was stopped (%(why)s); resuming from the newest checkpoint") % {
            "pod": d.get("pod", ""),
            "why": _why(str(d.get("why", ""))),
        }
    elif reason == "node_lost":
        text = _("Node lost: pod %(pod)s on %(node)s stopped answering; resuming from the newest checkpoint") % {
            "pod": d.get("pod", ""),
            "node": d.get("node") or _("its node"),
        }
    elif reason == "deleted":
        text = _("The cluster job %(job)s was deleted outside the portal") % {"job": d.get("job", "")}
    else:
        text = status.message
    return text[:300]


def pending_timeout_reason(status: JobStatus, *, gpu_type: str, minutes: int) -> str:
    """Why an attempt that stayed pending for ``minutes`` was given up (the reason, or "no reason given")."""
    why = status_reason(status, gpu_type=gpu_type) if status.reason else (status.message or _("no reason given"))
    return (_("Did not start within %(minutes)d minutes: %(why)s") % {"minutes": minutes, "why": why})[:300]
