"""What an attempt runs with: the runtime config (hyperparameters, data, checkpoints, callback token) and
the backend ``JobSpec``."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from django.conf import settings

from instances import limits
from instances.backends.base import DatasetMount, JobSpec, VolumeMount
from instances.interactive.jupyter import jupyter_env
from instances.launch_defaults import GPU_DEFAULTS
from instances.models import Instance, JobAttempt
from instances.runtime.config import JobConfig
from instances.services.backend import _setting

# Hyperparameters of a new job on a GPU (a CPU slot's own: ``instances.launch_defaults``); a job stores its
# full set at launch, so these only fill a config whose job predates a field.
HYPERPARAMETER_DEFAULTS: dict[str, Any] = GPU_DEFAULTS.hyperparameters
HYPERPARAMETER_FIELDS = limits.HYPERPARAMETER_FIELDS


def _config_core(
    preset: str, engine: str, hyper: dict[str, Any], every_min: int, every_steps: int, keep_last: int
) -> dict[str, Any]:
    return {
        "model": preset,
        "engine": engine,
        **HYPERPARAMETER_DEFAULTS,
        **hyper,
        "checkpoint_every_minutes": float(every_min),
        "checkpoint_every_steps": every_steps,
        "keep_last": keep_last,
    }


def attempt_token(attempt: JobAttempt) -> str:
    """The bearer token of an attempt: ``gpj_`` + HMAC-SHA256, keyed by ``SECRET_KEY``, of the attempt's
    random ``token_salt`` (made with the row, :func:`attempt_tokens_new`); an attempt made before salts
    existed (``token_salt`` empty): of its id, instance and number.

    Recomputable by the launch task (so a retried launch writes the same config the first submit used),
    never stored: the database holds only its SHA-256. Each attempt has its own token, so a leftover
    process of an old attempt cannot report into a new one.
    """
    salt = attempt.token_salt
    message = f"v2:{salt}" if salt else f"{attempt.pk}:{attempt.instance_id}:{attempt.number}"
    return _token(hmac.new(settings.SECRET_KEY.encode(), digestmod=hashlib.sha256), message)


def _token(keyed: hmac.HMAC, message: str) -> str:
    """``gpj_`` + the hex HMAC of the attempt ``message`` under ``keyed`` (a copy is used: reusable)."""
    mac = keyed.copy()
    mac.update(f"gpu-portal:attempt:{message}".encode())
    return "gpj_" + mac.hexdigest()


def attempt_tokens_new(count: int) -> list[tuple[str, str]]:
    """``count`` pairs ``(token_salt, token_sha256)`` for attempts about to be created: a 128-bit random salt
    (32 hex digits, ``secrets``) and the SHA-256 hex digest of the token :func:`attempt_token` derives
    from it. Needs neither the attempt's id nor its number, so a scheduling pass inserts its attempts, token
    hashes included, in the statement that places them; the HMAC key schedule is done once
    (``hmac.HMAC.copy``)."""
    keyed = hmac.new(settings.SECRET_KEY.encode(), digestmod=hashlib.sha256)
    out = []
    for _ in range(count):
        salt = secrets.token_hex(16)
        out.append((salt, hashlib.sha256(_token(keyed, f"v2:{salt}").encode()).hexdigest()))
    return out


def runtime_config(attempt: JobAttempt) -> dict[str, Any]:
    """The runtime's config (``instances.runtime.config.JobConfig`` fields) for ``attempt`` of a job."""
    job = attempt.job
    assert job is not None
    site = str(_setting("SITE_URL", "http://127.0.0.1:8000")).rstrip("/")
    local = attempt.backend == "local"
    data = [m["shard_dir"] if local else f"/data/{m['name']}" for m in job.mounts]
    cfg = {
        **_config_core(
            job.model_preset,
            job.engine,
            job.hyperparameters,
            job.checkpoint_every_minutes,
            job.checkpoint_every_steps,
            job.keep_last,
        ),
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
        env={
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": str(_setting("INSTANCES_OMP_THREADS", 1)),
            **jupyter_env(instance),  # JupyterLab beside the command (instances/interactive/jupyter.py)
        },
        dataset_mounts=mounts,
        volume_mounts=_volume_mounts(instance),
        checkpoint_uri=job.checkpoint_uri if job else "",
        termination_grace_s=int(_setting("INSTANCES_STOP_GRACE_S", 120)),
    )


def _volume_mounts(instance: Instance) -> tuple[VolumeMount, ...]:
    from instances.interactive.volumes import volume_mounts_for  # raises BackendError: the attempt fails

    return volume_mounts_for(instance)
