from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.top_up_status_enum import TopUpStatusEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="TopUp")


@_attrs_define
class TopUp:
    """
    Attributes:
        id (int):
        amount (str):
        amount_micros (int):
        status (TopUpStatusEnum | Unset): * `created` - Created
            * `checkout_open` - Awaiting payment
            * `paid` - Paid
            * `failed` - Failed
            * `expired` - Expired
        checkout_url (str | Unset):
        created_at (datetime.datetime | Unset):
        paid_at (datetime.datetime | None | Unset):
    """

    id: int
    amount: str
    amount_micros: int
    status: TopUpStatusEnum | Unset = UNSET
    checkout_url: str | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    paid_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        amount = self.amount

        amount_micros = self.amount_micros

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        checkout_url: str | Unset
        if isinstance(self.checkout_url, Unset):
            checkout_url = UNSET
        else:
            checkout_url = self.checkout_url

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        paid_at: None | str | Unset
        if isinstance(self.paid_at, Unset):
            paid_at = UNSET
        elif isinstance(self.paid_at, datetime.datetime):
            paid_at = self.paid_at.isoformat()
        else:
            paid_at = self.paid_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "amount": amount,
                "amount_micros": amount_micros,
            }
        )
        if status is not UNSET:
            field_dict["status"] = status
        if checkout_url is not UNSET:
            field_dict["checkout_url"] = checkout_url
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if paid_at is not UNSET:
            field_dict["paid_at"] = paid_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        amount = d.pop("amount")

        amount_micros = d.pop("amount_micros")

        _status = d.pop("status", UNSET)
        status: TopUpStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = TopUpStatusEnum(_status)

        def _parse_checkout_url(data: object) -> str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(str | Unset, data)

        checkout_url = _parse_checkout_url(d.pop("checkout_url", UNSET))

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        def _parse_paid_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                paid_at_type_0 = datetime.datetime.fromisoformat(data)

                return paid_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        paid_at = _parse_paid_at(d.pop("paid_at", UNSET))

        top_up = cls(
            id=id,
            amount=amount,
            amount_micros=amount_micros,
            status=status,
            checkout_url=checkout_url,
            created_at=created_at,
            paid_at=paid_at,
        )

        top_up.additional_properties = d
        return top_up

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
