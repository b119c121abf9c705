"""Backend failure and waiting reasons as reason codes (``instances.reasons``), shown in the user's language.

A backend reports a machine-readable ``JobStatus.reason`` with ``details`` (``instances.backends.kubernetes``:
Events, pod conditions, container states); :func:`status_reason` turns it into the sentence the console shows
as the instance's and the attempt's status reason. Reasons without a sentence here keep the backend's own
English message.
"""

from __future__ import annotations

from typing import Any

from instances.backends.base import JobStatus
from instances.reasons import REASON_TEXTS, Reason, reason


def _why(code: str) -> Reason | str:
    """A ``DisruptionTarget`` reason (or Event reason) as a nested reason; unknown codes as they are."""
    return reason(f"k8s_why_{code}") if f"k8s_why_{code}" in REASON_TEXTS else code


def status_reason(status: JobStatus, *, gpu_type: str = "") -> str:
    """The reason for ``status``: its ``reason`` as a :class:`~instances.reasons.Reason` (English text plus
    code and parameters, rendered in the reader's language by ``instances.reason_display.reason_render``), else its
    ``message``.

    ``gpu_type``: the catalog code of the instance's GPUs, named when no node has room
    ("no node with 8 free H100-80G-SXM GPUs").
    """
    d: dict[str, Any] = status.details or {}
    code = status.reason
    if code == "unschedulable":
        return reason(
            "k8s_unschedulable", gpus=int(d.get("gpus") or 0), gpu=gpu_type or "GPU", detail=d.get("message", "")
        )
    if code == "image_pull":
        return reason("k8s_image_pull", image=d.get("image", ""), detail=d.get("message", ""))
    if code == "oom_killed":
        return reason("k8s_oom_killed", pod=d.get("pod", ""))
    if code == "evicted":
        return reason("k8s_evicted", pod=d.get("pod", ""), why=_why(str(d.get("why", ""))))
    if code == "node_lost":
        return reason("k8s_node_lost", pod=d.get("pod", ""), node=d.get("node") or reason("its_node"))
    if code == "deleted":
        return reason("k8s_deleted", job=d.get("job", ""))
    return status.message[:300]


def pending_timeout_reason(status: JobStatus, *, gpu_type: str, minutes: int) -> str:
    """Why an attempt that stayed pending for ``minutes`` was given up (the reason, or "no reason given")."""
    why: str = status_reason(status, gpu_type=gpu_type) if status.reason else (status.message or reason("no_reason"))
    return reason("pending_timeout", minutes=minutes, why=why)
