from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.utilization_sample import UtilizationSample


T = TypeVar("T", bound="InstanceUtilization")


@_attrs_define
class InstanceUtilization:
    """Output of ``GET /instances/{id}/utilization``: the kept samples, oldest first, and their pace.

    Attributes:
        instance (int): the instance's id
        every_s (int): least seconds between two samples of one instance
        keep (int): how many of the newest samples are kept per instance
        cpu_busy_percent (float): CPU use (percent of one core) at or above which a sample counts as work for idle
            autostop
        gpu_busy_percent (float): card utilization (percent) at or above which a card carrying one of the instance's
            processes counts as work for idle autostop
        absent (list[str]): why metrics are missing (no samples yet, another backend, no NVIDIA GPU), in the request's
            language
        samples (list[UtilizationSample]):
    """

    instance: int
    every_s: int
    keep: int
    cpu_busy_percent: float
    gpu_busy_percent: float
    absent: list[str]
    samples: list[UtilizationSample]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        instance = self.instance

        every_s = self.every_s

        keep = self.keep

        cpu_busy_percent = self.cpu_busy_percent

        gpu_busy_percent = self.gpu_busy_percent

        absent = self.absent

        samples = []
        for samples_item_data in self.samples:
            samples_item = samples_item_data.to_dict()
            samples.append(samples_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "instance": instance,
                "every_s": every_s,
                "keep": keep,
                "cpu_busy_percent": cpu_busy_percent,
                "gpu_busy_percent": gpu_busy_percent,
                "absent": absent,
                "samples": samples,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.utilization_sample import UtilizationSample

        d = dict(src_dict)
        instance = d.pop("instance")

        every_s = d.pop("every_s")

        keep = d.pop("keep")

        cpu_busy_percent = d.pop("cpu_busy_percent")

        gpu_busy_percent = d.pop("gpu_busy_percent")

        absent = cast(list[str], d.pop("absent"))

        samples = []
        _samples = d.pop("samples")
        for samples_item_data in _samples:
            samples_item = UtilizationSample.from_dict(samples_item_data)

            samples.append(samples_item)

        instance_utilization = cls(
            instance=instance,
            every_s=every_s,
            keep=keep,
            cpu_busy_percent=cpu_busy_percent,
            gpu_busy_percent=gpu_busy_percent,
            absent=absent,
            samples=samples,
        )

        instance_utilization.additional_properties = d
        return instance_utilization

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
