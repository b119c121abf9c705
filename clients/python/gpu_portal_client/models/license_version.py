from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="LicenseVersion")


@_attrs_define
class LicenseVersion:
    """
    Attributes:
        id (int):
        license_ (str):
        license_name (str):
        number (int):
        text_sha256 (str):
        commercial_use (bool | Unset):
        redistribution (bool | Unset):
        derivative_models (bool | Unset):
        attribution_text (str | Unset):
        field_of_use (str | Unset):
        term_days (int | None | Unset):
        price_micros (int | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    license_: str
    license_name: str
    number: int
    text_sha256: str
    commercial_use: bool | Unset = UNSET
    redistribution: bool | Unset = UNSET
    derivative_models: bool | Unset = UNSET
    attribution_text: str | Unset = UNSET
    field_of_use: str | Unset = UNSET
    term_days: int | None | Unset = UNSET
    price_micros: int | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        license_ = self.license_

        license_name = self.license_name

        number = self.number

        text_sha256 = self.text_sha256

        commercial_use = self.commercial_use

        redistribution = self.redistribution

        derivative_models = self.derivative_models

        attribution_text = self.attribution_text

        field_of_use = self.field_of_use

        term_days: int | None | Unset
        if isinstance(self.term_days, Unset):
            term_days = UNSET
        else:
            term_days = self.term_days

        price_micros = self.price_micros

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "license": license_,
                "license_name": license_name,
                "number": number,
                "text_sha256": text_sha256,
            }
        )
        if commercial_use is not UNSET:
            field_dict["commercial_use"] = commercial_use
        if redistribution is not UNSET:
            field_dict["redistribution"] = redistribution
        if derivative_models is not UNSET:
            field_dict["derivative_models"] = derivative_models
        if attribution_text is not UNSET:
            field_dict["attribution_text"] = attribution_text
        if field_of_use is not UNSET:
            field_dict["field_of_use"] = field_of_use
        if term_days is not UNSET:
            field_dict["term_days"] = term_days
        if price_micros is not UNSET:
            field_dict["price_micros"] = price_micros
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        license_ = d.pop("license")

        license_name = d.pop("license_name")

        number = d.pop("number")

        text_sha256 = d.pop("text_sha256")

        commercial_use = d.pop("commercial_use", UNSET)

        redistribution = d.pop("redistribution", UNSET)

        derivative_models = d.pop("derivative_models", UNSET)

        attribution_text = d.pop("attribution_text", UNSET)

        field_of_use = d.pop("field_of_use", UNSET)

        def _parse_term_days(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        term_days = _parse_term_days(d.pop("term_days", UNSET))

        price_micros = d.pop("price_micros", UNSET)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        license_version = cls(
            id=id,
            license_=license_,
            license_name=license_name,
            number=number,
            text_sha256=text_sha256,
            commercial_use=commercial_use,
            redistribution=redistribution,
            derivative_models=derivative_models,
            attribution_text=attribution_text,
            field_of_use=field_of_use,
            term_days=term_days,
            price_micros=price_micros,
            created_at=created_at,
        )

        license_version.additional_properties = d
        return license_version

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
