from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StatementUsage")


@_attrs_define
class StatementUsage:
    """
    Attributes:
        instance_id (int):
        gpu_type (str):
        mode (str):
        gpu_count (int):
        minutes (int):
        amount_micros (int):
    """

    instance_id: int
    gpu_type: str
    mode: str
    gpu_count: int
    minutes: int
    amount_micros: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        instance_id = self.instance_id

        gpu_type = self.gpu_type

        mode = self.mode

        gpu_count = self.gpu_count

        minutes = self.minutes

        amount_micros = self.amount_micros

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "instance_id": instance_id,
                "gpu_type": gpu_type,
                "mode": mode,
                "gpu_count": gpu_count,
                "minutes": minutes,
                "amount_micros": amount_micros,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        instance_id = d.pop("instance_id")

        gpu_type = d.pop("gpu_type")

        mode = d.pop("mode")

        gpu_count = d.pop("gpu_count")

        minutes = d.pop("minutes")

        amount_micros = d.pop("amount_micros")

        statement_usage = cls(
            instance_id=instance_id,
            gpu_type=gpu_type,
            mode=mode,
            gpu_count=gpu_count,
            minutes=minutes,
            amount_micros=amount_micros,
        )

        statement_usage.additional_properties = d
        return statement_usage

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
