"""Operations on instances and training jobs: launch, schedule, submit, reconcile, resume, rollback, stop,
runtime callbacks, inventory sync.

Every function that changes state runs in one transaction, writes an audit row, and leaves side effects
(Celery enqueue) to ``transaction.on_commit``. Backend calls (``instances.backends``) are made outside
open transactions, from Celery tasks. An instance's status changes only in :func:`instance_transition`.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.choices import RentalMode
from billing.pricing import PriceNotFound, cumulative_charge_micros, gpu_price_at
from billing.selectors import wallet_balance
from instances import limits, scheduler
from instances.backends.base import (
    BackendError,
    ComputeBackend,
    DatasetMount,
    JobSpec,
    JobStatus,
    UnknownHandle,
    get_backend,
)
from instances.choices import (
    ATTEMPT_TERMINAL,
    HOLDS_CAPACITY,
    RESTING,
    WATCHED,
    AttemptState,
    Engine,
    IllegalTransition,
    InstanceKind,
    InstanceStatus,
    JobOutcome,
    ModelPreset,
    NodeState,
)
from instances.models import (
    Checkpoint,
    GpuType,
    Image,
    Instance,
    JobAttempt,
    JobEvent,
    JobMetric,
    Node,
    TrainingJob,
)
from instances.runtime.config import ConfigError, JobConfig
from instances.runtime.exitcodes import EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED
from instances.selectors import gpu_quota_of, newest_complete_checkpoint
from portal.audit import audit_log
from portal.models import Organization, User
from portal.permissions import Action, authorize, authorize_change
from portal.webhooks.services import webhook_emit

log = logging.getLogger(__name__)
S = InstanceStatus

# Hyperparameters a user may set (runtime config fields) and their defaults for a new job.
HYPERPARAMETER_DEFAULTS: dict[str, Any] = {
    "seq_len": 1024,
    "micro_batch": 8,
    "grad_accum": 1,
    "max_steps": 1000,
    "lr": 3e-4,
    "warmup_steps": 100,
    "seed": 0,
}
HYPERPARAMETER_FIELDS = limits.HYPERPARAMETER_FIELDS


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


# --- the compute backend (the one boundary tests replace) ---------------------------------------------------
def compute_backend() -> ComputeBackend:
    """The configured backend: ``INSTANCES_BACKEND`` (``local`` | ``kubernetes``) with
    ``INSTANCES_BACKEND_OPTIONS``; the local backend's workspaces default to ``<PORTAL_DATA_DIR>/workspaces``."""
    name = _setting("INSTANCES_BACKEND", "local")
    options = dict(_setting("INSTANCES_BACKEND_OPTIONS", {}) or {})
    if name == "local":
        options.setdefault("workspace_root", str(Path(settings.DATA_DIR) / "workspaces"))
    return get_backend(name, **options)


# --- errors ---------------------------------------------------------------------------------------------------
class LaunchError(ValueError):
    """A launch request was refused before anything was created. ``code`` is machine-readable, ``field``
    names the offending input ("" for the request as a whole)."""

    def __init__(self, code: str, message: str, field_name: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.field = field_name


class RollbackError(ValueError):
    """A rollback names no complete checkpoint of this job."""


class CallbackRefused(Exception):
    """A runtime callback had a missing or wrong token (HTTP 401) or a bad body (HTTP 400)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


# --- the one transition function ---------------------------------------------------------------------------
def instance_transition(
    *,
    instance: Instance,
    to: str,
    reason: str = "",
    acting_user: User | None = None,
    now: datetime | None = None,
    **fields: Any,
) -> Instance:
    """Move ``instance`` to status ``to`` if ``INSTANCE_TRANSITIONS`` allows it; the only writer of ``status``.

    Compare-and-set on the current status, so two workers never both apply a change; writes an
    ``InstanceTransition`` row and an audit row; opens a run segment on entering ``running`` and closes the
    open one on leaving it (metering reads them). ``fields``: other Instance columns to set in the same
    update. Raises :class:`IllegalTransition` (nothing written) when the table forbids the move or the
    status changed under us. Returns the refreshed instance. The rule itself (shared with the scheduling
    pass, which moves many instances at once) is :func:`instances.transitions.instances_transition`.
    """
    from instances.transitions import Move, instances_transition

    if not instances_transition(moves=[Move(instance, to, reason, fields)], acting_user=acting_user, now=now):
        fresh = Instance.objects.get(pk=instance.pk).status
        raise IllegalTransition(fresh, to)
    instance.refresh_from_db()
    return instance


def _try_transition(instance: Instance, to: str, reason: str = "", **kw: Any) -> bool:
    """Like :func:`instance_transition` but returns False instead of raising (for idempotent tasks)."""
    try:
        instance_transition(instance=instance, to=to, reason=reason, **kw)
    except IllegalTransition:
        instance.refresh_from_db()
        return False
    return True


# --- launch -------------------------------------------------------------------------------------------------
@dataclass
class LaunchSpec:
    """What a user asks for. ``gpu_type``: a catalog code; ``mode``: container | bare_metal; for a training
    job (``kind="training"``): ``dataset_version_ids``, ``model_preset``, ``engine``, ``hyperparameters``
    (runtime config fields), checkpoint interval (minutes, default 30; steps, default 0 = none) and
    ``keep_last``; for an interactive instance: ``command`` (argv list run in the image)."""

    name: str
    gpu_type: str
    gpu_count: int
    mode: str = RentalMode.CONTAINER
    kind: str = InstanceKind.TRAINING
    image: str = ""
    command: list[str] = field(default_factory=list)
    dataset_version_ids: list[int] = field(default_factory=list)
    model_preset: str = ModelPreset.TINY
    engine: str = Engine.FSDP
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    checkpoint_every_minutes: int = 30
    checkpoint_every_steps: int = 0
    keep_last: int = 3
    idempotency_key: str = ""


@dataclass(frozen=True)
class PriceQuote:
    """Price of a request: micro-CNY per hour for all its GPUs, and how long the balance lasts."""

    price_per_gpu_hour_micros: int
    price_per_hour_micros: int
    balance_micros: int
    runway_minutes: int | None  # None when the price is zero

    @property
    def runway_text(self) -> str:
        """"11 h 40 min" style."""
        if self.runway_minutes is None:
            return "∞"
        hours, minutes = divmod(self.runway_minutes, 60)
        return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def price_quote(*, organization: Organization, gpu_type: str, gpu_count: int, mode: str) -> PriceQuote:
    """Hourly price of ``gpu_count`` GPUs of ``gpu_type`` in ``mode`` now, and the wallet's runway at it
    (whole minutes the balance covers, by the one charging rule). Raises ``PriceNotFound``."""
    price = gpu_price_at(gpu_type=gpu_type, mode=mode)
    balance = wallet_balance(organization=organization).total_micros
    per_hour = cumulative_charge_micros(price_per_gpu_hour_micros=price, gpus=gpu_count, minutes=60)
    runway = None
    if per_hour > 0:
        runway = balance * 60 // per_hour
        while runway > 0 and cumulative_charge_micros(
            price_per_gpu_hour_micros=price, gpus=gpu_count, minutes=runway
        ) > balance:
            runway -= 1
    return PriceQuote(price, per_hour, balance, runway)


def _validate_launch(organization: Organization, spec: LaunchSpec) -> tuple[GpuType, Image | None]:
    """Every check of a launch, with no writes. Raises :class:`LaunchError`."""
    gpu_type = GpuType.objects.filter(code=spec.gpu_type, active=True).first()
    if gpu_type is None:
        raise LaunchError("unknown_gpu_type", _("Unknown GPU type %(code)s.") % {"code": spec.gpu_type}, "gpu_type")
    if not isinstance(spec.gpu_count, int) or not 1 <= spec.gpu_count <= scheduler.MAX_GANG_GPUS:
        raise LaunchError("invalid_gpu_count", _("The GPU count must be between 1 and %(max)d.")
                          % {"max": scheduler.MAX_GANG_GPUS}, "gpu_count")
    if spec.mode not in RentalMode.values:
        raise LaunchError("invalid_mode", _("Unknown mode %(mode)s.") % {"mode": spec.mode}, "mode")
    node_size = gpu_type.gpus_per_node
    if (spec.mode == RentalMode.BARE_METAL or spec.gpu_count >= node_size) and spec.gpu_count % node_size:
        raise LaunchError("not_multiple", _("Whole-node requests need a multiple of %(n)d GPUs.") % {"n": node_size},
                          "gpu_count")
    image = None
    if spec.image:
        image = Image.objects.filter(name=spec.image).first()
        if image is None:
            raise LaunchError("unknown_image", _("Unknown image %(name)s.") % {"name": spec.image}, "image")
    quota = gpu_quota_of(organization)
    if quota is not None and spec.gpu_count > quota:
        raise LaunchError("exceeds_quota", _("The request for %(n)d GPUs exceeds your organization's GPU quota of "
                          "%(q)d.") % {"n": spec.gpu_count, "q": quota}, "gpu_count")
    if spec.kind == InstanceKind.INTERACTIVE:
        if not spec.command or not all(isinstance(a, str) and a for a in spec.command):
            raise LaunchError("invalid", _("An interactive instance needs a command."), "command")
    elif spec.kind == InstanceKind.TRAINING:
        _validate_training(organization, spec)
    else:
        raise LaunchError("invalid", _("Unknown kind %(kind)s.") % {"kind": spec.kind}, "kind")
    try:
        quote = price_quote(organization=organization, gpu_type=gpu_type.code, gpu_count=spec.gpu_count,
                            mode=spec.mode)
    except PriceNotFound:
        raise LaunchError("no_price", _("%(code)s has no price for this mode.") % {"code": gpu_type.code},
                          "gpu_type") from None
    minutes = int(_setting("INSTANCES_MIN_RUNWAY_MINUTES", 10))
    needed = cumulative_charge_micros(price_per_gpu_hour_micros=quote.price_per_gpu_hour_micros,
                                      gpus=spec.gpu_count, minutes=minutes)
    if quote.balance_micros < needed:
        from billing.money import format_cny

        raise LaunchError("insufficient_funds", _(
            "Your balance of %(balance)s CNY does not cover the first %(minutes)d minutes (%(needed)s CNY). "
            "Top up your wallet first.") % {"balance": format_cny(quote.balance_micros), "minutes": minutes,
                                            "needed": format_cny(needed)})
    return gpu_type, image


def _validate_training(organization: Organization, spec: LaunchSpec) -> None:
    if spec.model_preset not in ModelPreset.values:
        raise LaunchError("invalid", _("Unknown model preset %(p)s.") % {"p": spec.model_preset}, "model_preset")
    if spec.engine not in Engine.values:
        raise LaunchError("invalid", _("Unknown engine %(e)s.") % {"e": spec.engine}, "engine")
    try:  # the one table of bounds, shared with the console form and the API serializers
        limits.launch_values_validate({"keep_last": spec.keep_last,
                                       "checkpoint_every_minutes": spec.checkpoint_every_minutes,
                                       "checkpoint_every_steps": spec.checkpoint_every_steps})
        limits.hyperparameters_validate(spec.hyperparameters)
    except limits.LimitError as exc:
        raise LaunchError("invalid", str(exc), exc.field) from None
    try:  # the runtime's own validation, with placeholder paths
        JobConfig.from_dict({**_config_core(spec.model_preset, spec.engine, spec.hyperparameters,
                                            spec.checkpoint_every_minutes, spec.checkpoint_every_steps,
                                            spec.keep_last), "data": ["/placeholder"], "checkpoint_dir": "/ckpt"})
    except ConfigError as exc:
        raise LaunchError("invalid", str(exc), "hyperparameters") from None
    if not spec.dataset_version_ids:
        raise LaunchError("invalid", _("A training job needs at least one dataset."), "dataset_version_ids")
    from datasets.selectors import versions_mountable_by

    ids = [int(v) for v in spec.dataset_version_ids]
    allowed = set(versions_mountable_by(organization).filter(pk__in=ids).values_list("pk", flat=True))
    for vid in ids:
        if vid not in allowed:
            raise LaunchError("dataset_agreement_required", _(
                "Dataset version %(id)d is not available to your organization: accept its license first.")
                % {"id": vid}, "dataset_version_ids")


def _config_core(preset: str, engine: str, hyper: dict[str, Any], every_min: int, every_steps: int,
                 keep_last: int) -> dict[str, Any]:
    return {
        "model": preset,
        "engine": engine,
        **HYPERPARAMETER_DEFAULTS,
        **hyper,
        "checkpoint_every_minutes": float(every_min),
        "checkpoint_every_steps": every_steps,
        "keep_last": keep_last,
    }


def instance_launch(*, organization: Organization, user: User | None, spec: LaunchSpec) -> Instance:
    """Validate ``spec`` (GPU type, count 1…1024, mode, quota, datasets with agreements, runtime config,
    price and a balance covering ``INSTANCES_MIN_RUNWAY_MINUTES``) and only then create the instance (and
    its training job with dataset mounts), queue it and run a scheduling pass; a placed instance's launch
    task is enqueued after commit. Nothing is charged here (metering charges running minutes).

    With ``spec.idempotency_key`` a second call returns the first call's instance. Raises
    :class:`LaunchError` (nothing written).
    """
    authorize(user=user, organization=organization, action=Action.INSTANCES_LAUNCH)
    if spec.idempotency_key:
        existing = Instance.objects.filter(organization=organization, idempotency_key=spec.idempotency_key).first()
        if existing is not None:
            return existing
    gpu_type, image = _validate_launch(organization, spec)
    try:
        with transaction.atomic():
            now = timezone.now()
            instance = Instance.objects.create(
                organization=organization, created_by=user, name=spec.name or f"{gpu_type.code}×{spec.gpu_count}",
                kind=spec.kind, gpu_type=gpu_type, gpu_count=spec.gpu_count, mode=spec.mode, image=image,
                command=list(spec.command), submitted_at=now, idempotency_key=spec.idempotency_key,
            )
            if spec.kind == InstanceKind.TRAINING:
                job = TrainingJob.objects.create(
                    instance=instance, organization=organization, name=instance.name,
                    model_preset=spec.model_preset, engine=spec.engine,
                    hyperparameters={**HYPERPARAMETER_DEFAULTS, **spec.hyperparameters},
                    dataset_version_ids=[int(v) for v in spec.dataset_version_ids],
                    checkpoint_every_minutes=spec.checkpoint_every_minutes,
                    checkpoint_every_steps=spec.checkpoint_every_steps, keep_last=spec.keep_last,
                )
                job.checkpoint_uri = str(Path(_setting("INSTANCES_CHECKPOINT_ROOT",
                                                       Path(settings.DATA_DIR) / "checkpoints")) / f"job-{job.pk}")
                job.mounts = _attach_datasets(job, user)
                job.save(update_fields=["checkpoint_uri", "mounts"])
            audit_log(action="instances.instance.launch", actor=user, organization=organization, obj=instance,
                      extra={"gpu_type": gpu_type.code, "gpus": spec.gpu_count, "mode": spec.mode,
                             "kind": spec.kind})
            instance_transition(instance=instance, to=S.SCHEDULING, reason=_("waiting for capacity"),
                                acting_user=user, now=now)
            instances_schedule()
    except IntegrityError:
        if spec.idempotency_key:
            existing = Instance.objects.filter(organization=organization,
                                               idempotency_key=spec.idempotency_key).first()
            if existing is not None:
                return existing
        raise
    instance.refresh_from_db()
    return instance


def _attach_datasets(job: TrainingJob, user: User | None) -> list[dict[str, Any]]:
    """Mount each dataset version through the dataset app's service; returns JSON-ready mount records.

    ``datasets.services.mount_attach`` raises ``DatasetNotFound`` / ``AgreementRequired``; both become a
    :class:`LaunchError` and roll the launch back.
    """
    from datasets import services as ds
    from datasets.errors import DatasetError

    mounts = []
    for vid in job.dataset_version_ids:
        try:
            m = ds.mount_attach(organization=job.organization, user=user, version_id=vid,
                                consumer=f"instances.trainingjob:{job.pk}")
        except DatasetError as exc:
            raise LaunchError("dataset_agreement_required", str(exc), "dataset_version_ids") from exc
        mounts.append({"version_id": vid, "name": f"ds-{vid}", "shard_dir": str(m.shard_dir)})
    return mounts


# --- scheduling ---------------------------------------------------------------------------------------------
def instances_schedule(*, now: datetime | None = None) -> list[Instance]:
    """One pass of the gang scheduler over the queue (instances in ``scheduling``), FIFO with restricted
    backfill (``instances.scheduler.schedule_queue``). Placed instances move to ``provisioning`` with a new
    attempt, and their launch task is enqueued after commit; waiting ones get their queue position and
    reason; permanently unplaceable ones fail. Passes serialize on an advisory lock and lock only the nodes
    they choose; the writes are set-based (``instances.scheduling_pass``). Returns the instances placed."""
    from instances.scheduling_pass import schedule_pass

    return schedule_pass(now=now, backend=_setting("INSTANCES_BACKEND", "local"),
                         on_attempt=functools.partial(_enqueue, "launch_attempt"))


def attempt_token(attempt: JobAttempt) -> str:
    """The bearer token of an attempt: HMAC-SHA256 of its id, keyed by ``SECRET_KEY``.

    Recomputable by the launch task (so a retried launch writes the same config the first submit used),
    never stored: the database holds only its SHA-256. Each attempt has its own token, so a leftover
    process of an old attempt cannot report into a new one.
    """
    message = f"gpu-portal:attempt:{attempt.pk}:{attempt.instance_id}:{attempt.number}"
    mac = hmac.new(settings.SECRET_KEY.encode(), message.encode(), hashlib.sha256)
    return "gpj_" + mac.hexdigest()


def _enqueue(task_name: str, *args: Any) -> None:
    from instances import tasks

    getattr(tasks, task_name).delay(*args)


# --- submit (launch task) ---------------------------------------------------------------------------------
def runtime_config(attempt: JobAttempt) -> dict[str, Any]:
    """The runtime's config (``instances.runtime.config.JobConfig`` fields) for ``attempt`` of a job."""
    job = attempt.job
    assert job is not None
    site = str(_setting("SITE_URL", "http://127.0.0.1:8000")).rstrip("/")
    local = attempt.backend == "local"
    data = [m["shard_dir"] if local else f"/data/{m['name']}" for m in job.mounts]
    cfg = {
        **_config_core(job.model_preset, job.engine, job.hyperparameters, job.checkpoint_every_minutes,
                       job.checkpoint_every_steps, job.keep_last),
        "data": data,
        "checkpoint_dir": job.checkpoint_uri,
        "callback_url": f"{site}/api/v1/runtime/jobs/{job.pk}",
        "job_token": attempt_token(attempt),
        "attempt": attempt.number,
        "resume_step": attempt.resume_from_step,
        "extra": {"job_id": job.pk, "instance_id": attempt.instance_id},
    }
    JobConfig.from_dict(cfg)  # refuse here rather than in the job
    return cfg


def job_spec_for(attempt: JobAttempt) -> JobSpec:
    """The backend ``JobSpec`` of an attempt: runtime config (or the user's command), placement, mounts."""
    instance = attempt.instance
    placement = tuple((str(n), int(g)) for n, g in attempt.placement) or (("local", instance.gpu_count),)
    job = attempt.job
    mounts = tuple(DatasetMount(m["name"], m["shard_dir"], f"/data/{m['name']}") for m in (job.mounts if job else []))
    return JobSpec(
        job_id=f"job-{job.pk}" if job else f"instance-{instance.pk}",
        attempt=attempt.number,
        image=instance.image.reference if instance.image else _setting("INSTANCES_DEFAULT_IMAGE", "gpu-portal/runtime"),
        placement=placement,
        nproc_per_node=max(g for _, g in placement),
        config_json=json.dumps(runtime_config(attempt)) if job else None,
        command=list(instance.command) if not job else None,
        env={"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
             "OMP_NUM_THREADS": str(_setting("INSTANCES_OMP_THREADS", 1))},
        dataset_mounts=mounts,
        checkpoint_uri=job.checkpoint_uri if job else "",
        termination_grace_s=int(_setting("INSTANCES_STOP_GRACE_S", 120)),
    )


def attempt_submit(*, attempt_id: int) -> JobAttempt:
    """Submit an attempt to the backend (the launch task). Idempotent: an attempt with a handle, or whose
    instance no longer waits to start, is left alone; the backend itself dedupes ``(job_id, attempt)``.
    A backend refusal fails the instance with the backend's message."""
    attempt = JobAttempt.objects.select_related("instance", "instance__image", "job").get(pk=attempt_id)
    instance = attempt.instance
    if attempt.handle or instance.status != S.PROVISIONING or attempt.state != AttemptState.PENDING:
        return attempt
    latest = instance.attempts.order_by("-number").values_list("pk", flat=True).first()
    if latest != attempt.pk:
        return attempt
    try:
        spec = job_spec_for(attempt)
        handle = compute_backend().submit(spec)
    except (BackendError, ConfigError) as exc:
        with transaction.atomic():
            JobAttempt.objects.filter(pk=attempt.pk).update(state=AttemptState.FAILED, message=str(exc)[:300],
                                                            ended_at=timezone.now())
            _try_transition(instance, S.FAILED, _("launch failed: %(err)s") % {"err": exc})
            _job_finish(instance, JobOutcome.FAILED)
            webhook_emit(organization=instance.organization, event_type="job.failed", data={"job_id": attempt.job_id,
                         "instance_id": instance.pk, "attempt": attempt.number, "exit_code": None,
                         "message": str(exc)[:300]})
        return attempt
    JobAttempt.objects.filter(pk=attempt.pk, handle="").update(handle=handle, submitted_at=timezone.now())
    attempt.refresh_from_db()
    instance.refresh_from_db()
    if instance.status == S.STOPPING:  # stopped while we were submitting
        _enqueue("stop_instance", instance.pk)
    return attempt


# --- reconcile ----------------------------------------------------------------------------------------------
def _job_finish(instance: Instance, outcome: str) -> None:
    TrainingJob.objects.filter(instance=instance).update(outcome=outcome, next_resume_at=None,
                                                         stop_requested=False, checkpoint_requested=False)


def attempt_observe(*, attempt: JobAttempt, status: JobStatus, now: datetime | None = None) -> Instance:
    """Apply what the backend says about ``attempt`` to it and its instance (idempotent).

    running → the instance is ``running``. finished → ``stopped`` (job outcome finished). stopped → ``stopped``
    (or a restart when a rollback / restart asked for it). preempted, or processes gone without an exit code
    and without a stop request (a lost node) → ``preempted``, resumed after ``INSTANCES_PREEMPT_RESUME_DELAY_S``
    without touching the crash budget. A crash → ``failed``; resumed with exponential backoff
    (``INSTANCES_RESUME_BACKOFF_S`` × 2^(n-1)) while ``crash_count`` ≤ ``INSTANCES_MAX_CRASH_RESUMES``.
    A config error or a refused resume is not retried.
    """
    now = now or timezone.now()
    instance = attempt.instance
    instance.refresh_from_db()
    if status.state == "running":
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, _("running"), now=now)
        JobAttempt.objects.filter(pk=attempt.pk, state=AttemptState.PENDING).update(state=AttemptState.RUNNING)
        return instance
    if not status.terminal:
        return instance
    with transaction.atomic():
        claimed = JobAttempt.objects.filter(pk=attempt.pk).exclude(state__in=ATTEMPT_TERMINAL).update(
            state=status.state, exit_code=status.exit_code, message=status.message[:300],
            ended_at=status.finished_at or now,
        )
        if not claimed:
            return instance
        instance.refresh_from_db()
        if instance.status not in WATCHED:
            return instance
        job = TrainingJob.objects.select_for_update().filter(instance=instance).first()
        state = status.state
        lost_node = state == "failed" and status.exit_code is None and instance.status != S.STOPPING
        if state == "succeeded":
            _try_transition(instance, S.STOPPED, _("finished"), now=now, placement=[])
            _job_finish(instance, JobOutcome.FINISHED)
            webhook_emit(organization=instance.organization, event_type="job.finished",
                         data={"job_id": attempt.job_id, "instance_id": instance.pk, "attempt": attempt.number})
        elif state == "stopped" or instance.status == S.STOPPING:
            _try_transition(instance, S.STOPPED, status.message or _("stopped"), now=now, placement=[])
            if job is not None and job.restart_after_stop:
                TrainingJob.objects.filter(pk=job.pk).update(restart_after_stop=False, stop_requested=False,
                                                             next_resume_at=now, outcome=JobOutcome.NONE)
            else:
                _job_finish(instance, JobOutcome.STOPPED)
        elif state == "preempted" or lost_node:
            reason = status.message if state == "preempted" else _("node lost: %(msg)s") % {"msg": status.message}
            _try_transition(instance, S.PREEMPTED, reason, now=now, placement=[])
            webhook_emit(organization=instance.organization, event_type="job.preempted", data={
                "job_id": attempt.job_id, "instance_id": instance.pk, "attempt": attempt.number, "message": reason})
            delay = float(_setting("INSTANCES_PREEMPT_RESUME_DELAY_S", 0))
            if job is not None:
                TrainingJob.objects.filter(pk=job.pk).update(
                    preempt_count=F("preempt_count") + 1, next_resume_at=now + timedelta(seconds=delay),
                    stop_requested=False, checkpoint_requested=False)
        else:  # crashed
            _try_transition(instance, S.FAILED, status.message, now=now, placement=[])
            webhook_emit(organization=instance.organization, event_type="job.failed", data={"job_id": attempt.job_id,
                         "instance_id": instance.pk, "attempt": attempt.number, "exit_code": status.exit_code,
                         "message": status.message[:300]})
            if job is None:
                return instance
            no_retry = status.exit_code in (EXIT_CONFIG_ERROR, EXIT_RESUME_REFUSED)
            crashes = job.crash_count + 1
            limit = int(_setting("INSTANCES_MAX_CRASH_RESUMES", 3))
            if no_retry or crashes > limit:
                TrainingJob.objects.filter(pk=job.pk).update(crash_count=crashes, outcome=JobOutcome.FAILED,
                                                             next_resume_at=None)
            else:
                backoff = float(_setting("INSTANCES_RESUME_BACKOFF_S", 30)) * 2 ** (crashes - 1)
                TrainingJob.objects.filter(pk=job.pk).update(crash_count=crashes,
                                                             next_resume_at=now + timedelta(seconds=backoff))
    instance.refresh_from_db()
    return instance


def instances_reconcile(*, now: datetime | None = None, backend: ComputeBackend | None = None) -> dict[str, int]:
    """The periodic reconcile: backend status of every watched attempt → transitions; resume jobs whose
    resume time has come; run a scheduling pass. Safe to run twice or concurrently (every change is a
    compare-and-set). Returns counts ``{"observed", "resumed", "placed"}``."""
    now = now or timezone.now()
    backend = backend or compute_backend()
    if not Node.objects.exists():  # a fresh install: take the inventory now rather than at the next sync
        nodes_sync(backend=backend, now=now)
    observed = 0
    for attempt in JobAttempt.objects.filter(instance__status__in=WATCHED).exclude(handle="").exclude(
            state__in=ATTEMPT_TERMINAL).select_related("instance"):
        try:
            st = backend.status(attempt.handle)
        except UnknownHandle as exc:
            st = JobStatus("failed", None, f"backend lost the job: {exc}")
        except BackendError as exc:
            log.warning("reconcile: status of %s failed: %s", attempt.handle, exc)
            continue
        attempt_observe(attempt=attempt, status=st, now=now)
        observed += 1
    # instances stopping without a submitted attempt (stopped during provisioning) end now
    for inst in Instance.objects.filter(status=S.STOPPING).exclude(attempts__handle__gt=""):
        _try_transition(inst, S.STOPPED, _("stopped before start"), now=now, placement=[])
    resumed = 0
    due = TrainingJob.objects.filter(instance__status__in=RESTING, next_resume_at__lte=now,
                                     outcome=JobOutcome.NONE).select_related("instance")
    for job in due:
        if job_resume(job=job, reason=_("automatic resume"), now=now):
            resumed += 1
    placed = instances_schedule(now=now)
    return {"observed": observed, "resumed": resumed, "placed": len(placed)}


def job_resume(*, job: TrainingJob, reason: str, acting_user: User | None = None,
               now: datetime | None = None) -> bool:
    """Queue a resting job's instance again (``scheduling``); its next attempt resumes from the newest
    complete checkpoint, or from ``job.resume_step`` after a rollback. Returns False if the instance was
    not resting (someone else resumed or stopped it)."""
    with transaction.atomic():
        instance = job.instance
        instance.refresh_from_db()
        if instance.status not in RESTING:
            return False
        TrainingJob.objects.filter(pk=job.pk).update(next_resume_at=None, outcome=JobOutcome.NONE)
        ok = _try_transition(instance, S.SCHEDULING, reason, acting_user=acting_user, now=now,
                             submitted_at=now or timezone.now())
        if ok:
            audit_log(action="instances.job.resume", actor=acting_user, organization=job.organization, obj=job,
                      extra={"reason": reason, "resume_step": job.resume_step})
            webhook_emit(organization=job.organization, event_type="job.resumed", data={
                "job_id": job.pk, "instance_id": instance.pk, "reason": reason, "resume_step": job.resume_step})
        return ok


# --- stop, restart, rollback, checkpoint now ------------------------------------------------------------------
def instance_stop(*, instance: Instance, reason: str, acting_user: User | None = None,
                  staff: bool = False) -> Instance:
    """Stop an instance, final checkpoint first (the interface the budget guard calls).

    Waiting (pending / scheduling) or resting (failed / preempted) instances stop at once (an auto-resume is
    cancelled). A provisioning or running one moves to ``stopping``: the runtime is asked to checkpoint and
    exit (callback ``stop_requested``) and the stop task then stops the backend attempt (SIGTERM, whose
    handler also saves a checkpoint, then SIGKILL after the grace period). Stopping a stopping or stopped
    instance changes nothing. Returns the refreshed instance.
    """
    authorize_change(user=acting_user, organization=instance.organization, created_by_id=instance.created_by_id,
                     staff=staff)
    with transaction.atomic():
        instance.refresh_from_db()
        status = instance.status
        if status in (S.PENDING, S.SCHEDULING, S.FAILED, S.PREEMPTED):
            instance_transition(instance=instance, to=S.STOPPED, reason=reason, acting_user=acting_user,
                                placement=[], queue_position=None)
            _job_finish(instance, JobOutcome.STOPPED)
            transaction.on_commit(lambda: _enqueue("schedule"))
        elif status in (S.PROVISIONING, S.RUNNING):
            instance_transition(instance=instance, to=S.STOPPING, reason=reason, acting_user=acting_user)
            TrainingJob.objects.filter(instance=instance).update(stop_requested=True, next_resume_at=None)
            transaction.on_commit(functools.partial(_enqueue, "stop_instance", instance.pk))
        else:
            return instance
        audit_log(action="instances.instance.stop", actor=acting_user, organization=instance.organization,
                  obj=instance, extra={"reason": reason, "from": status})
    instance.refresh_from_db()
    return instance


def instance_stop_backend(*, instance_id: int) -> Instance:
    """The stop task: stop the current attempt on the backend (grace ``INSTANCES_STOP_GRACE_S``), record the
    outcome, then offer the freed capacity to the queue. Idempotent."""
    instance = Instance.objects.get(pk=instance_id)
    if instance.status != S.STOPPING:
        return instance
    attempt = instance.attempts.exclude(handle="").order_by("-number").first()
    if attempt is None:
        _try_transition(instance, S.STOPPED, _("stopped before start"), placement=[])
    else:
        backend = compute_backend()
        try:
            st = backend.stop(attempt.handle, float(_setting("INSTANCES_STOP_GRACE_S", 120)))
        except UnknownHandle as exc:
            st = JobStatus("stopped", None, str(exc))
        if not st.terminal:
            return instance  # the reconcile finishes it when the backend does
        attempt_observe(attempt=attempt, status=st)
    instances_reconcile_queue()
    instance.refresh_from_db()
    return instance


def instances_reconcile_queue() -> None:
    """Resume jobs that are due and offer capacity to the queue (after a stop freed some)."""
    now = timezone.now()
    for job in TrainingJob.objects.filter(instance__status__in=RESTING, next_resume_at__lte=now,
                                          outcome=JobOutcome.NONE).select_related("instance"):
        job_resume(job=job, reason=_("restart"), now=now)
    instances_schedule(now=now)


def job_restart(*, job: TrainingJob, acting_user: User | None = None, resume_step: int = -1,
                reason: str = "") -> TrainingJob:
    """Restart a job from its newest complete checkpoint (or ``resume_step``): a resting instance is queued
    at once; a running one is stopped first (with a final checkpoint) and queued when it has stopped."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    with transaction.atomic():
        job = TrainingJob.objects.select_for_update().get(pk=job.pk)
        instance = job.instance
        if resume_step >= 0:
            job.resume_step = resume_step
            job.save(update_fields=["resume_step"])
        if instance.status in RESTING:
            job_resume(job=job, reason=reason or _("restart"), acting_user=acting_user)
            transaction.on_commit(lambda: _enqueue("schedule"))
        elif instance.status in HOLDS_CAPACITY and instance.status != S.STOPPING:
            TrainingJob.objects.filter(pk=job.pk).update(restart_after_stop=True)
            instance_stop(instance=instance, reason=reason or _("restart"), acting_user=acting_user)
        elif instance.status == S.STOPPING:
            TrainingJob.objects.filter(pk=job.pk).update(restart_after_stop=True)
        audit_log(action="instances.job.restart", actor=acting_user, organization=job.organization, obj=job,
                  extra={"resume_step": resume_step})
    job.refresh_from_db()
    return job


def job_rollback(*, job: TrainingJob, checkpoint_id: int, acting_user: User | None = None) -> TrainingJob:
    """Restart ``job`` from one of its complete checkpoints: later checkpoints are set aside (the runtime
    moves their folders away, the portal marks them ``rolled_back``), and the next attempt starts with the
    runtime config's ``resume_step``. Raises :class:`RollbackError` (nothing written) for a checkpoint that
    is not a complete, current checkpoint of this job."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    try:
        cp_id = int(checkpoint_id)
    except (TypeError, ValueError):
        raise RollbackError(_("Unknown checkpoint.")) from None
    cp = job.checkpoints.filter(pk=cp_id, complete=True, rolled_back=False).first()
    if cp is None:
        raise RollbackError(_("Unknown checkpoint."))
    with transaction.atomic():
        job.checkpoints.filter(step__gt=cp.step).update(rolled_back=True)
        audit_log(action="instances.job.rollback", actor=acting_user, organization=job.organization, obj=job,
                  extra={"checkpoint": cp.pk, "step": cp.step})
        return job_restart(job=job, acting_user=acting_user, resume_step=cp.step,
                           reason=_("rollback to step %(step)d") % {"step": cp.step})


def job_checkpoint_now(*, job: TrainingJob, acting_user: User | None = None) -> TrainingJob:
    """Ask the running job for a checkpoint now: answered to the runtime on its next callback (within its
    ``report_interval_s``)."""
    authorize_change(user=acting_user, organization=job.organization, created_by_id=job.instance.created_by_id)
    with transaction.atomic():
        TrainingJob.objects.filter(pk=job.pk).update(checkpoint_requested=True)
        audit_log(action="instances.job.checkpoint_now", actor=acting_user, organization=job.organization,
                  obj=job)
    job.refresh_from_db()
    return job


def checkpoint_timers(*, now: datetime | None = None) -> int:
    """Backstop for the runtime's own interval: a running job whose newest checkpoint (or start) is older than
    1.5 × its interval is asked for a checkpoint. Returns how many were asked."""
    now = now or timezone.now()
    asked = 0
    for job in TrainingJob.objects.filter(instance__status=S.RUNNING, checkpoint_requested=False,
                                          checkpoint_every_minutes__gt=0).select_related("instance"):
        newest = job.checkpoints.order_by("-created_at").values_list("created_at", flat=True).first()
        since = newest or job.instance.transitions.filter(to_status=S.RUNNING).order_by("-id").values_list(
            "created_at", flat=True).first()
        if since and now - since > timedelta(minutes=1.5 * job.checkpoint_every_minutes):
            asked += TrainingJob.objects.filter(pk=job.pk, checkpoint_requested=False).update(
                checkpoint_requested=True)
    return asked


# --- runtime callbacks ----------------------------------------------------------------------------------------
def job_events_receive(*, job_id: int, token: str, body: Any, now: datetime | None = None) -> dict[str, bool]:
    """Handle one runtime POST (contract in ``instances/runtime/reporting.py``): authenticate by the
    attempt's token, store each event once per ``(job, attempt, seq)`` and apply the new ones (metrics,
    checkpoints, attempt state); answer ``{"checkpoint_requested", "stop_requested"}`` (a checkpoint request
    is answered once; an attempt that is no longer the newest is told to stop and moves no state).
    Raises :class:`CallbackRefused` (401 bad token, 400 bad body)."""
    now = now or timezone.now()
    digest = hashlib.sha256(token.encode()).hexdigest() if token else ""
    attempt = JobAttempt.objects.select_related("instance", "job").filter(
        job_id=job_id, token_sha256=digest).first() if digest else None
    if attempt is None or attempt.job is None or not hmac.compare_digest(digest, attempt.token_sha256):
        raise CallbackRefused("invalid job token", 401)
    if not isinstance(body, dict) or body.get("attempt") != attempt.number or not isinstance(body.get("events"),
                                                                                              list):
        raise CallbackRefused("body must be {attempt: <this token's attempt>, events: [...]}", 400)
    job = attempt.job
    with transaction.atomic():
        TrainingJob.objects.select_for_update().filter(pk=job.pk).first()
        # An older attempt still reporting (a partitioned node that kept training) is recorded but moves no
        # state, and is told to stop.
        current = attempt.number == JobAttempt.objects.filter(instance_id=attempt.instance_id).order_by(
            "-number").values_list("number", flat=True).first()
        for ev in body["events"]:
            if not isinstance(ev, dict) or not isinstance(ev.get("seq"), int) or not isinstance(ev.get("type"), str):
                raise CallbackRefused("each event needs an integer seq and a type", 400)
            try:
                with transaction.atomic():
                    JobEvent.objects.create(job=job, attempt=attempt.number, seq=ev["seq"], type=ev["type"][:20],
                                            payload=ev, received_at=now)
            except IntegrityError:
                continue  # already received: resending is safe
            _apply_event(job, attempt, ev, now, current=current)
        job.refresh_from_db()
        checkpoint = TrainingJob.objects.filter(pk=job.pk, checkpoint_requested=True).update(
            checkpoint_requested=False) == 1
        stop = job.stop_requested or attempt.instance.status == S.STOPPING or not current
    return {"checkpoint_requested": checkpoint, "stop_requested": stop}


def _apply_event(job: TrainingJob, attempt: JobAttempt, ev: dict[str, Any], now: datetime, *,
                 current: bool) -> None:
    kind = ev["type"]
    step = ev.get("step")
    if kind in ("started", "progress") and not current:
        if kind == "progress" and isinstance(step, int):
            JobMetric.objects.bulk_create([JobMetric(
                job=job, attempt=attempt, step=step, loss=float(ev.get("loss", 0.0)), lr=float(ev.get("lr", 0.0)),
                tokens_per_s=float(ev.get("tokens_per_s", 0.0)), tokens_seen=int(ev.get("tokens_seen", 0)),
                reported_at=now)], ignore_conflicts=True)
        return
    if kind == "started":
        JobAttempt.objects.filter(pk=attempt.pk).update(started_step=int(step or 0))
        JobAttempt.objects.filter(pk=attempt.pk, state=AttemptState.PENDING).update(state=AttemptState.RUNNING)
        instance = Instance.objects.get(pk=attempt.instance_id)
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, _("training started"), now=now)
    elif kind == "progress" and isinstance(step, int):
        JobMetric.objects.bulk_create([JobMetric(
            job=job, attempt=attempt, step=step, loss=float(ev.get("loss", 0.0)), lr=float(ev.get("lr", 0.0)),
            tokens_per_s=float(ev.get("tokens_per_s", 0.0)), tokens_seen=int(ev.get("tokens_seen", 0)),
            reported_at=now)], ignore_conflicts=True)
        TrainingJob.objects.filter(pk=job.pk).update(last_step=step, tokens_seen=int(ev.get("tokens_seen", 0)))
        JobAttempt.objects.filter(pk=attempt.pk, first_step_at__isnull=True).update(first_step_at=now)
        instance = Instance.objects.get(pk=attempt.instance_id)
        if instance.status == S.PROVISIONING:
            _try_transition(instance, S.RUNNING, _("training"), now=now)
    elif kind == "checkpoint" and isinstance(step, int):
        Checkpoint.objects.update_or_create(job=job, step=step, defaults={
            "attempt": attempt, "location": str(ev.get("path", ""))[:500], "size_bytes": int(ev.get("bytes", 0)),
            "loss": ev.get("loss"), "complete": True, "rolled_back": False, "created_at": now})
        webhook_emit(organization=job.organization, event_type="job.checkpoint_committed", data={"job_id": job.pk,
                     "instance_id": attempt.instance_id, "attempt": attempt.number, "step": step,
                     "size_bytes": int(ev.get("bytes", 0)), "loss": ev.get("loss")})
    elif kind == "exit":
        JobAttempt.objects.filter(pk=attempt.pk).update(
            message=f"{ev.get('reason', '')}: {ev.get('message', '')}"[:300])


# --- inventory ------------------------------------------------------------------------------------------------
def nodes_sync(*, backend: ComputeBackend | None = None, now: datetime | None = None) -> int:
    """Upsert ``Node`` rows from the backend's inventory (name, GPU type, GPUs, block, free GPUs). A node the
    backend reports as draining / cordoned is marked so; the portal's own cordon is never undone here. Nodes
    of GPU types not in the catalog are skipped. Returns the number of nodes seen."""
    backend = backend or compute_backend()
    now = now or timezone.now()
    types = {t.code: t for t in GpuType.objects.all()}
    seen = 0
    with transaction.atomic():
        for view in backend.inventory():
            gpu_type = types.get(view.gpu_type)
            if gpu_type is None:
                log.warning("inventory: node %s has GPU type %s, not in the catalog", view.name, view.gpu_type)
                continue
            node, created = Node.objects.get_or_create(name=view.name, defaults={
                "gpu_type": gpu_type, "gpus": view.gpus_total, "block": view.block, "state": view.state,
                "backend_free_gpus": view.gpus_free, "last_seen_at": now})
            if not created:
                node.gpu_type, node.gpus, node.block = gpu_type, view.gpus_total, view.block
                node.backend_free_gpus, node.last_seen_at = view.gpus_free, now
                if view.state != NodeState.READY:
                    node.state = view.state
                node.save()
            seen += 1
    return seen


def node_set_state(*, node: Node, state: str, acting_user: User | None = None) -> Node:
    """Cordon (no new work), drain (no new work; running work is left to finish) or make ready a node."""
    if state not in NodeState.values:
        raise ValueError(f"unknown node state {state!r}")
    with transaction.atomic():
        old = node.state
        Node.objects.filter(pk=node.pk).update(state=state)
        audit_log(action=f"instances.node.{state}", actor=acting_user, obj=node, staff=True,
                  extra={"from": old, "to": state})
    node.refresh_from_db()
    return node


def new_idempotency_key() -> str:
    """A random key (for callers that want one)."""
    return secrets.token_urlsafe(16)


__all__ = [
    "CallbackRefused",
    "LaunchError",
    "LaunchSpec",
    "RollbackError",
    "attempt_submit",
    "checkpoint_timers",
    "compute_backend",
    "instance_launch",
    "instance_stop",
    "instance_transition",
    "instances_reconcile",
    "instances_schedule",
    "job_checkpoint_now",
    "job_events_receive",
    "job_restart",
    "job_resume",
    "job_rollback",
    "newest_complete_checkpoint",
    "nodes_sync",
    "price_quote",
]


def local_jobs_suspend(*, grace_s: int | None = None) -> list[str]:
    """Stop every attempt still running on the *local* backend (SIGTERM: the runtime saves a checkpoint and
    exits as preempted), e.g. when the embedded product (``manage.py runportal``) shuts down, so that no
    training process outlives it. The next reconcile sees them as preempted and resumes them on restart.
    Returns the handles stopped. Does nothing for the Kubernetes backend, whose pods outlive workers.
    """
    if _setting("INSTANCES_BACKEND", "local") != "local":
        return []
    backend = compute_backend()
    handles = list(JobAttempt.objects.filter(backend="local", state__in=["pending", "running"])
                   .exclude(handle="").values_list("handle", flat=True))
    grace = _setting("INSTANCES_STOP_GRACE_S", 120) if grace_s is None else grace_s
    stopped = []
    for handle in handles:
        try:
            backend.stop(handle, grace)
        except Exception:  # a vanished workspace must not keep the others running
            log.exception("could not stop local attempt %s", handle)
            continue
        stopped.append(handle)
    return stopped
