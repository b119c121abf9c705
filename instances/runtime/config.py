"""The training job's configuration: one flat, typed, validated dataclass read from a JSON file.

The portal writes the file; the runtime never takes free-form flags. Every field is listed in
``JobConfig`` with its unit. Unknown fields, wrong types and out-of-range values raise
``ConfigError`` naming the field, so a typo in the portal never trains the wrong thing silently.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

ENGINES = ("ddp", "fsdp", "deepspeed")
MIXED_PRECISION = ("none", "bf16", "fp16")
PRESET_NAMES = ("tiny", "gpt2-small", "1b", "7b")
ATTENTION = ("sdpa", "eager", "flash_attention_2")


class ConfigError(ValueError):
    """A job config is invalid. ``field`` names the offending field ("" for the file as a whole)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}" if field_name else message)
        self.field = field_name


@dataclass(frozen=True)
class JobConfig:
    """Everything one training job needs. Built by ``load_config`` / ``JobConfig.from_dict``.

    Units are in the field names or comments. ``model`` is a preset name (``tiny``, ``gpt2-small``,
    ``1b``, ``7b``) or a local directory holding a Hugging Face-format model (config.json + weights)
    to fine-tune. ``data`` lists shard folders (``instances.runtime.shards`` format), read as one
    concatenated stream. Training stops at ``max_steps`` optimizer steps or ``max_tokens`` tokens,
    whichever comes first (at least one is required).
    """

    model: str
    data: list[str]
    checkpoint_dir: str  # local folder or any fsspec URL (s3://..., file://...)
    tokenizer: str = ""  # tokenizer.json; if set, its vocabulary size must equal the shards'
    seq_len: int = 1024  # tokens per sample
    micro_batch: int = 8  # samples per rank per forward pass (with global_batch: the most per forward pass)
    grad_accum: int = 1  # micro-batches per optimizer step (derived, and left at 1, when global_batch is set)
    global_batch: int = 0  # samples per optimizer step over all ranks; 0 = micro_batch * grad_accum * ranks.
    # Set, it makes the job elastic: it may resume on any data-parallel degree that divides it (see batch_layout)
    record_samples: bool = False  # each rank appends the global ids of the samples it trains on to
    # {workdir}/samples-rank<R>.jsonl (one line per optimizer step): an audit of "no sample repeated or skipped"
    max_steps: int = 0  # optimizer steps; 0 = no step limit
    max_tokens: int = 0  # tokens over all ranks; 0 = no token limit
    seed: int = 0
    optimizer: str = "adamw"
    lr: float = 3e-4  # peak learning rate
    min_lr_ratio: float = 0.1  # cosine decays to lr * min_lr_ratio
    warmup_steps: int = 0
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    grad_clip: float = 1.0  # max global gradient norm; 0 = no clipping
    engine: str = "fsdp"
    zero_stage: int = 2  # DeepSpeed ZeRO stage (engine "deepspeed" only)
    mixed_precision: str = "bf16"  # applies on GPU only; CPU always trains in float32
    checkpoint_every_minutes: float = 30.0  # 0 = no time interval
    checkpoint_every_steps: int = 0  # 0 = no step interval
    keep_last: int = 3  # complete checkpoints kept (pinned ones are not counted)
    async_save: bool = True  # interval saves use dcp.async_save (training blocked only for staging)
    checkpoint_threads: int = 2  # writer threads per rank (local folders)
    verify_checkpoints: bool = True  # check manifest sizes + SHA-256 before resuming
    store_retries: int = 4  # attempts at a checkpoint whose store fails with transient I/O errors (then exit 75)
    store_backoff_s: float = 1.0  # first wait between those attempts, doubled each time
    resume_step: int = -1  # -1 = newest complete checkpoint; >= 0 = roll back to that step (once)
    fresh_start: bool = False  # train from step 0: existing step-N folders are moved aside (once per attempt);
    # without it the runtime never starts over while a checkpoint (even a damaged one) exists
    term_grace_s: float = 25.0  # after SIGTERM the checkpoint must be written within this time
    callback_url: str = ""  # portal base URL; "" = no reporting (events.jsonl only)
    job_token: str = ""
    attempt: int = 0  # the portal's attempt number, sent with every event
    workdir: str = ""  # events.jsonl goes here; "" = current directory
    log_every_steps: int = 10  # progress event every N steps
    report_interval_s: float = 5.0  # the reporter posts at most this often (and polls when idle)
    # speed (what the field uses; all exact-resume safe): PyTorch SDPA attention (flash / memory-efficient
    # kernels on GPU), fused AdamW on GPU (foreach on CPU), torch.compile of each decoder block, activation
    # checkpointing of each block (trades ~1/3 more compute for memory), pinned reusable host buffers for
    # async saves on GPU
    attention: str = "sdpa"
    fused_optimizer: bool = True
    compile: bool = False
    activation_checkpointing: bool = False
    pinned_staging: bool = True
    meta_init: bool = False  # presets with engine fsdp: build on the meta device, shard, then allocate shards only
    extra: dict[str, Any] = field(default_factory=dict)  # free metadata kept in checkpoints

    # ---- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, raw: Any) -> JobConfig:
        """Validate ``raw`` (a parsed JSON object) and build the config.

        Raises ``ConfigError`` naming the first unknown, missing, mistyped or out-of-range field.
        """
        if not isinstance(raw, dict):
            raise ConfigError("", "config must be a JSON object")
        hints = get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        for key in raw:
            if key not in names:
                raise ConfigError(str(key), "unknown field")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in raw:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise ConfigError(f.name, "required field is missing")
                continue
            values[f.name] = _coerce(f.name, hints[f.name], raw[f.name])
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Range and consistency checks. Raises ``ConfigError`` naming the field."""
        if not self.model:
            raise ConfigError("model", "must be a preset name or a model folder")
        if self.model not in PRESET_NAMES and not _looks_like_path(self.model):
            raise ConfigError("model", f"unknown preset {self.model!r}; presets: {', '.join(PRESET_NAMES)}")
        if not self.data:
            raise ConfigError("data", "at least one shard folder is required")
        if not self.checkpoint_dir:
            raise ConfigError("checkpoint_dir", "must not be empty")
        for name in ("seq_len", "micro_batch", "grad_accum", "checkpoint_threads", "log_every_steps", "store_retries"):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be >= 1")
        for name in ("max_steps", "max_tokens", "warmup_steps", "checkpoint_every_steps", "attempt"):
            if getattr(self, name) < 0:
                raise ConfigError(name, "must be >= 0")
        if self.global_batch < 0:
            raise ConfigError("global_batch", "must be >= 0 (0 = micro_batch * grad_accum * ranks)")
        if self.global_batch and self.grad_accum != 1:
            raise ConfigError(
                "grad_accum",
                "is derived from global_batch on each data-parallel degree; leave it at 1 when global_batch is set",
            )
        if self.global_batch and self.engine == "deepspeed":
            raise ConfigError("global_batch", "elastic batches need engine ddp or fsdp (DeepSpeed fixes its own batch)")
        if self.max_steps == 0 and self.max_tokens == 0:
            raise ConfigError("max_steps", "set max_steps or max_tokens (or both)")
        if self.keep_last < 1:
            raise ConfigError("keep_last", "must be >= 1")
        if self.resume_step < -1:
            raise ConfigError("resume_step", "must be -1 (newest) or a step >= 0")
        if self.optimizer != "adamw":
            raise ConfigError("optimizer", "only 'adamw' is supported")
        if not self.lr > 0:
            raise ConfigError("lr", "must be > 0")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ConfigError("min_lr_ratio", "must be within [0, 1]")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(name, "must be within [0, 1)")
        for name in ("weight_decay", "grad_clip", "checkpoint_every_minutes", "store_backoff_s"):
            if getattr(self, name) < 0:
                raise ConfigError(name, "must be >= 0")
        if not self.eps > 0:
            raise ConfigError("eps", "must be > 0")
        if not self.term_grace_s > 0:
            raise ConfigError("term_grace_s", "must be > 0")
        if not self.report_interval_s > 0:
            raise ConfigError("report_interval_s", "must be > 0")
        if self.engine not in ENGINES:
            raise ConfigError("engine", f"must be one of {', '.join(ENGINES)}")
        if self.zero_stage not in (1, 2, 3):
            raise ConfigError("zero_stage", "must be 1, 2 or 3")
        if self.meta_init and (self.engine != "fsdp" or self.model not in PRESET_NAMES):
            raise ConfigError("meta_init", "needs engine fsdp and a preset model (a model folder loads its weights)")
        if self.attention not in ATTENTION:
            raise ConfigError("attention", f"must be one of {', '.join(ATTENTION)}")
        if self.mixed_precision not in MIXED_PRECISION:
            raise ConfigError("mixed_precision", f"must be one of {', '.join(MIXED_PRECISION)}")
        if (
            self.engine == "deepspeed"
            and "://" in self.checkpoint_dir
            and not self.checkpoint_dir.startswith("file://")
        ):
            raise ConfigError("checkpoint_dir", "engine deepspeed writes checkpoints to a local or mounted folder only")
        if self.callback_url and not re.match(r"^https?://", self.callback_url):
            raise ConfigError("callback_url", "must start with http:// or https://")
        if self.callback_url and not self.job_token:
            raise ConfigError("job_token", "required when callback_url is set")

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (round-trips through ``from_dict``)."""
        return dataclasses.asdict(self)

    @property
    def workdir_path(self) -> Path:
        """Folder for ``events.jsonl`` (created on demand)."""
        return Path(self.workdir or os.getcwd())


def allowed_degrees(global_batch: int, *, up_to: int) -> list[int]:
    """Data-parallel degrees ``1 … up_to`` on which a job of ``global_batch`` samples per step can run.

    The rule (the only one, used by the runtime and by the portal at launch): a degree M is allowed when
    it divides the global batch, so every rank trains ``global_batch / M`` samples per step and the step's
    gradient is the mean over exactly the same samples whatever M is. A remainder is never padded,
    dropped or spread unevenly (that would change the gradient, or repeat or skip samples).
    """
    return [m for m in range(1, up_to + 1) if global_batch % m == 0]


def batch_layout(global_batch: int, dp_degree: int, micro_batch_max: int) -> tuple[int, int]:
    """``(micro_batch, grad_accum)`` for ``dp_degree`` ranks that together train ``global_batch`` samples
    per optimizer step, with at most ``micro_batch_max`` samples per rank per forward pass.

    Each rank trains ``per_rank = global_batch / dp_degree`` samples per step in ``grad_accum`` equal
    micro-batches: the fewest micro-batches (largest micro-batch ``<= micro_batch_max``) that split
    ``per_rank`` evenly. Equal micro-batches keep the step's gradient the plain mean over its samples.
    Example: global 12, at most 2 per pass: dp=4 -> (1, 3), dp=3 -> (2, 2), dp=2 -> (2, 3).

    Raises ``ConfigError("global_batch", …)`` naming the allowed degrees when ``dp_degree`` does not
    divide ``global_batch`` (rule: ``allowed_degrees``).
    """
    if global_batch % dp_degree:
        allowed = ", ".join(str(m) for m in allowed_degrees(global_batch, up_to=global_batch))
        raise ConfigError(
            "global_batch",
            f"global batch {global_batch} does not split over data-parallel degree {dp_degree}; "
            f"a degree must divide it (allowed: {allowed})",
        )
    per_rank = global_batch // dp_degree
    micro = max(d for d in range(1, min(per_rank, micro_batch_max) + 1) if per_rank % d == 0)
    return micro, per_rank // micro


def load_config(path: str | os.PathLike[str]) -> JobConfig:
    """Read and validate a JSON config file. Raises ``ConfigError`` (field "" for unreadable files)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError("", f"cannot read config {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError("", f"config {path} is not valid JSON: {exc}") from exc
    return JobConfig.from_dict(raw)


def _looks_like_path(value: str) -> bool:
    return "/" in value or value.startswith(".") or os.path.isdir(value)


def _coerce(name: str, hint: Any, value: Any) -> Any:
    """Check ``value`` against the field's type; ints are accepted for floats, bools never for numbers."""
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(name, f"must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(name, f"must be an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(name, f"must be a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(name, f"must be a string, got {value!r}")
        return value
    if getattr(hint, "__origin__", None) is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(name, "must be a list of strings")
        return list(value)
    if getattr(hint, "__origin__", None) is dict:
        if not isinstance(value, dict):
            raise ConfigError(name, "must be an object")
        return dict(value)
    raise ConfigError(name, f"unsupported field type {hint}")  # pragma: no cover - programming error
