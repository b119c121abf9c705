from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="StatementWriteOff")


@_attrs_define
class StatementWriteOff:
    """
    Attributes:
        instance_id (int):
        minutes (int):
        amount_micros (int):
        first_minute (datetime.datetime):
    """

    instance_id: int
    minutes: int
    amount_micros: int
    first_minute: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        instance_id = self.instance_id

        minutes = self.minutes

        amount_micros = self.amount_micros

        first_minute = self.first_minute.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "instance_id": instance_id,
                "minutes": minutes,
                "amount_micros": amount_micros,
                "first_minute": first_minute,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        instance_id = d.pop("instance_id")

        minutes = d.pop("minutes")

        amount_micros = d.pop("amount_micros")

        first_minute = datetime.datetime.fromisoformat(d.pop("first_minute"))

        statement_write_off = cls(
            instance_id=instance_id,
            minutes=minutes,
            amount_micros=amount_micros,
            first_minute=first_minute,
        )

        statement_write_off.additional_properties = d
        return statement_write_off

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
