from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.grant_kind_enum import GrantKindEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Grant")


@_attrs_define
class Grant:
    """
    Attributes:
        id (int):
        kind (GrantKindEnum): * `trial` - Trial credit
            * `promotional` - Promotional credit
            * `staff` - Credit from staff
        amount (str):
        remaining (str):
        expires_at (datetime.datetime):
        granted_at (datetime.datetime | Unset):
        expired_at (datetime.datetime | None | Unset):
    """

    id: int
    kind: GrantKindEnum
    amount: str
    remaining: str
    expires_at: datetime.datetime
    granted_at: datetime.datetime | Unset = UNSET
    expired_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        kind = self.kind.value

        amount = self.amount

        remaining = self.remaining

        expires_at = self.expires_at.isoformat()

        granted_at: str | Unset = UNSET
        if not isinstance(self.granted_at, Unset):
            granted_at = self.granted_at.isoformat()

        expired_at: None | str | Unset
        if isinstance(self.expired_at, Unset):
            expired_at = UNSET
        elif isinstance(self.expired_at, datetime.datetime):
            expired_at = self.expired_at.isoformat()
        else:
            expired_at = self.expired_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "kind": kind,
                "amount": amount,
                "remaining": remaining,
                "expires_at": expires_at,
            }
        )
        if granted_at is not UNSET:
            field_dict["granted_at"] = granted_at
        if expired_at is not UNSET:
            field_dict["expired_at"] = expired_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        kind = GrantKindEnum(d.pop("kind"))

        amount = d.pop("amount")

        remaining = d.pop("remaining")

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        _granted_at = d.pop("granted_at", UNSET)
        granted_at: datetime.datetime | Unset
        if isinstance(_granted_at, Unset):
            granted_at = UNSET
        else:
            granted_at = datetime.datetime.fromisoformat(_granted_at)

        def _parse_expired_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                expired_at_type_0 = datetime.datetime.fromisoformat(data)

                return expired_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        expired_at = _parse_expired_at(d.pop("expired_at", UNSET))

        grant = cls(
            id=id,
            kind=kind,
            amount=amount,
            remaining=remaining,
            expires_at=expires_at,
            granted_at=granted_at,
            expired_at=expired_at,
        )

        grant.additional_properties = d
        return grant

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
