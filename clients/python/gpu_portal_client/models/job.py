from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.blank_enum import BlankEnum
from ..models.engine_enum import EngineEnum
from ..models.model_preset_enum import ModelPresetEnum
from ..models.outcome_enum import OutcomeEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.attempt import Attempt


T = TypeVar("T", bound="Job")


@_attrs_define
class Job:
    """
    Attributes:
        id (int):
        name (str):
        instance (int):
        status (str):
        status_reason (str):
        status_reason_code (str):
        status_reason_params (Any):
        queue_position (int):
        gpu_type (str):
        gpu_count (int):
        elastic_min_gpus (int):
        tier (str):
        attempts (list[Attempt]):
        outcome (BlankEnum | OutcomeEnum | Unset):
        model_preset (ModelPresetEnum | Unset): * `tiny` - tiny (a few million parameters, CPU)
            * `gpt2-small` - GPT-2 small size
            * `1b` - 1B
            * `7b` - 7B
        engine (EngineEnum | Unset): * `fsdp` - FSDP
            * `ddp` - DDP
            * `deepspeed` - DeepSpeed ZeRO
        hyperparameters (Any | Unset):
        dataset_version_ids (Any | Unset):
        checkpoint_every_minutes (int | Unset):
        checkpoint_every_steps (int | Unset):
        keep_last (int | Unset):
        last_step (int | Unset):
        tokens_seen (int | Unset):
        crash_count (int | Unset):
        preempt_count (int | Unset):
        next_resume_at (datetime.datetime | None | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    name: str
    instance: int
    status: str
    status_reason: str
    status_reason_code: str
    status_reason_params: Any
    queue_position: int
    gpu_type: str
    gpu_count: int
    elastic_min_gpus: int
    tier: str
    attempts: list[Attempt]
    outcome: BlankEnum | OutcomeEnum | Unset = UNSET
    model_preset: ModelPresetEnum | Unset = UNSET
    engine: EngineEnum | Unset = UNSET
    hyperparameters: Any | Unset = UNSET
    dataset_version_ids: Any | Unset = UNSET
    checkpoint_every_minutes: int | Unset = UNSET
    checkpoint_every_steps: int | Unset = UNSET
    keep_last: int | Unset = UNSET
    last_step: int | Unset = UNSET
    tokens_seen: int | Unset = UNSET
    crash_count: int | Unset = UNSET
    preempt_count: int | Unset = UNSET
    next_resume_at: datetime.datetime | None | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        name = self.name

        instance = self.instance

        status = self.status

        status_reason = self.status_reason

        status_reason_code = self.status_reason_code

        status_reason_params = self.status_reason_params

        queue_position = self.queue_position

        gpu_type = self.gpu_type

        gpu_count = self.gpu_count

        elastic_min_gpus = self.elastic_min_gpus

        tier = self.tier

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)

        outcome: str | Unset
        if isinstance(self.outcome, Unset):
            outcome = UNSET
        elif isinstance(self.outcome, OutcomeEnum):
            outcome = self.outcome.value
        else:
            outcome = self.outcome.value

        model_preset: str | Unset = UNSET
        if not isinstance(self.model_preset, Unset):
            model_preset = self.model_preset.value

        engine: str | Unset = UNSET
        if not isinstance(self.engine, Unset):
            engine = self.engine.value

        hyperparameters = self.hyperparameters

        dataset_version_ids = self.dataset_version_ids

        checkpoint_every_minutes = self.checkpoint_every_minutes

        checkpoint_every_steps = self.checkpoint_every_steps

        keep_last = self.keep_last

        last_step = self.last_step

        tokens_seen = self.tokens_seen

        crash_count = self.crash_count

        preempt_count = self.preempt_count

        next_resume_at: None | str | Unset
        if isinstance(self.next_resume_at, Unset):
            next_resume_at = UNSET
        elif isinstance(self.next_resume_at, datetime.datetime):
            next_resume_at = self.next_resume_at.isoformat()
        else:
            next_resume_at = self.next_resume_at

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "instance": instance,
                "status": status,
                "status_reason": status_reason,
                "status_reason_code": status_reason_code,
                "status_reason_params": status_reason_params,
                "queue_position": queue_position,
                "gpu_type": gpu_type,
                "gpu_count": gpu_count,
                "elastic_min_gpus": elastic_min_gpus,
                "tier": tier,
                "attempts": attempts,
            }
        )
        if outcome is not UNSET:
            field_dict["outcome"] = outcome
        if model_preset is not UNSET:
            field_dict["model_preset"] = model_preset
        if engine is not UNSET:
            field_dict["engine"] = engine
        if hyperparameters is not UNSET:
            field_dict["hyperparameters"] = hyperparameters
        if dataset_version_ids is not UNSET:
            field_dict["dataset_version_ids"] = dataset_version_ids
        if checkpoint_every_minutes is not UNSET:
            field_dict["checkpoint_every_minutes"] = checkpoint_every_minutes
        if checkpoint_every_steps is not UNSET:
            field_dict["checkpoint_every_steps"] = checkpoint_every_steps
        if keep_last is not UNSET:
            field_dict["keep_last"] = keep_last
        if last_step is not UNSET:
            field_dict["last_step"] = last_step
        if tokens_seen is not UNSET:
            field_dict["tokens_seen"] = tokens_seen
        if crash_count is not UNSET:
            field_dict["crash_count"] = crash_count
        if preempt_count is not UNSET:
            field_dict["preempt_count"] = preempt_count
        if next_resume_at is not UNSET:
            field_dict["next_resume_at"] = next_resume_at
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.attempt import Attempt

        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        instance = d.pop("instance")

        status = d.pop("status")

        status_reason = d.pop("status_reason")

        status_reason_code = d.pop("status_reason_code")

        status_reason_params = d.pop("status_reason_params")

        queue_position = d.pop("queue_position")

        gpu_type = d.pop("gpu_type")

        gpu_count = d.pop("gpu_count")

        elastic_min_gpus = d.pop("elastic_min_gpus")

        tier = d.pop("tier")

        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in _attempts:
            attempts_item = Attempt.from_dict(attempts_item_data)

            attempts.append(attempts_item)

        def _parse_outcome(data: object) -> BlankEnum | OutcomeEnum | Unset:
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                outcome_type_0 = OutcomeEnum(data)

                return outcome_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, str):
                raise TypeError()
            outcome_type_1 = BlankEnum(data)

            return outcome_type_1

        outcome = _parse_outcome(d.pop("outcome", UNSET))

        _model_preset = d.pop("model_preset", UNSET)
        model_preset: ModelPresetEnum | Unset
        if isinstance(_model_preset, Unset):
            model_preset = UNSET
        else:
            model_preset = ModelPresetEnum(_model_preset)

        _engine = d.pop("engine", UNSET)
        engine: EngineEnum | Unset
        if isinstance(_engine, Unset):
            engine = UNSET
        else:
            engine = EngineEnum(_engine)

        hyperparameters = d.pop("hyperparameters", UNSET)

        dataset_version_ids = d.pop("dataset_version_ids", UNSET)

        checkpoint_every_minutes = d.pop("checkpoint_every_minutes", UNSET)

        checkpoint_every_steps = d.pop("checkpoint_every_steps", UNSET)

        keep_last = d.pop("keep_last", UNSET)

        last_step = d.pop("last_step", UNSET)

        tokens_seen = d.pop("tokens_seen", UNSET)

        crash_count = d.pop("crash_count", UNSET)

        preempt_count = d.pop("preempt_count", UNSET)

        def _parse_next_resume_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_resume_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_resume_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_resume_at = _parse_next_resume_at(d.pop("next_resume_at", UNSET))

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        job = cls(
            id=id,
            name=name,
            instance=instance,
            status=status,
            status_reason=status_reason,
            status_reason_code=status_reason_code,
            status_reason_params=status_reason_params,
            queue_position=queue_position,
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            elastic_min_gpus=elastic_min_gpus,
            tier=tier,
            attempts=attempts,
            outcome=outcome,
            model_preset=model_preset,
            engine=engine,
            hyperparameters=hyperparameters,
            dataset_version_ids=dataset_version_ids,
            checkpoint_every_minutes=checkpoint_every_minutes,
            checkpoint_every_steps=checkpoint_every_steps,
            keep_last=keep_last,
            last_step=last_step,
            tokens_seen=tokens_seen,
            crash_count=crash_count,
            preempt_count=preempt_count,
            next_resume_at=next_resume_at,
            created_at=created_at,
        )

        job.additional_properties = d
        return job

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
