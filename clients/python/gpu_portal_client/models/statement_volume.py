from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StatementVolume")


@_attrs_define
class StatementVolume:
    """
    Attributes:
        volume_id (int):
        name (str):
        size_gb (int):
        hours (int): started volume-hours charged this month
        amount_micros (int):
        shortfall_micros (int):
    """

    volume_id: int
    name: str
    size_gb: int
    hours: int
    amount_micros: int
    shortfall_micros: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        volume_id = self.volume_id

        name = self.name

        size_gb = self.size_gb

        hours = self.hours

        amount_micros = self.amount_micros

        shortfall_micros = self.shortfall_micros

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "volume_id": volume_id,
                "name": name,
                "size_gb": size_gb,
                "hours": hours,
                "amount_micros": amount_micros,
                "shortfall_micros": shortfall_micros,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        volume_id = d.pop("volume_id")

        name = d.pop("name")

        size_gb = d.pop("size_gb")

        hours = d.pop("hours")

        amount_micros = d.pop("amount_micros")

        shortfall_micros = d.pop("shortfall_micros")

        statement_volume = cls(
            volume_id=volume_id,
            name=name,
            size_gb=size_gb,
            hours=hours,
            amount_micros=amount_micros,
            shortfall_micros=shortfall_micros,
        )

        statement_volume.additional_properties = d
        return statement_volume

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
