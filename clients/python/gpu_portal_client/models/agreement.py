from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Agreement")


@_attrs_define
class Agreement:
    """
    Attributes:
        id (int):
        organization (str):
        user (str):
        license_version (int):
        text_sha256 (str):
        dataset (int | None | Unset):
        accepted_at (datetime.datetime | Unset):
        ip (None | str | Unset):
        user_agent (str | Unset):
        charge_transaction_id (int | None | Unset):
    """

    id: int
    organization: str
    user: str
    license_version: int
    text_sha256: str
    dataset: int | None | Unset = UNSET
    accepted_at: datetime.datetime | Unset = UNSET
    ip: None | str | Unset = UNSET
    user_agent: str | Unset = UNSET
    charge_transaction_id: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        organization = self.organization

        user = self.user

        license_version = self.license_version

        text_sha256 = self.text_sha256

        dataset: int | None | Unset
        if isinstance(self.dataset, Unset):
            dataset = UNSET
        else:
            dataset = self.dataset

        accepted_at: str | Unset = UNSET
        if not isinstance(self.accepted_at, Unset):
            accepted_at = self.accepted_at.isoformat()

        ip: None | str | Unset
        if isinstance(self.ip, Unset):
            ip = UNSET
        else:
            ip = self.ip

        user_agent = self.user_agent

        charge_transaction_id: int | None | Unset
        if isinstance(self.charge_transaction_id, Unset):
            charge_transaction_id = UNSET
        else:
            charge_transaction_id = self.charge_transaction_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "organization": organization,
                "user": user,
                "license_version": license_version,
                "text_sha256": text_sha256,
            }
        )
        if dataset is not UNSET:
            field_dict["dataset"] = dataset
        if accepted_at is not UNSET:
            field_dict["accepted_at"] = accepted_at
        if ip is not UNSET:
            field_dict["ip"] = ip
        if user_agent is not UNSET:
            field_dict["user_agent"] = user_agent
        if charge_transaction_id is not UNSET:
            field_dict["charge_transaction_id"] = charge_transaction_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        organization = d.pop("organization")

        user = d.pop("user")

        license_version = d.pop("license_version")

        text_sha256 = d.pop("text_sha256")

        def _parse_dataset(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dataset = _parse_dataset(d.pop("dataset", UNSET))

        _accepted_at = d.pop("accepted_at", UNSET)
        accepted_at: datetime.datetime | Unset
        if isinstance(_accepted_at, Unset):
            accepted_at = UNSET
        else:
            accepted_at = datetime.datetime.fromisoformat(_accepted_at)

        def _parse_ip(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        ip = _parse_ip(d.pop("ip", UNSET))

        user_agent = d.pop("user_agent", UNSET)

        def _parse_charge_transaction_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        charge_transaction_id = _parse_charge_transaction_id(
            d.pop("charge_transaction_id", UNSET)
        )

        agreement = cls(
            id=id,
            organization=organization,
            user=user,
            license_version=license_version,
            text_sha256=text_sha256,
            dataset=dataset,
            accepted_at=accepted_at,
            ip=ip,
            user_agent=user_agent,
            charge_transaction_id=charge_transaction_id,
        )

        agreement.additional_properties = d
        return agreement

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
