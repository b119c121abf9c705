from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Volume")


@_attrs_define
class Volume:
    """A volume: ``size_gb`` GB, ``used_bytes`` as last measured, ``attached_to`` (the instance holding it —
    active, or preempted / in its crash back-off and resuming on it — or null), ``cost_micros`` (storage
    charged so far, micro-CNY), ``price_per_hour_micros``.

        Attributes:
            id (int):
            name (str):
            size_gb (int):
            attached_to (int | None):
            cost_micros (int):
            price_per_hour_micros (int):
            used_bytes (int | Unset):
            measured_at (datetime.datetime | None | Unset):
            created_at (datetime.datetime | Unset):
    """

    id: int
    name: str
    size_gb: int
    attached_to: int | None
    cost_micros: int
    price_per_hour_micros: int
    used_bytes: int | Unset = UNSET
    measured_at: datetime.datetime | None | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        name = self.name

        size_gb = self.size_gb

        attached_to: int | None
        attached_to = self.attached_to

        cost_micros = self.cost_micros

        price_per_hour_micros = self.price_per_hour_micros

        used_bytes = self.used_bytes

        measured_at: None | str | Unset
        if isinstance(self.measured_at, Unset):
            measured_at = UNSET
        elif isinstance(self.measured_at, datetime.datetime):
            measured_at = self.measured_at.isoformat()
        else:
            measured_at = self.measured_at

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "size_gb": size_gb,
                "attached_to": attached_to,
                "cost_micros": cost_micros,
                "price_per_hour_micros": price_per_hour_micros,
            }
        )
        if used_bytes is not UNSET:
            field_dict["used_bytes"] = used_bytes
        if measured_at is not UNSET:
            field_dict["measured_at"] = measured_at
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        size_gb = d.pop("size_gb")

        def _parse_attached_to(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        attached_to = _parse_attached_to(d.pop("attached_to"))

        cost_micros = d.pop("cost_micros")

        price_per_hour_micros = d.pop("price_per_hour_micros")

        used_bytes = d.pop("used_bytes", UNSET)

        def _parse_measured_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                measured_at_type_0 = datetime.datetime.fromisoformat(data)

                return measured_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        measured_at = _parse_measured_at(d.pop("measured_at", UNSET))

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        volume = cls(
            id=id,
            name=name,
            size_gb=size_gb,
            attached_to=attached_to,
            cost_micros=cost_micros,
            price_per_hour_micros=price_per_hour_micros,
            used_bytes=used_bytes,
            measured_at=measured_at,
            created_at=created_at,
        )

        volume.additional_properties = d
        return volume

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
