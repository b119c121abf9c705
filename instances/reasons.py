"""Status and attempt reasons as data: a code with named parameters, rendered in the reader's language.

The one registry :data:`REASON_TEXTS` maps a code to an English template with ``%(name)s`` parameters; the
template is the gettext msgid (the zh_Hans catalogue translates it). A reason is stored as three columns:
the English text (``Instance.status_reason``, ``InstanceTransition.reason``, ``JobAttempt.message``, kept for
the API's ``status_reason`` field, webhooks and rows written before codes existed), the code
(``*_code``) and the parameters (``*_params``, JSON). ``instances.reason_display.reason_render`` turns them
into the reader's language, falling back to the stored text when the code is empty or unknown.

A :class:`Reason` is a ``str`` (its English text) that also carries ``code`` and ``params``, so every caller
that passes a reason string keeps working and the writers (``instances.transitions``, the reconcile) store the
code beside the text. A parameter may itself be a reason (``{"code": …, "params": …}``), rendered recursively
("node lost: processes gone without an exit code").

No Django here at all: the backends (``instances.backends.base``) build reasons in the launcher's process,
which imports no Django (``tests/portal/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def gettext_noop(message: str) -> str:
    """Mark ``message`` for the catalogue (``makemessages`` reads this name) without translating it here."""
    return message


REASON_TEXTS: dict[str, str] = {
    # the outcome of an attempt (instances.backends.base.state_for_exit_code)
    "finished": gettext_noop("finished"),
    "stopped": gettext_noop("stopped"),
    "stopped_checkpoint": gettext_noop("stopped, checkpoint saved"),
    "stopped_on_request": gettext_noop("stopped on request, checkpoint saved"),
    "stopped_exit": gettext_noop("stopped (exit code %(exit_code)s)"),
    "stopped_signal": gettext_noop("stopped (%(signal)s)"),
    "preempted_checkpoint": gettext_noop("preempted: checkpoint saved, safe to resume"),
    "rank_lost": gettext_noop("rank lost (killed without an exit code: SIGKILL, OOM killer or node loss)"),
    "store_unavailable": gettext_noop("checkpoint store unavailable (transient I/O errors): resumed later"),
    "config_error": gettext_noop("invalid runtime config: nothing trained (not retried)"),
    "killed_signal": gettext_noop("killed by %(signal)s"),
    "crashed": gettext_noop("crashed (exit code %(exit_code)s)"),
    "processes_gone": gettext_noop("processes gone without an exit code (killed)"),
    "node_lost": gettext_noop("node lost: %(msg)s"),
    # what the runtime said when it exited (its exit event: exit code and step; runtime_exit_reason)
    "exit_finished": gettext_noop("the training program finished at step %(step)d"),
    "exit_preempted": gettext_noop("the training program saved a checkpoint at step %(step)d and stopped (preempted)"),
    "exit_stopped": gettext_noop("the training program saved a checkpoint at step %(step)d and stopped"),
    "exit_failed": gettext_noop(
        "the training program stopped with an error at step %(step)d: the last lines of its log say which"
    ),
    "exit_config_error": gettext_noop(
        "the training program refused its configuration: nothing trained (not retried); its log says which setting"
    ),
    "exit_resume_refused": gettext_noop(
        "the training program cannot resume exactly from the checkpoint it was given: nothing trained (not "
        "retried); roll back to another checkpoint"
    ),
    "exit_store_unavailable": gettext_noop(
        "the checkpoint store kept failing at step %(step)d (transient I/O errors): resumed later, not counted "
        "as a crash"
    ),
    "exit_rank_lost": gettext_noop(
        "a peer process was lost at step %(step)d (killed, out of memory or node loss): resumed from the newest "
        "checkpoint, not counted as a crash"
    ),
    "exit_code_other": gettext_noop("the training program exited with code %(exit_code)d at step %(step)d"),
    # instance status changes (services, views, API, admin, budget guard)
    "running": gettext_noop("running"),
    "training_started": gettext_noop("training started"),
    "training": gettext_noop("training"),
    "launch_failed": gettext_noop("launch failed: %(err)s"),
    "waiting_for_capacity": gettext_noop("waiting for capacity"),
    "placed": gettext_noop("placed on %(nodes)s"),
    "stopped_by_user": gettext_noop("stopped by %(user)s"),
    "stopped_through_api": gettext_noop("stopped through the API"),
    "stopped_by_staff": gettext_noop("stopped by staff"),
    "budget_stop": gettext_noop("stopped by the budget guard before the balance ran out (final checkpoint saved)"),
    "restart": gettext_noop("restart"),
    "stopped_before_start": gettext_noop("stopped before start"),
    "automatic_resume": gettext_noop("automatic resume"),
    "rollback": gettext_noop("rollback to step %(step)d"),
    # the interruptible tier (instances.preemption, instances.services.preempting)
    "waiting_for_preemption": gettext_noop(
        "waiting for %(n)d interruptible instance(s) to be preempted (checkpoint, then stop)"
    ),
    "suspended_at_shutdown": gettext_noop(
        "stopped because the portal shut down (checkpoint saved); comes back when it starts again"
    ),
    "waiting_after_preemption": gettext_noop("waiting for capacity to return (preempted)"),
    "preempted_before_start": gettext_noop("preempted before start"),
    "preemption_notice": gettext_noop(
        "preemption notice: an on-demand request needs this capacity; checkpointing, then stopping"
    ),
    "preemption_withdrawn": gettext_noop(
        "preemption notice withdrawn: the on-demand request it was given for no longer waits, so this instance "
        "keeps its capacity"
    ),
    "preempted_interactive": gettext_noop(
        "preempted for an on-demand request (interruptible tier): your disk is kept (the instance's workspace "
        "folder and volumes), running processes are not; it starts again when capacity returns"
    ),
    "preempted_training": gettext_noop(
        "preempted for an on-demand request (interruptible tier): checkpoint saved at the current step, resumes "
        "exactly from it when capacity returns (not a crash)"
    ),
    # an interactive instance runs the user's own command, not the training runtime: no checkpoint wording
    # (instances.backends.base.command_state_for_exit_code, instances.services.reconcile)
    "command_exited": gettext_noop("the command exited with code %(exit_code)s; the disk is kept"),
    "command_killed": gettext_noop("the command was killed by %(signal)s; the disk is kept"),
    "command_stopped": gettext_noop("its processes were ended; the disk (workspace folder and volumes) is kept"),
    "suspended_at_shutdown_interactive": gettext_noop(
        "stopped because the portal shut down: the disk is kept, running processes are not; it starts again "
        "when the portal starts again"
    ),
    "budget_stop_interactive": gettext_noop(
        "stopped by the budget guard before the balance ran out (the disk is kept, running processes are not)"
    ),
    # why the scheduler cannot place a request now (instances.scheduler)
    "sched_invalid_mode": gettext_noop("unknown mode %(mode)s; expected container or bare_metal"),
    "sched_invalid_count": gettext_noop("a request asks for 1 to %(max)d GPUs, not %(gpus)d"),
    "sched_bare_metal": gettext_noop("bare metal"),
    "sched_large": gettext_noop("requests of %(size)d or more GPUs"),
    "sched_hint_or": gettext_noop("%(lower)d or %(upper)d"),
    "sched_not_multiple": gettext_noop(
        "%(why)s take whole %(size)d-GPU %(gpu_type)s nodes: ask for a multiple of %(size)d GPUs (%(hint)s), "
        "not %(gpus)d"
    ),
    "sched_exceeds_quota": gettext_noop(
        "needs %(gpus)d GPUs but the organization's GPU quota is %(quota)d GPUs; ask support to raise the quota"
    ),
    "sched_quota": gettext_noop(
        "the organization's GPU quota is %(quota)d GPUs and %(used)d are in use; this request needs %(gpus)d "
        "(waits until %(more)d more are released)"
    ),
    "sched_no_nodes": gettext_noop("no ready %(gpu_type)s nodes"),
    "sched_free_node": gettext_noop("%(n)d free %(gpu_type)s node"),
    "sched_free_nodes": gettext_noop("%(n)d free %(gpu_type)s nodes"),
    "sched_behind_nodes": gettext_noop("needs %(nodes)s (%(free)d free); waits behind an earlier request"),
    "sched_exceeds_inventory_nodes": gettext_noop("needs %(nodes)s, the inventory has %(have)d (%(free)d free)"),
    "sched_capacity_nodes": gettext_noop("needs %(nodes)s, %(free)d free"),
    "sched_exceeds_inventory_gpus": gettext_noop(
        "needs %(gpus)d %(gpu_type)s GPUs on one node, the largest ready node has %(largest)d"
    ),
    "sched_behind_gpus": gettext_noop(
        "needs %(gpus)d free %(gpu_type)s GPUs on one node; waits behind an earlier request"
    ),
    "sched_capacity_gpus": gettext_noop(
        "needs %(gpus)d free %(gpu_type)s GPUs on one node, the most free on any node is %(most)d"
    ),
    "sched_behind": gettext_noop("needs %(gpus)d %(gpu_type)s GPUs; waits behind an earlier request"),
    # the backend's cause in words (instances.k8s_reasons)
    "k8s_unschedulable": gettext_noop("Waiting for capacity: no node with %(gpus)d free %(gpu)s GPUs (%(detail)s)"),
    "k8s_image_pull": gettext_noop("The container image %(image)s cannot be pulled (%(detail)s)"),
    "k8s_oom_killed": gettext_noop(
        "Out of memory: pod %(pod)s was killed (OOMKilled); use a smaller micro-batch or more GPUs"
    ),
    "k8s_evicted": gettext_noop("Preempted: pod %(pod)s was stopped (%(why)s); resuming from the newest checkpoint"),
    "k8s_node_lost": gettext_noop(
        "Node lost: pod %(pod)s on %(node)s stopped answering; resuming from the newest checkpoint"
    ),
    "k8s_deleted": gettext_noop("The cluster job %(job)s was deleted outside the portal"),
    "pending_timeout": gettext_noop("Did not start within %(minutes)d minutes: %(why)s"),
    "no_reason": gettext_noop("no reason given"),
    "its_node": gettext_noop("its node"),
    # Kubernetes disruption causes (DisruptionTarget / Event reasons), used as a nested ``why``
    "k8s_why_EvictionByEvictionAPI": gettext_noop("evicted by a node drain"),
    "k8s_why_PreemptionByScheduler": gettext_noop("preempted by a higher-priority workload"),
    "k8s_why_DeletionByTaintManager": gettext_noop("node unreachable"),
    "k8s_why_TaintManagerEviction": gettext_noop("node unreachable"),
    "k8s_why_DeletionByPodGC": gettext_noop("node removed from the cluster"),
    "k8s_why_TerminationByKubelet": gettext_noop("node shutting down or out of resources"),
    "k8s_why_DisruptionTarget": gettext_noop("cluster disruption"),
}

MAX_TEXT = 300  # the text columns' length


class Reason(str):
    """A reason's English text (the ``str`` value) with its ``code`` and ``params`` (JSON-able)."""

    code: str
    params: dict[str, Any]

    def __new__(cls, code: str, params: Mapping[str, Any] | None = None) -> Reason:
        if code not in REASON_TEXTS:
            raise KeyError(f"unknown reason code {code!r}; add it to instances.reasons.REASON_TEXTS")
        values = {k: _param_json(v) for k, v in (params or {}).items()}
        obj = super().__new__(cls, reason_text(code, values, translate=None)[:MAX_TEXT])
        obj.code, obj.params = code, values
        return obj

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (and copies) as code + params, not as text
        return (Reason, (self.code, self.params))

    def as_json(self) -> dict[str, Any]:
        """``{"code": …, "params": …}``: the form stored in a nested parameter."""
        return {"code": self.code, "params": self.params}


def reason(code: str, **params: Any) -> Reason:
    """The reason ``code`` with ``params``; raises ``KeyError`` for a code missing from :data:`REASON_TEXTS`."""
    return Reason(code, params)


def reason_fields(value: str) -> tuple[str, dict[str, Any]]:
    """``(code, params)`` of a reason (``("", {})`` for plain text): what the ``*_code`` / ``*_params``
    columns store beside the text."""
    if isinstance(value, Reason):
        return value.code, dict(value.params)
    return "", {}


def _param_json(value: Any) -> Any:
    """A parameter as stored: a nested reason as its JSON form, numbers as they are, anything else as str."""
    if isinstance(value, Reason):
        return value.as_json()
    if isinstance(value, (int, float, bool)) or value is None or isinstance(value, dict):
        return value
    return str(value)


def reason_text(code: str, params: dict[str, Any], *, translate: Any) -> str:
    """``code``'s template (through ``translate``, e.g. ``gettext``, or as written when None) filled with
    ``params``, nested reasons rendered the same way. Raises ``KeyError`` / ``ValueError`` / ``TypeError``
    when the template and the params disagree."""
    template = REASON_TEXTS[code]
    if translate is not None:
        template = translate(template)
    values = {}
    for key, value in params.items():
        if isinstance(value, dict) and value.get("code") in REASON_TEXTS:
            value = reason_text(value["code"], dict(value.get("params") or {}), translate=translate)
        values[key] = value
    return template % values if values else template


def runtime_exit_reason(exit_code: int | None, step: int | None) -> Reason:
    """What the training runtime said when it exited (its ``exit`` event: ``exit_code``, ``step``), as a reason:
    the portal maps the runtime's exit code (``instances/runtime/exitcodes.py``) to a code of
    :data:`REASON_TEXTS`; an unknown code is ``exit_code_other``. The runtime's own English message is not
    part of it: the job page shows it, with the log's last lines, as technical text beside this summary."""
    from instances.runtime import exitcodes

    known = {
        exitcodes.EXIT_FINISHED: "exit_finished",
        exitcodes.EXIT_PREEMPTED: "exit_preempted",
        exitcodes.EXIT_STOPPED: "exit_stopped",
        exitcodes.EXIT_FAILED: "exit_failed",
        exitcodes.EXIT_CONFIG_ERROR: "exit_config_error",
        exitcodes.EXIT_RESUME_REFUSED: "exit_resume_refused",
        exitcodes.EXIT_STORE_UNAVAILABLE: "exit_store_unavailable",
        exitcodes.EXIT_RANK_LOST: "exit_rank_lost",
    }
    at = int(step or 0)
    if exit_code in known:
        return reason(known[exit_code], step=at)
    return reason("exit_code_other", exit_code=int(exit_code if exit_code is not None else -1), step=at)
