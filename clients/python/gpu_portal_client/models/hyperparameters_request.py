from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.mixed_precision_enum import MixedPrecisionEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="HyperparametersRequest")


@_attrs_define
class HyperparametersRequest:
    """Hyperparameters of a training job; every one optional, bounds from ``instances.limits``.

    Unknown names are refused (not dropped), so a typo never trains with a silent default.

        Attributes:
            mixed_precision (MixedPrecisionEnum | Unset): * `none` - none
                * `bf16` - bf16
                * `fp16` - fp16
            seq_len (int | Unset): tokens per sample
            micro_batch (int | Unset): samples per rank per forward pass
            grad_accum (int | Unset): micro-batches per optimizer step
            global_batch (int | Unset): samples per optimizer step over all GPUs (0 = micro_batch x grad_accum x GPUs)
            max_steps (int | Unset): optimizer steps (0 = no step limit)
            max_tokens (int | Unset): tokens over all ranks (0 = no token limit)
            lr (float | Unset): peak learning rate
            min_lr_ratio (float | Unset): cosine decay floor as a fraction of lr
            warmup_steps (int | Unset): linear warm-up steps
            weight_decay (float | Unset): AdamW weight decay
            seed (int | Unset): random seed
            grad_clip (float | Unset): max global gradient norm (0 = off)
            zero_stage (int | Unset): DeepSpeed ZeRO stage
            log_every_steps (int | Unset): steps between progress events
            report_interval_s (float | Unset): seconds between reports
            term_grace_s (float | Unset): seconds to checkpoint after SIGTERM
            async_save (bool | Unset):
    """

    mixed_precision: MixedPrecisionEnum | Unset = UNSET
    seq_len: int | Unset = UNSET
    micro_batch: int | Unset = UNSET
    grad_accum: int | Unset = UNSET
    global_batch: int | Unset = UNSET
    max_steps: int | Unset = UNSET
    max_tokens: int | Unset = UNSET
    lr: float | Unset = UNSET
    min_lr_ratio: float | Unset = UNSET
    warmup_steps: int | Unset = UNSET
    weight_decay: float | Unset = UNSET
    seed: int | Unset = UNSET
    grad_clip: float | Unset = UNSET
    zero_stage: int | Unset = UNSET
    log_every_steps: int | Unset = UNSET
    report_interval_s: float | Unset = UNSET
    term_grace_s: float | Unset = UNSET
    async_save: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        mixed_precision: str | Unset = UNSET
        if not isinstance(self.mixed_precision, Unset):
            mixed_precision = self.mixed_precision.value

        seq_len = self.seq_len

        micro_batch = self.micro_batch

        grad_accum = self.grad_accum

        global_batch = self.global_batch

        max_steps = self.max_steps

        max_tokens = self.max_tokens

        lr = self.lr

        min_lr_ratio = self.min_lr_ratio

        warmup_steps = self.warmup_steps

        weight_decay = self.weight_decay

        seed = self.seed

        grad_clip = self.grad_clip

        zero_stage = self.zero_stage

        log_every_steps = self.log_every_steps

        report_interval_s = self.report_interval_s

        term_grace_s = self.term_grace_s

        async_save = self.async_save

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if mixed_precision is not UNSET:
            field_dict["mixed_precision"] = mixed_precision
        if seq_len is not UNSET:
            field_dict["seq_len"] = seq_len
        if micro_batch is not UNSET:
            field_dict["micro_batch"] = micro_batch
        if grad_accum is not UNSET:
            field_dict["grad_accum"] = grad_accum
        if global_batch is not UNSET:
            field_dict["global_batch"] = global_batch
        if max_steps is not UNSET:
            field_dict["max_steps"] = max_steps
        if max_tokens is not UNSET:
            field_dict["max_tokens"] = max_tokens
        if lr is not UNSET:
            field_dict["lr"] = lr
        if min_lr_ratio is not UNSET:
            field_dict["min_lr_ratio"] = min_lr_ratio
        if warmup_steps is not UNSET:
            field_dict["warmup_steps"] = warmup_steps
        if weight_decay is not UNSET:
            field_dict["weight_decay"] = weight_decay
        if seed is not UNSET:
            field_dict["seed"] = seed
        if grad_clip is not UNSET:
            field_dict["grad_clip"] = grad_clip
        if zero_stage is not UNSET:
            field_dict["zero_stage"] = zero_stage
        if log_every_steps is not UNSET:
            field_dict["log_every_steps"] = log_every_steps
        if report_interval_s is not UNSET:
            field_dict["report_interval_s"] = report_interval_s
        if term_grace_s is not UNSET:
            field_dict["term_grace_s"] = term_grace_s
        if async_save is not UNSET:
            field_dict["async_save"] = async_save

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _mixed_precision = d.pop("mixed_precision", UNSET)
        mixed_precision: MixedPrecisionEnum | Unset
        if isinstance(_mixed_precision, Unset):
            mixed_precision = UNSET
        else:
            mixed_precision = MixedPrecisionEnum(_mixed_precision)

        seq_len = d.pop("seq_len", UNSET)

        micro_batch = d.pop("micro_batch", UNSET)

        grad_accum = d.pop("grad_accum", UNSET)

        global_batch = d.pop("global_batch", UNSET)

        max_steps = d.pop("max_steps", UNSET)

        max_tokens = d.pop("max_tokens", UNSET)

        lr = d.pop("lr", UNSET)

        min_lr_ratio = d.pop("min_lr_ratio", UNSET)

        warmup_steps = d.pop("warmup_steps", UNSET)

        weight_decay = d.pop("weight_decay", UNSET)

        seed = d.pop("seed", UNSET)

        grad_clip = d.pop("grad_clip", UNSET)

        zero_stage = d.pop("zero_stage", UNSET)

        log_every_steps = d.pop("log_every_steps", UNSET)

        report_interval_s = d.pop("report_interval_s", UNSET)

        term_grace_s = d.pop("term_grace_s", UNSET)

        async_save = d.pop("async_save", UNSET)

        hyperparameters_request = cls(
            mixed_precision=mixed_precision,
            seq_len=seq_len,
            micro_batch=micro_batch,
            grad_accum=grad_accum,
            global_batch=global_batch,
            max_steps=max_steps,
            max_tokens=max_tokens,
            lr=lr,
            min_lr_ratio=min_lr_ratio,
            warmup_steps=warmup_steps,
            weight_decay=weight_decay,
            seed=seed,
            grad_clip=grad_clip,
            zero_stage=zero_stage,
            log_every_steps=log_every_steps,
            report_interval_s=report_interval_s,
            term_grace_s=term_grace_s,
            async_save=async_save,
        )

        hyperparameters_request.additional_properties = d
        return hyperparameters_request

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
