from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UtilizationCard")


@_attrs_define
class UtilizationCard:
    """One NVIDIA card of the instance's node at the sample's time (NVML).

    Attributes:
        index (int): the card's NVML index on its node
        name (str): the card's model, as NVML names it
        utilization_percent (int): percent (0–100) of NVML's last sample period (1/6 s to 1 s) in which a kernel ran on
            the card, whoever's process ran it
        memory_used_bytes (int): bytes of card memory in use, all processes together
        memory_total_bytes (int): bytes of card memory
        instance_processes (int | None): how many of this instance's processes have a compute context on the card; null
            when NVML did not list the card's processes
        instance_memory_bytes (int | None): bytes of card memory held by this instance's processes; null when unknown
    """

    index: int
    name: str
    utilization_percent: int
    memory_used_bytes: int
    memory_total_bytes: int
    instance_processes: int | None
    instance_memory_bytes: int | None
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        index = self.index

        name = self.name

        utilization_percent = self.utilization_percent

        memory_used_bytes = self.memory_used_bytes

        memory_total_bytes = self.memory_total_bytes

        instance_processes: int | None
        instance_processes = self.instance_processes

        instance_memory_bytes: int | None
        instance_memory_bytes = self.instance_memory_bytes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "index": index,
                "name": name,
                "utilization_percent": utilization_percent,
                "memory_used_bytes": memory_used_bytes,
                "memory_total_bytes": memory_total_bytes,
                "instance_processes": instance_processes,
                "instance_memory_bytes": instance_memory_bytes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        index = d.pop("index")

        name = d.pop("name")

        utilization_percent = d.pop("utilization_percent")

        memory_used_bytes = d.pop("memory_used_bytes")

        memory_total_bytes = d.pop("memory_total_bytes")

        def _parse_instance_processes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        instance_processes = _parse_instance_processes(d.pop("instance_processes"))

        def _parse_instance_memory_bytes(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        instance_memory_bytes = _parse_instance_memory_bytes(
            d.pop("instance_memory_bytes")
        )

        utilization_card = cls(
            index=index,
            name=name,
            utilization_percent=utilization_percent,
            memory_used_bytes=memory_used_bytes,
            memory_total_bytes=memory_total_bytes,
            instance_processes=instance_processes,
            instance_memory_bytes=instance_memory_bytes,
        )

        utilization_card.additional_properties = d
        return utilization_card

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
