"""Launch: validate a request (GPU type, count, mode, quota, runtime config, datasets, balance) and create
the instance and its training job; the price quote shown before launch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.choices import PriceTier, RentalMode
from billing.pricing import PriceNotFound, cumulative_charge_micros, price_quote
from instances import limits, scheduler
from instances.capacity import capacity_refusal
from instances.choices import Engine, InstanceKind, InstanceStatus, ModelPreset
from instances.interactive.idle import MAX_IDLE_AUTOSTOP_MINUTES
from instances.launch_defaults import launch_defaults
from instances.models import GpuType, Image, Instance, TrainingJob
from instances.reasons import Reason
from instances.runtime.config import ConfigError, JobConfig, allowed_degrees
from instances.selectors import gpu_quota_of
from instances.services.backend import _setting
from instances.services.errors import LaunchError
from instances.services.runtime_config import _config_core
from instances.services.scheduling import instances_schedule
from instances.services.transitions import instance_transition
from portal.audit import audit_log
from portal.models import Organization, User
from portal.permissions import Action, authorize

S = InstanceStatus
MAX_COMMAND_ARGS = 256  # the API's bound too (InstanceLaunchSerializer)


@dataclass
class LaunchSpec:
    """What a user asks for. ``gpu_type``: a catalog code; ``mode``: container | bare_metal; for a training
    job (``kind="training"``): ``dataset_version_ids``, ``model_preset``, ``engine``, ``hyperparameters``
    (runtime config fields), checkpoint interval (minutes; steps, 0 = none) and ``keep_last``; every value
    left out (``None``, or a hyperparameter not named) takes the GPU type's default
    (``instances.launch_defaults``: 30 minutes on a GPU, 1 minute and 100 steps on a CPU slot); for an
    interactive instance: ``command`` (argv list run in the image; empty: none, the instance runs for its
    JupyterLab and SSH until it is stopped or idle autostop stops it) and ``idle_autostop_minutes`` (None = the
    organization's default; 0 = off); for both: ``volumes`` (names of the organization's persistent volumes to
    attach, read-write) and ``tier``: on_demand | interruptible (discounted, may be preempted; a training job
    then needs a checkpoint interval). ``elastic_min_gpus`` (training, 0 = off): "resume on at least K GPUs" —
    after a preemption the job may resume on fewer GPUs (``elastic_plan``)."""

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
    checkpoint_every_minutes: int | None = None
    checkpoint_every_steps: int | None = None
    keep_last: int | None = None
    idempotency_key: str = ""
    volumes: list[str] = field(default_factory=list)  # names of the organization's volumes, attached read-write
    tier: str = PriceTier.ON_DEMAND
    idle_autostop_minutes: int | None = None
    elastic_min_gpus: int = 0  # training: a preempted job may resume on at least this many GPUs (0 = off)


def command_valid(command: object) -> bool:
    """Whether ``command`` is an interactive instance's command: a list (or tuple) of at most
    ``MAX_COMMAND_ARGS`` non-empty strings without NUL (an argv ``execve`` takes), or empty (no command)."""
    return (
        isinstance(command, list | tuple)
        and len(command) <= MAX_COMMAND_ARGS
        and all(isinstance(a, str) and a and "\x00" not in a for a in command)
    )


def _with_defaults(spec: LaunchSpec) -> LaunchSpec:
    """``spec`` with every value left out filled from the GPU type's launch defaults."""
    if spec.kind != InstanceKind.TRAINING:
        return spec
    d = launch_defaults(gpu_type=spec.gpu_type)
    hyper = spec.hyperparameters if isinstance(spec.hyperparameters, dict) else None
    return replace(
        spec,
        hyperparameters={**d.hyperparameters, **hyper} if hyper is not None else spec.hyperparameters,
        checkpoint_every_minutes=d.checkpoint_every_minutes
        if spec.checkpoint_every_minutes is None
        else spec.checkpoint_every_minutes,
        checkpoint_every_steps=d.checkpoint_every_steps
        if spec.checkpoint_every_steps is None
        else spec.checkpoint_every_steps,
        keep_last=d.keep_last if spec.keep_last is None else spec.keep_last,
    )


def _validate_launch(
    organization: Organization, spec: LaunchSpec
) -> tuple[GpuType, Image | None, tuple[dict[str, Any], list[int]] | None]:
    """Every check of a launch, with no writes: the GPU type, the image and, for a training job, its
    :func:`elastic_plan` (None for an interactive instance). Raises :class:`LaunchError`."""
    gpu_type = GpuType.objects.filter(code=spec.gpu_type, active=True).first()
    if gpu_type is None:
        raise LaunchError("unknown_gpu_type", _("Unknown GPU type %(code)s.") % {"code": spec.gpu_type}, "gpu_type")
    if not isinstance(spec.gpu_count, int) or not 1 <= spec.gpu_count <= scheduler.MAX_GANG_GPUS:
        raise LaunchError(
            "invalid_gpu_count",
            _("The GPU count must be between 1 and %(max)d.") % {"max": scheduler.MAX_GANG_GPUS},
            "gpu_count",
        )
    if spec.mode not in RentalMode.values:
        raise LaunchError("invalid_mode", _("Unknown mode %(mode)s.") % {"mode": spec.mode}, "mode")
    node_size = gpu_type.gpus_per_node
    if scheduler.needs_whole_nodes(spec.gpu_count, spec.mode, node_size) and spec.gpu_count % node_size:
        raise LaunchError(
            "not_multiple", _("Whole-node requests need a multiple of %(n)d GPUs.") % {"n": node_size}, "gpu_count"
        )
    image = None
    if spec.image:
        image = Image.objects.filter(name=spec.image).first()
        if image is None:
            raise LaunchError("unknown_image", _("Unknown image %(name)s.") % {"name": spec.image}, "image")
    quota = gpu_quota_of(organization)
    if quota is not None and spec.gpu_count > quota:
        raise LaunchError(
            "exceeds_quota",
            _("The request for %(n)d GPUs exceeds your organization's GPU quota of %(q)d.")
            % {"n": spec.gpu_count, "q": quota},
            "gpu_count",
        )
    if spec.tier not in PriceTier.values:
        raise LaunchError(
            "invalid_tier",
            _("Unknown tier %(tier)s: choose one of %(choices)s.")
            % {"tier": spec.tier, "choices": ", ".join(PriceTier.values)},
            "tier",
        )
    elastic = None
    if spec.kind == InstanceKind.INTERACTIVE:
        if not command_valid(spec.command):
            raise LaunchError(
                "invalid",
                _(
                    "The command must be a list of non-empty arguments without NUL characters, or empty for an "
                    "instance used through JupyterLab and SSH."
                ),
                "command",
            )
        idle = spec.idle_autostop_minutes
        if idle is not None and (
            not isinstance(idle, int) or isinstance(idle, bool) or not 0 <= idle <= MAX_IDLE_AUTOSTOP_MINUTES
        ):
            raise LaunchError(
                "invalid",
                _("Idle autostop is 0 (off) to %(max)d minutes, not %(value)s.")
                % {"max": MAX_IDLE_AUTOSTOP_MINUTES, "value": idle},
                "idle_autostop_minutes",
            )
    elif spec.kind == InstanceKind.TRAINING:
        elastic = _validate_training(organization, spec, gpu_type)
    else:
        raise LaunchError("invalid", _("Unknown kind %(kind)s.") % {"kind": spec.kind}, "kind")
    try:
        quote = price_quote(
            organization=organization, gpu_type=gpu_type.code, gpu_count=spec.gpu_count, mode=spec.mode, tier=spec.tier
        )
    except PriceNotFound:
        raise LaunchError(
            "no_price", _("%(code)s has no price for this mode.") % {"code": gpu_type.code}, "gpu_type"
        ) from None
    minutes = int(_setting("INSTANCES_MIN_RUNWAY_MINUTES", 10))
    needed = cumulative_charge_micros(
        price_per_gpu_hour_micros=quote.price_per_gpu_hour_micros, gpus=spec.gpu_count, minutes=minutes
    )
    if quote.balance_micros < needed:
        from billing.money import format_cny

        raise LaunchError(
            "insufficient_funds",
            _(
                "Your balance of %(balance)s CNY does not cover the first %(minutes)d minutes (%(needed)s CNY). "
                "Top up your wallet first."
            )
            % {"balance": format_cny(quote.balance_micros), "minutes": minutes, "needed": format_cny(needed)},
        )
    no_capacity = capacity_refusal(gpu_type=gpu_type.code, gpu_count=spec.gpu_count, mode=spec.mode)
    if no_capacity:
        raise LaunchError("no_capacity", no_capacity, "gpu_type")
    return gpu_type, image, elastic


def _validate_training(
    organization: Organization, spec: LaunchSpec, gpu_type: GpuType
) -> tuple[dict[str, Any], list[int]]:
    """The checks of a training job; returns its :func:`elastic_plan`. Raises :class:`LaunchError`."""
    spec = _with_defaults(spec)  # idempotent: values the launch already filled stay as they are
    if spec.model_preset not in ModelPreset.values:
        raise LaunchError("invalid", _("Unknown model preset %(p)s.") % {"p": spec.model_preset}, "model_preset")
    if spec.engine not in Engine.values:
        raise LaunchError("invalid", _("Unknown engine %(e)s.") % {"e": spec.engine}, "engine")
    try:  # the one table of bounds, shared with the console form and the API serializers
        limits.launch_values_validate(
            {
                "keep_last": spec.keep_last,
                "checkpoint_every_minutes": spec.checkpoint_every_minutes,
                "checkpoint_every_steps": spec.checkpoint_every_steps,
            }
        )
        limits.hyperparameters_validate(spec.hyperparameters)
    except limits.LimitError as exc:
        raise LaunchError("invalid", str(exc), exc.field) from None
    if spec.tier == PriceTier.INTERRUPTIBLE and not spec.checkpoint_every_minutes and not spec.checkpoint_every_steps:
        raise LaunchError(
            "checkpoint_required",
            _(
                "An interruptible training job needs a checkpoint interval (minutes or steps): a preemption "
                "resumes it from its newest checkpoint, and without one every preemption would start it over."
            ),
            "checkpoint_every_minutes",
        )
    try:  # the runtime's own validation, with placeholder paths
        JobConfig.from_dict(
            {
                **_config_core(
                    spec.model_preset,
                    spec.engine,
                    spec.hyperparameters,
                    int(spec.checkpoint_every_minutes or 0),  # checked numbers by now
                    int(spec.checkpoint_every_steps or 0),
                    int(spec.keep_last or 0),
                ),
                "data": ["/placeholder"],
                "checkpoint_dir": "/ckpt",
            }
        )
    except ConfigError as exc:
        raise LaunchError("invalid", str(exc), "hyperparameters") from None
    if not spec.dataset_version_ids:
        raise LaunchError("invalid", _("A training job needs at least one dataset."), "dataset_version_ids")
    from datasets.selectors import versions_mountable_by

    plan = elastic_plan(spec, gpu_type=gpu_type)
    ids = [int(v) for v in spec.dataset_version_ids]
    allowed = set(versions_mountable_by(organization).filter(pk__in=ids).values_list("pk", flat=True))
    for vid in ids:
        if vid not in allowed:
            raise LaunchError(
                "dataset_agreement_required",
                _("Dataset version %(id)d is not available to your organization: accept its license first.")
                % {"id": vid},
                "dataset_version_ids",
            )
    return plan


def elastic_plan(spec: LaunchSpec, *, gpu_type: GpuType) -> tuple[dict[str, Any], list[int]]:
    """The hyperparameters and the smaller GPU counts (largest first) of an elastic training job, or
    ``(spec.hyperparameters, [])`` when ``spec.elastic_min_gpus`` is 0.

    Rule (the runtime's, ``instances.runtime.config.batch_layout``): the global batch — ``global_batch``, else
    ``micro_batch × grad_accum × gpu_count`` — is kept on every count, so a count is allowed only when it
    divides the global batch; it must also be a shape the scheduler places (below a node's size, or whole
    nodes) and hold the model's training state (``instances.runtime.sizing``: 16 bytes a parameter, sharded by
    FSDP, a full copy per GPU under DDP) in the GPU type's memory. The job's ``grad_accum`` becomes derived.

    Raises :class:`LaunchError` (field ``elastic_min_gpus``) for a minimum larger than the job, an engine
    that cannot change its degree (DeepSpeed), a minimum below which no allowed count exists, or a minimum
    whose GPUs cannot hold the model.
    """
    from instances.runtime.sizing import PRESETS, training_bytes_per_device

    k, n, hyper = spec.elastic_min_gpus, spec.gpu_count, dict(spec.hyperparameters)
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise LaunchError("invalid", _("The elastic minimum must be a whole number of GPUs."), "elastic_min_gpus")
    if not k:
        return hyper, []
    if k > n:
        raise LaunchError(
            "elastic_min_too_large",
            _("The elastic minimum of %(k)d GPUs is larger than the job's %(n)d GPUs.") % {"k": k, "n": n},
            "elastic_min_gpus",
        )
    if spec.engine == Engine.DEEPSPEED:
        raise LaunchError(
            "elastic_engine",
            _("Resuming on fewer GPUs needs engine FSDP or DDP; DeepSpeed keeps its own batch size."),
            "elastic_min_gpus",
        )

    def state_bytes(m: int) -> int | None:  # model and optimizer state per GPU on m GPUs; None = unknown
        if spec.model_preset not in PRESETS or not gpu_type.memory_gib:
            return None
        return training_bytes_per_device(spec.model_preset, engine=spec.engine, dp_degree=m)

    have = (gpu_type.memory_gib or 0) * 2**30  # used only where state_bytes knows the memory
    need = state_bytes(k)
    if need is not None and need > have:
        raise LaunchError(
            "elastic_min_too_small",
            _(
                "%(k)d GPUs of %(type)s cannot hold model %(model)s with %(engine)s: it needs %(need).1f GiB "
                "of weights, gradients and optimizer state per GPU, a GPU has %(have)d GiB."
            )
            % {
                "k": k,
                "type": gpu_type.code,
                "model": spec.model_preset,
                "engine": spec.engine,
                "need": need / 2**30,
                "have": gpu_type.memory_gib,
            },
            "elastic_min_gpus",
        )
    global_batch = (
        int(hyper.get("global_batch") or 0) or int(hyper.get("micro_batch", 1)) * int(hyper.get("grad_accum", 1)) * n
    )
    if global_batch % n:
        raise LaunchError(
            "invalid",
            _("The global batch of %(b)d samples does not split over the job's %(n)d GPUs.")
            % {"b": global_batch, "n": n},
            "hyperparameters",
        )
    size = gpu_type.gpus_per_node
    counts = [
        m
        for m in reversed(allowed_degrees(global_batch, up_to=n - 1))
        if m >= k
        and not (scheduler.needs_whole_nodes(m, spec.mode, size) and m % size)
        and ((b := state_bytes(m)) is None or b <= have)
    ]
    if k < n and not counts:
        raise LaunchError(
            "elastic_no_count",
            _(
                "No GPU count from %(k)d to %(last)d keeps the global batch of %(b)d samples (a count must divide "
                "it): raise the elastic minimum or change the batch."
            )
            % {"k": k, "last": n - 1, "b": global_batch},
            "elastic_min_gpus",
        )
    hyper["global_batch"] = global_batch
    hyper.pop("grad_accum", None)  # derived by the runtime on each count
    return hyper, counts


def instance_launch(*, organization: Organization, user: User | None, spec: LaunchSpec) -> Instance:
    """Validate ``spec`` (GPU type, count 1…1024, mode, quota, capacity that could ever take it, datasets with
    agreements, runtime config, price and a balance covering ``INSTANCES_MIN_RUNWAY_MINUTES``) and only then
    create the instance (and its training job with dataset mounts), queue it and run a scheduling pass; a
    placed instance's launch task is enqueued after commit. Nothing is charged here (metering charges running minutes).

    With ``spec.idempotency_key`` a second call returns the first call's instance. Raises
    :class:`LaunchError` (nothing written; ``no_capacity`` when no ready node of the type could take the
    request even entirely free — ``instances.capacity``), ``PermissionRefused`` when the user's role may not
    launch.
    """
    authorize(user=user, organization=organization, action=Action.INSTANCES_LAUNCH)
    if spec.idempotency_key:
        existing = Instance.objects.filter(organization=organization, idempotency_key=spec.idempotency_key).first()
        if existing is not None:
            return existing
    spec = _with_defaults(spec)
    gpu_type, image, elastic = _validate_launch(organization, spec)
    elastic_counts: list[int] = []
    if elastic is not None and spec.elastic_min_gpus:
        hyper, elastic_counts = elastic
        spec = replace(spec, hyperparameters=hyper)
    try:
        with transaction.atomic():
            now = timezone.now()
            instance = Instance.objects.create(
                organization=organization,
                created_by=user,
                name=spec.name or f"{gpu_type.code}×{spec.gpu_count}",
                kind=spec.kind,
                gpu_type=gpu_type,
                gpu_count=spec.gpu_count,
                mode=spec.mode,
                image=image,
                command=list(spec.command),
                submitted_at=now,
                idempotency_key=spec.idempotency_key,
                tier=spec.tier,
                idle_autostop_minutes=_idle_minutes(organization, spec),
                elastic_min_gpus=spec.elastic_min_gpus if spec.kind == InstanceKind.TRAINING else 0,
                elastic_gpu_counts=elastic_counts,
            )
            if spec.kind == InstanceKind.TRAINING:
                job = TrainingJob.objects.create(
                    instance=instance,
                    organization=organization,
                    name=instance.name,
                    model_preset=spec.model_preset,
                    engine=spec.engine,
                    hyperparameters=dict(spec.hyperparameters),
                    dataset_version_ids=[int(v) for v in spec.dataset_version_ids],
                    checkpoint_every_minutes=int(spec.checkpoint_every_minutes or 0),
                    checkpoint_every_steps=int(spec.checkpoint_every_steps or 0),
                    keep_last=int(spec.keep_last or 0),
                )
                job.checkpoint_uri = str(
                    Path(_setting("INSTANCES_CHECKPOINT_ROOT", Path(settings.DATA_DIR) / "checkpoints"))
                    / f"job-{job.pk}"
                )
                job.mounts = _attach_datasets(job, user)
                job.save(update_fields=["checkpoint_uri", "mounts"])
            if spec.volumes:  # a refusal (LaunchError) rolls the launch back: nothing half-made
                from instances.interactive.volumes import volumes_attach

                volumes_attach(instance=instance, names=list(spec.volumes), user=user)
            audit_log(
                action="instances.instance.launch",
                actor=user,
                organization=organization,
                obj=instance,
                extra={
                    "gpu_type": gpu_type.code,
                    "gpus": spec.gpu_count,
                    "mode": spec.mode,
                    "kind": spec.kind,
                    "tier": spec.tier,
                    "elastic_min_gpus": spec.elastic_min_gpus,
                },
            )
            instance_transition(
                instance=instance, to=S.SCHEDULING, reason=Reason("waiting_for_capacity"), acting_user=user, now=now
            )
            instances_schedule()
    except IntegrityError:
        if spec.idempotency_key:
            existing = Instance.objects.filter(organization=organization, idempotency_key=spec.idempotency_key).first()
            if existing is not None:
                return existing
        raise
    instance.refresh_from_db()
    return instance


def _idle_minutes(organization: Organization, spec: LaunchSpec) -> int | None:
    """The instance's idle autostop: the spec's, else the organization's default; never for training jobs."""
    if spec.kind != InstanceKind.INTERACTIVE:
        return None
    return organization.idle_autostop_minutes if spec.idle_autostop_minutes is None else spec.idle_autostop_minutes


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
            m = ds.mount_attach(
                organization=job.organization, user=user, version_id=vid, consumer=f"instances.trainingjob:{job.pk}"
            )
        except DatasetError as exc:
            raise LaunchError("dataset_agreement_required", str(exc), "dataset_version_ids") from exc
        mounts.append({"version_id": vid, "name": f"ds-{vid}", "shard_dir": str(m.shard_dir)})
    return mounts
