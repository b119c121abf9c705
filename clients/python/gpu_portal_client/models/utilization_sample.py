from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.utilization_card import UtilizationCard


T = TypeVar("T", bound="UtilizationSample")


@_attrs_define
class UtilizationSample:
    """One reading of the instance's processes (the local backend samples them) and of its node's cards.

    Attributes:
        sampled_at (datetime.datetime): when the sample was taken (ISO 8601, with its UTC offset)
        processes (int): the instance's processes alive at the sample
        cpu_seconds (float): cumulative CPU time (user + system) of those processes, in seconds
        cpu_percent (float | None): CPU use since the previous sample in percent of one core (100 = one core busy, 200 =
            two); null for the first sample
        memory_bytes (int): resident memory of those processes, in bytes
        gpus (list[UtilizationCard]): the node's cards; empty when gpu_absent says why
        gpu_absent (str): why there are no GPU readings: no_nvml (no NVIDIA driver), no_gpu (NVML sees no card),
            nvml_error; empty when there are
        busy (bool): whether the sample shows the instance's processes at work (CPU at or above cpu_busy_percent, or a
            card carrying one of its processes at or above gpu_busy_percent): idle autostop counts it as activity
    """

    sampled_at: datetime.datetime
    processes: int
    cpu_seconds: float
    cpu_percent: float | None
    memory_bytes: int
    gpus: list[UtilizationCard]
    gpu_absent: str
    busy: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sampled_at = self.sampled_at.isoformat()

        processes = self.processes

        cpu_seconds = self.cpu_seconds

        cpu_percent: float | None
        cpu_percent = self.cpu_percent

        memory_bytes = self.memory_bytes

        gpus = []
        for gpus_item_data in self.gpus:
            gpus_item = gpus_item_data.to_dict()
            gpus.append(gpus_item)

        gpu_absent = self.gpu_absent

        busy = self.busy

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sampled_at": sampled_at,
                "processes": processes,
                "cpu_seconds": cpu_seconds,
                "cpu_percent": cpu_percent,
                "memory_bytes": memory_bytes,
                "gpus": gpus,
                "gpu_absent": gpu_absent,
                "busy": busy,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.utilization_card import UtilizationCard

        d = dict(src_dict)
        sampled_at = datetime.datetime.fromisoformat(d.pop("sampled_at"))

        processes = d.pop("processes")

        cpu_seconds = d.pop("cpu_seconds")

        def _parse_cpu_percent(data: object) -> float | None:
            if data is None:
                return data
            return cast(float | None, data)

        cpu_percent = _parse_cpu_percent(d.pop("cpu_percent"))

        memory_bytes = d.pop("memory_bytes")

        gpus = []
        _gpus = d.pop("gpus")
        for gpus_item_data in _gpus:
            gpus_item = UtilizationCard.from_dict(gpus_item_data)

            gpus.append(gpus_item)

        gpu_absent = d.pop("gpu_absent")

        busy = d.pop("busy")

        utilization_sample = cls(
            sampled_at=sampled_at,
            processes=processes,
            cpu_seconds=cpu_seconds,
            cpu_percent=cpu_percent,
            memory_bytes=memory_bytes,
            gpus=gpus,
            gpu_absent=gpu_absent,
            busy=busy,
        )

        utilization_sample.additional_properties = d
        return utilization_sample

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
