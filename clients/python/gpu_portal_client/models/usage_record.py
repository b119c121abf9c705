from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.mode_enum import ModeEnum

T = TypeVar("T", bound="UsageRecord")


@_attrs_define
class UsageRecord:
    """
    Attributes:
        id (int):
        instance_id (int):
        minute (datetime.datetime):
        gpu_type (str):
        mode (ModeEnum): * `container` - Container
            * `bare_metal` - Bare metal
        gpu_count (int):
        price_per_gpu_hour (str):
        amount (str):
        amount_micros (int):
    """

    id: int
    instance_id: int
    minute: datetime.datetime
    gpu_type: str
    mode: ModeEnum
    gpu_count: int
    price_per_gpu_hour: str
    amount: str
    amount_micros: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        instance_id = self.instance_id

        minute = self.minute.isoformat()

        gpu_type = self.gpu_type

        mode = self.mode.value

        gpu_count = self.gpu_count

        price_per_gpu_hour = self.price_per_gpu_hour

        amount = self.amount

        amount_micros = self.amount_micros

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "instance_id": instance_id,
                "minute": minute,
                "gpu_type": gpu_type,
                "mode": mode,
                "gpu_count": gpu_count,
                "price_per_gpu_hour": price_per_gpu_hour,
                "amount": amount,
                "amount_micros": amount_micros,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        instance_id = d.pop("instance_id")

        minute = datetime.datetime.fromisoformat(d.pop("minute"))

        gpu_type = d.pop("gpu_type")

        mode = ModeEnum(d.pop("mode"))

        gpu_count = d.pop("gpu_count")

        price_per_gpu_hour = d.pop("price_per_gpu_hour")

        amount = d.pop("amount")

        amount_micros = d.pop("amount_micros")

        usage_record = cls(
            id=id,
            instance_id=instance_id,
            minute=minute,
            gpu_type=gpu_type,
            mode=mode,
            gpu_count=gpu_count,
            price_per_gpu_hour=price_per_gpu_hour,
            amount=amount,
            amount_micros=amount_micros,
        )

        usage_record.additional_properties = d
        return usage_record

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
