from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.version_kind_enum import VersionKindEnum
from ..models.version_status_enum import VersionStatusEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Version")


@_attrs_define
class Version:
    """
    Attributes:
        number (int):
        kind (VersionKindEnum): * `checkpoint` - Model from a training checkpoint
            * `external` - External HTTPS endpoint
            * `echo` - Echo (returns the input)
        endpoint_url (str | Unset):
        status (VersionStatusEnum | Unset): * `building` - Building
            * `ready` - Ready
            * `failed` - Failed
        progress (int | Unset):
        active (bool | Unset):
        lineage (Any | Unset):
        error (str | Unset):
        created_at (datetime.datetime | Unset):
    """

    number: int
    kind: VersionKindEnum
    endpoint_url: str | Unset = UNSET
    status: VersionStatusEnum | Unset = UNSET
    progress: int | Unset = UNSET
    active: bool | Unset = UNSET
    lineage: Any | Unset = UNSET
    error: str | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        number = self.number

        kind = self.kind.value

        endpoint_url: str | Unset
        if isinstance(self.endpoint_url, Unset):
            endpoint_url = UNSET
        else:
            endpoint_url = self.endpoint_url

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        progress = self.progress

        active = self.active

        lineage = self.lineage

        error = self.error

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "number": number,
                "kind": kind,
            }
        )
        if endpoint_url is not UNSET:
            field_dict["endpoint_url"] = endpoint_url
        if status is not UNSET:
            field_dict["status"] = status
        if progress is not UNSET:
            field_dict["progress"] = progress
        if active is not UNSET:
            field_dict["active"] = active
        if lineage is not UNSET:
            field_dict["lineage"] = lineage
        if error is not UNSET:
            field_dict["error"] = error
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        number = d.pop("number")

        kind = VersionKindEnum(d.pop("kind"))

        def _parse_endpoint_url(data: object) -> str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(str | Unset, data)

        endpoint_url = _parse_endpoint_url(d.pop("endpoint_url", UNSET))

        _status = d.pop("status", UNSET)
        status: VersionStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = VersionStatusEnum(_status)

        progress = d.pop("progress", UNSET)

        active = d.pop("active", UNSET)

        lineage = d.pop("lineage", UNSET)

        error = d.pop("error", UNSET)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        version = cls(
            number=number,
            kind=kind,
            endpoint_url=endpoint_url,
            status=status,
            progress=progress,
            active=active,
            lineage=lineage,
            error=error,
            created_at=created_at,
        )

        version.additional_properties = d
        return version

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
