from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.deid_status_enum import DeidStatusEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.license_version import LicenseVersion


T = TypeVar("T", bound="DatasetVersion")


@_attrs_define
class DatasetVersion:
    """
    Attributes:
        id (int):
        dataset (int):
        number (int):
        license_version (LicenseVersion):
        documents (int | Unset):
        bytes_ (int | Unset):
        characters (int | Unset):
        tokens (int | Unset):
        language (str | Unset):
        deid_status (DeidStatusEnum | Unset): * `deidentified` - De-identified
            * `not_required` - Not required (public-domain source)
        deid_report (Any | Unset):
        manifest (Any | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    dataset: int
    number: int
    license_version: LicenseVersion
    documents: int | Unset = UNSET
    bytes_: int | Unset = UNSET
    characters: int | Unset = UNSET
    tokens: int | Unset = UNSET
    language: str | Unset = UNSET
    deid_status: DeidStatusEnum | Unset = UNSET
    deid_report: Any | Unset = UNSET
    manifest: Any | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        dataset = self.dataset

        number = self.number

        license_version = self.license_version.to_dict()

        documents = self.documents

        bytes_ = self.bytes_

        characters = self.characters

        tokens = self.tokens

        language = self.language

        deid_status: str | Unset = UNSET
        if not isinstance(self.deid_status, Unset):
            deid_status = self.deid_status.value

        deid_report = self.deid_report

        manifest = self.manifest

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "dataset": dataset,
                "number": number,
                "license_version": license_version,
            }
        )
        if documents is not UNSET:
            field_dict["documents"] = documents
        if bytes_ is not UNSET:
            field_dict["bytes"] = bytes_
        if characters is not UNSET:
            field_dict["characters"] = characters
        if tokens is not UNSET:
            field_dict["tokens"] = tokens
        if language is not UNSET:
            field_dict["language"] = language
        if deid_status is not UNSET:
            field_dict["deid_status"] = deid_status
        if deid_report is not UNSET:
            field_dict["deid_report"] = deid_report
        if manifest is not UNSET:
            field_dict["manifest"] = manifest
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.license_version import LicenseVersion

        d = dict(src_dict)
        id = d.pop("id")

        dataset = d.pop("dataset")

        number = d.pop("number")

        license_version = LicenseVersion.from_dict(d.pop("license_version"))

        documents = d.pop("documents", UNSET)

        bytes_ = d.pop("bytes", UNSET)

        characters = d.pop("characters", UNSET)

        tokens = d.pop("tokens", UNSET)

        language = d.pop("language", UNSET)

        _deid_status = d.pop("deid_status", UNSET)
        deid_status: DeidStatusEnum | Unset
        if isinstance(_deid_status, Unset):
            deid_status = UNSET
        else:
            deid_status = DeidStatusEnum(_deid_status)

        deid_report = d.pop("deid_report", UNSET)

        manifest = d.pop("manifest", UNSET)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        dataset_version = cls(
            id=id,
            dataset=dataset,
            number=number,
            license_version=license_version,
            documents=documents,
            bytes_=bytes_,
            characters=characters,
            tokens=tokens,
            language=language,
            deid_status=deid_status,
            deid_report=deid_report,
            manifest=manifest,
            created_at=created_at,
        )

        dataset_version.additional_properties = d
        return dataset_version

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
