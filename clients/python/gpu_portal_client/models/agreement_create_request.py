from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="AgreementCreateRequest")


@_attrs_define
class AgreementCreateRequest:
    """
    Attributes:
        text_sha256 (str): SHA-256 of the exact text you were shown
        license_version (int | Unset): defaults to the license's newest version
    """

    text_sha256: str
    license_version: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        text_sha256 = self.text_sha256

        license_version = self.license_version

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "text_sha256": text_sha256,
            }
        )
        if license_version is not UNSET:
            field_dict["license_version"] = license_version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        text_sha256 = d.pop("text_sha256")

        license_version = d.pop("license_version", UNSET)

        agreement_create_request = cls(
            text_sha256=text_sha256,
            license_version=license_version,
        )

        agreement_create_request.additional_properties = d
        return agreement_create_request

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
