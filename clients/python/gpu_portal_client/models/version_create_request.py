from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.version_create_kind_enum import VersionCreateKindEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="VersionCreateRequest")


@_attrs_define
class VersionCreateRequest:
    """
    Attributes:
        kind (VersionCreateKindEnum): * `external` - external
            * `echo` - echo
        endpoint_url (str | Unset):
    """

    kind: VersionCreateKindEnum
    endpoint_url: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        kind = self.kind.value

        endpoint_url: str | Unset
        if isinstance(self.endpoint_url, Unset):
            endpoint_url = UNSET
        else:
            endpoint_url = self.endpoint_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "kind": kind,
            }
        )
        if endpoint_url is not UNSET:
            field_dict["endpoint_url"] = endpoint_url

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        kind = VersionCreateKindEnum(d.pop("kind"))

        def _parse_endpoint_url(data: object) -> str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(str | Unset, data)

        endpoint_url = _parse_endpoint_url(d.pop("endpoint_url", UNSET))

        version_create_request = cls(
            kind=kind,
            endpoint_url=endpoint_url,
        )

        version_create_request.additional_properties = d
        return version_create_request

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
