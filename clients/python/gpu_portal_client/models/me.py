from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.membership import Membership


T = TypeVar("T", bound="Me")


@_attrs_define
class Me:
    """
    Attributes:
        id (int):
        email (str):
        verified (bool):
        memberships (list[Membership]):
        token_organization (None | str):
        token_scope (None | str):
        name (str | Unset):
    """

    id: int
    email: str
    verified: bool
    memberships: list[Membership]
    token_organization: None | str
    token_scope: None | str
    name: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        email = self.email

        verified = self.verified

        memberships = []
        for memberships_item_data in self.memberships:
            memberships_item = memberships_item_data.to_dict()
            memberships.append(memberships_item)

        token_organization: None | str
        token_organization = self.token_organization

        token_scope: None | str
        token_scope = self.token_scope

        name = self.name

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "email": email,
                "verified": verified,
                "memberships": memberships,
                "token_organization": token_organization,
                "token_scope": token_scope,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.membership import Membership

        d = dict(src_dict)
        id = d.pop("id")

        email = d.pop("email")

        verified = d.pop("verified")

        memberships = []
        _memberships = d.pop("memberships")
        for memberships_item_data in _memberships:
            memberships_item = Membership.from_dict(memberships_item_data)

            memberships.append(memberships_item)

        def _parse_token_organization(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        token_organization = _parse_token_organization(d.pop("token_organization"))

        def _parse_token_scope(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        token_scope = _parse_token_scope(d.pop("token_scope"))

        name = d.pop("name", UNSET)

        me = cls(
            id=id,
            email=email,
            verified=verified,
            memberships=memberships,
            token_organization=token_organization,
            token_scope=token_scope,
            name=name,
        )

        me.additional_properties = d
        return me

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
