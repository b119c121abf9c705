from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="TopUpCreateRequest")


@_attrs_define
class TopUpCreateRequest:
    """
    Attributes:
        amount (str): CNY, e.g. 200.00
        success_url (str):
        cancel_url (str):
    """

    amount: str
    success_url: str
    cancel_url: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        amount = self.amount

        success_url = self.success_url

        cancel_url = self.cancel_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "amount": amount,
                "success_url": success_url,
                "cancel_url": cancel_url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        amount = d.pop("amount")

        success_url = d.pop("success_url")

        cancel_url = d.pop("cancel_url")

        top_up_create_request = cls(
            amount=amount,
            success_url=success_url,
            cancel_url=cancel_url,
        )

        top_up_create_request.additional_properties = d
        return top_up_create_request

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
