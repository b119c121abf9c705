from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Mount")


@_attrs_define
class Mount:
    """
    Attributes:
        id (int):
        version (int):
        consumer (str):
        shard_dir (str):
        agreement (int | None | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    version: int
    consumer: str
    shard_dir: str
    agreement: int | None | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        version = self.version

        consumer = self.consumer

        shard_dir = self.shard_dir

        agreement: int | None | Unset
        if isinstance(self.agreement, Unset):
            agreement = UNSET
        else:
            agreement = self.agreement

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "version": version,
                "consumer": consumer,
                "shard_dir": shard_dir,
            }
        )
        if agreement is not UNSET:
            field_dict["agreement"] = agreement
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        version = d.pop("version")

        consumer = d.pop("consumer")

        shard_dir = d.pop("shard_dir")

        def _parse_agreement(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        agreement = _parse_agreement(d.pop("agreement", UNSET))

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        mount = cls(
            id=id,
            version=version,
            consumer=consumer,
            shard_dir=shard_dir,
            agreement=agreement,
            created_at=created_at,
        )

        mount.additional_properties = d
        return mount

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
