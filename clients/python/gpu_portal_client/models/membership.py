from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.role_enum import RoleEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Membership")


@_attrs_define
class Membership:
    """
    Attributes:
        organization (str):
        organization_name (str):
        role (RoleEnum | Unset): * `owner` - Owner
            * `admin` - Admin
            * `member` - Member
            * `billing` - Billing viewer
    """

    organization: str
    organization_name: str
    role: RoleEnum | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        organization = self.organization

        organization_name = self.organization_name

        role: str | Unset = UNSET
        if not isinstance(self.role, Unset):
            role = self.role.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "organization": organization,
                "organization_name": organization_name,
            }
        )
        if role is not UNSET:
            field_dict["role"] = role

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        organization = d.pop("organization")

        organization_name = d.pop("organization_name")

        _role = d.pop("role", UNSET)
        role: RoleEnum | Unset
        if isinstance(_role, Unset):
            role = UNSET
        else:
            role = RoleEnum(_role)

        membership = cls(
            organization=organization,
            organization_name=organization_name,
            role=role,
        )

        membership.additional_properties = d
        return membership

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
