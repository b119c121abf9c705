"""Operations on instances and training jobs: launch, schedule, submit, reconcile, resume, rollback, stop,
runtime callbacks, inventory sync — one module per operation, re-exported here so callers read
``from instances.services import instance_launch``.

Every function that changes state runs in one transaction, writes an audit row, and leaves side effects
(Celery enqueue) to ``transaction.on_commit``. Backend calls (``instances.backends``) are made outside
open transactions, from Celery tasks. An instance's status changes only in :func:`instance_transition`.

Where each operation lives:

- ``backend``: the compute backend (the one boundary tests replace: ``instances.services.backend.compute_backend``)
- ``errors``: ``LaunchError``, ``RollbackError``, ``NotRunning``, ``CallbackRefused``
- ``transitions``: ``instance_transition``
- ``launch``: ``LaunchSpec``, validation, ``instance_launch``
- ``scheduling``: ``instances_schedule``, ``attempt_submit``
- ``reconcile``: ``attempt_observe``, ``instances_reconcile``, ``job_resume``, ``instance_stop``
- ``preempting``: ``instance_preempt_backend`` (the interruptible tier's preemption task)
- ``jobs``: ``job_restart``, ``job_rollback``, ``job_checkpoint_now``, ``checkpoint_timers``
- ``callbacks``: ``job_events_receive``
- ``inventory``: ``nodes_sync``, ``node_set_state``
- ``runtime_config``: ``runtime_config``, ``job_spec_for``, ``attempt_token``
"""

from billing.pricing import PriceQuote, price_quote
from instances.selectors import newest_complete_checkpoint
from instances.services.backend import compute_backend, new_idempotency_key
from instances.services.callbacks import job_events_receive
from instances.services.errors import CallbackRefused, LaunchError, NotRunning, RollbackError
from instances.services.inventory import node_set_state, nodes_sync
from instances.services.jobs import checkpoint_timers, job_checkpoint_now, job_restart, job_rollback
from instances.services.launch import LaunchSpec, instance_launch
from instances.services.preempting import instance_preempt_backend
from instances.services.reconcile import (
    attempt_observe,
    instance_stop,
    instance_stop_backend,
    instances_reconcile,
    instances_reconcile_queue,
    job_resume,
    local_jobs_suspend,
)
from instances.services.runtime_config import (
    HYPERPARAMETER_DEFAULTS,
    HYPERPARAMETER_FIELDS,
    attempt_token,
    job_spec_for,
    runtime_config,
)
from instances.services.scheduling import attempt_submit, instances_schedule
from instances.services.transitions import instance_transition

__all__ = [
    "HYPERPARAMETER_DEFAULTS",
    "HYPERPARAMETER_FIELDS",
    "CallbackRefused",
    "LaunchError",
    "LaunchSpec",
    "NotRunning",
    "PriceQuote",
    "RollbackError",
    "attempt_observe",
    "attempt_submit",
    "attempt_token",
    "checkpoint_timers",
    "compute_backend",
    "instance_launch",
    "instance_preempt_backend",
    "instance_stop",
    "instance_stop_backend",
    "instance_transition",
    "instances_reconcile",
    "instances_reconcile_queue",
    "instances_schedule",
    "job_checkpoint_now",
    "job_events_receive",
    "job_restart",
    "job_resume",
    "job_rollback",
    "job_spec_for",
    "local_jobs_suspend",
    "new_idempotency_key",
    "newest_complete_checkpoint",
    "node_set_state",
    "nodes_sync",
    "price_quote",
    "runtime_config",
]
