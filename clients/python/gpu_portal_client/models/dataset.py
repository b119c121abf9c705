from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.dataset_visibility_enum import DatasetVisibilityEnum
from ..models.domain_enum import DomainEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.dataset_latest_version_type_0 import DatasetLatestVersionType0


T = TypeVar("T", bound="Dataset")


@_attrs_define
class Dataset:
    """
    Attributes:
        id (int):
        slug (str):
        name (str):
        publisher (str):
        latest_version (DatasetLatestVersionType0 | None):
        domain (DomainEnum | Unset): * `finance` - Finance
            * `medical` - Medical
            * `legal` - Legal
            * `other` - Other
        description (str | Unset):
        visibility (DatasetVisibilityEnum | Unset): * `public` - Public
            * `private` - Private to the organization
        attribution (str | Unset):
        source_url (str | Unset):
        preparing (Any | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    slug: str
    name: str
    publisher: str
    latest_version: DatasetLatestVersionType0 | None
    domain: DomainEnum | Unset = UNSET
    description: str | Unset = UNSET
    visibility: DatasetVisibilityEnum | Unset = UNSET
    attribution: str | Unset = UNSET
    source_url: str | Unset = UNSET
    preparing: Any | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.dataset_latest_version_type_0 import DatasetLatestVersionType0

        id = self.id

        slug = self.slug

        name = self.name

        publisher = self.publisher

        latest_version: dict[str, Any] | None
        if isinstance(self.latest_version, DatasetLatestVersionType0):
            latest_version = self.latest_version.to_dict()
        else:
            latest_version = self.latest_version

        domain: str | Unset = UNSET
        if not isinstance(self.domain, Unset):
            domain = self.domain.value

        description = self.description

        visibility: str | Unset = UNSET
        if not isinstance(self.visibility, Unset):
            visibility = self.visibility.value

        attribution = self.attribution

        source_url: str | Unset
        if isinstance(self.source_url, Unset):
            source_url = UNSET
        else:
            source_url = self.source_url

        preparing = self.preparing

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "slug": slug,
                "name": name,
                "publisher": publisher,
                "latest_version": latest_version,
            }
        )
        if domain is not UNSET:
            field_dict["domain"] = domain
        if description is not UNSET:
            field_dict["description"] = description
        if visibility is not UNSET:
            field_dict["visibility"] = visibility
        if attribution is not UNSET:
            field_dict["attribution"] = attribution
        if source_url is not UNSET:
            field_dict["source_url"] = source_url
        if preparing is not UNSET:
            field_dict["preparing"] = preparing
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.dataset_latest_version_type_0 import DatasetLatestVersionType0

        d = dict(src_dict)
        id = d.pop("id")

        slug = d.pop("slug")

        name = d.pop("name")

        publisher = d.pop("publisher")

        def _parse_latest_version(data: object) -> DatasetLatestVersionType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                latest_version_type_0 = DatasetLatestVersionType0.from_dict(data)

                return latest_version_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(DatasetLatestVersionType0 | None, data)

        latest_version = _parse_latest_version(d.pop("latest_version"))

        _domain = d.pop("domain", UNSET)
        domain: DomainEnum | Unset
        if isinstance(_domain, Unset):
            domain = UNSET
        else:
            domain = DomainEnum(_domain)

        description = d.pop("description", UNSET)

        _visibility = d.pop("visibility", UNSET)
        visibility: DatasetVisibilityEnum | Unset
        if isinstance(_visibility, Unset):
            visibility = UNSET
        else:
            visibility = DatasetVisibilityEnum(_visibility)

        attribution = d.pop("attribution", UNSET)

        def _parse_source_url(data: object) -> str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(str | Unset, data)

        source_url = _parse_source_url(d.pop("source_url", UNSET))

        preparing = d.pop("preparing", UNSET)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        dataset = cls(
            id=id,
            slug=slug,
            name=name,
            publisher=publisher,
            latest_version=latest_version,
            domain=domain,
            description=description,
            visibility=visibility,
            attribution=attribution,
            source_url=source_url,
            preparing=preparing,
            created_at=created_at,
        )

        dataset.additional_properties = d
        return dataset

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
