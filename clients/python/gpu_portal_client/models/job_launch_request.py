from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.engine_enum import EngineEnum
from ..models.mode_enum import ModeEnum
from ..models.model_preset_enum import ModelPresetEnum
from ..models.tier_enum import TierEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.hyperparameters_request import HyperparametersRequest


T = TypeVar("T", bound="JobLaunchRequest")


@_attrs_define
class JobLaunchRequest:
    """Input of ``POST /jobs`` (a training job on a new instance).

    Attributes:
        gpu_type (str):
        gpu_count (int): GPUs
        dataset_version_ids (list[int]):
        name (str | Unset):  Default: ''.
        mode (ModeEnum | Unset): * `container` - Container
            * `bare_metal` - Bare metal Default: ModeEnum.CONTAINER.
        image (str | Unset):  Default: ''.
        model_preset (ModelPresetEnum | Unset): * `tiny` - tiny (a few million parameters, CPU)
            * `gpt2-small` - GPT-2 small size
            * `1b` - 1B
            * `7b` - 7B Default: ModelPresetEnum.TINY.
        engine (EngineEnum | Unset): * `fsdp` - FSDP
            * `ddp` - DDP
            * `deepspeed` - DeepSpeed ZeRO Default: EngineEnum.FSDP.
        hyperparameters (HyperparametersRequest | Unset): Hyperparameters of a training job; every one optional, bounds
            from ``instances.limits``.

            Unknown names are refused (not dropped), so a typo never trains with a silent default.
        checkpoint_every_minutes (int | Unset): minutes between checkpoints (0 = off; at most a week); default 30 on a
            GPU, 1 on a CPU slot
        checkpoint_every_steps (int | Unset): steps between checkpoints (0 = off); default 0 on a GPU, 100 on a CPU slot
        keep_last (int | Unset): complete checkpoints kept; default 3
        elastic_min_gpus (int | Unset): resume on at least this many GPUs after a preemption (0 = only on gpu_count)
            Default: 0.
        volumes (list[str] | Unset): names of your organization's volumes to attach read-write (one active instance per
            volume)
        tier (TierEnum | Unset): * `on_demand` - On demand
            * `interruptible` - Interruptible Default: TierEnum.ON_DEMAND.
    """

    gpu_type: str
    gpu_count: int
    dataset_version_ids: list[int]
    name: str | Unset = ""
    mode: ModeEnum | Unset = ModeEnum.CONTAINER
    image: str | Unset = ""
    model_preset: ModelPresetEnum | Unset = ModelPresetEnum.TINY
    engine: EngineEnum | Unset = EngineEnum.FSDP
    hyperparameters: HyperparametersRequest | Unset = UNSET
    checkpoint_every_minutes: int | Unset = UNSET
    checkpoint_every_steps: int | Unset = UNSET
    keep_last: int | Unset = UNSET
    elastic_min_gpus: int | Unset = 0
    volumes: list[str] | Unset = UNSET
    tier: TierEnum | Unset = TierEnum.ON_DEMAND
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_type = self.gpu_type

        gpu_count = self.gpu_count

        dataset_version_ids = self.dataset_version_ids

        name = self.name

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        image = self.image

        model_preset: str | Unset = UNSET
        if not isinstance(self.model_preset, Unset):
            model_preset = self.model_preset.value

        engine: str | Unset = UNSET
        if not isinstance(self.engine, Unset):
            engine = self.engine.value

        hyperparameters: dict[str, Any] | Unset = UNSET
        if not isinstance(self.hyperparameters, Unset):
            hyperparameters = self.hyperparameters.to_dict()

        checkpoint_every_minutes = self.checkpoint_every_minutes

        checkpoint_every_steps = self.checkpoint_every_steps

        keep_last = self.keep_last

        elastic_min_gpus = self.elastic_min_gpus

        volumes: list[str] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = self.volumes

        tier: str | Unset = UNSET
        if not isinstance(self.tier, Unset):
            tier = self.tier.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_type": gpu_type,
                "gpu_count": gpu_count,
                "dataset_version_ids": dataset_version_ids,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if mode is not UNSET:
            field_dict["mode"] = mode
        if image is not UNSET:
            field_dict["image"] = image
        if model_preset is not UNSET:
            field_dict["model_preset"] = model_preset
        if engine is not UNSET:
            field_dict["engine"] = engine
        if hyperparameters is not UNSET:
            field_dict["hyperparameters"] = hyperparameters
        if checkpoint_every_minutes is not UNSET:
            field_dict["checkpoint_every_minutes"] = checkpoint_every_minutes
        if checkpoint_every_steps is not UNSET:
            field_dict["checkpoint_every_steps"] = checkpoint_every_steps
        if keep_last is not UNSET:
            field_dict["keep_last"] = keep_last
        if elastic_min_gpus is not UNSET:
            field_dict["elastic_min_gpus"] = elastic_min_gpus
        if volumes is not UNSET:
            field_dict["volumes"] = volumes
        if tier is not UNSET:
            field_dict["tier"] = tier

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.hyperparameters_request import HyperparametersRequest

        d = dict(src_dict)
        gpu_type = d.pop("gpu_type")

        gpu_count = d.pop("gpu_count")

        dataset_version_ids = cast(list[int], d.pop("dataset_version_ids"))

        name = d.pop("name", UNSET)

        _mode = d.pop("mode", UNSET)
        mode: ModeEnum | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = ModeEnum(_mode)

        image = d.pop("image", UNSET)

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

        _hyperparameters = d.pop("hyperparameters", UNSET)
        hyperparameters: HyperparametersRequest | Unset
        if isinstance(_hyperparameters, Unset):
            hyperparameters = UNSET
        else:
            hyperparameters = HyperparametersRequest.from_dict(_hyperparameters)

        checkpoint_every_minutes = d.pop("checkpoint_every_minutes", UNSET)

        checkpoint_every_steps = d.pop("checkpoint_every_steps", UNSET)

        keep_last = d.pop("keep_last", UNSET)

        elastic_min_gpus = d.pop("elastic_min_gpus", UNSET)

        volumes = cast(list[str], d.pop("volumes", UNSET))

        _tier = d.pop("tier", UNSET)
        tier: TierEnum | Unset
        if isinstance(_tier, Unset):
            tier = UNSET
        else:
            tier = TierEnum(_tier)

        job_launch_request = cls(
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            dataset_version_ids=dataset_version_ids,
            name=name,
            mode=mode,
            image=image,
            model_preset=model_preset,
            engine=engine,
            hyperparameters=hyperparameters,
            checkpoint_every_minutes=checkpoint_every_minutes,
            checkpoint_every_steps=checkpoint_every_steps,
            keep_last=keep_last,
            elastic_min_gpus=elastic_min_gpus,
            volumes=volumes,
            tier=tier,
        )

        job_launch_request.additional_properties = d
        return job_launch_request

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
