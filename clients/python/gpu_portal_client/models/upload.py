from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.domain_enum import DomainEnum
from ..models.format_enum import FormatEnum
from ..models.upload_status_enum import UploadStatusEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Upload")


@_attrs_define
class Upload:
    """
    Attributes:
        id (int):
        name (str):
        format_ (FormatEnum): * `jsonl` - JSONL (one object with a text field per line)
            * `txt` - Plain text (documents separated by blank lines)
            * `csv` - CSV (choose the text column)
        text_column (str | Unset):
        domain (DomainEnum | Unset): * `finance` - Finance
            * `medical` - Medical
            * `legal` - Legal
            * `other` - Other
        original_filename (str | Unset):
        size_bytes (int | Unset):
        keep_original (bool | Unset):
        status (UploadStatusEnum | Unset): * `received` - Received
            * `processing` - Processing
            * `ready` - Ready
            * `failed` - Failed
        stage (str | Unset):
        percent (int | Unset):
        error (Any | Unset):
        report (Any | Unset):
        dataset_version (int | None | Unset):
        created_at (datetime.datetime | Unset):
        updated_at (datetime.datetime | Unset):
    """

    id: int
    name: str
    format_: FormatEnum
    text_column: str | Unset = UNSET
    domain: DomainEnum | Unset = UNSET
    original_filename: str | Unset = UNSET
    size_bytes: int | Unset = UNSET
    keep_original: bool | Unset = UNSET
    status: UploadStatusEnum | Unset = UNSET
    stage: str | Unset = UNSET
    percent: int | Unset = UNSET
    error: Any | Unset = UNSET
    report: Any | Unset = UNSET
    dataset_version: int | None | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    updated_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        name = self.name

        format_ = self.format_.value

        text_column = self.text_column

        domain: str | Unset = UNSET
        if not isinstance(self.domain, Unset):
            domain = self.domain.value

        original_filename = self.original_filename

        size_bytes = self.size_bytes

        keep_original = self.keep_original

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        stage = self.stage

        percent = self.percent

        error = self.error

        report = self.report

        dataset_version: int | None | Unset
        if isinstance(self.dataset_version, Unset):
            dataset_version = UNSET
        else:
            dataset_version = self.dataset_version

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        updated_at: str | Unset = UNSET
        if not isinstance(self.updated_at, Unset):
            updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "format": format_,
            }
        )
        if text_column is not UNSET:
            field_dict["text_column"] = text_column
        if domain is not UNSET:
            field_dict["domain"] = domain
        if original_filename is not UNSET:
            field_dict["original_filename"] = original_filename
        if size_bytes is not UNSET:
            field_dict["size_bytes"] = size_bytes
        if keep_original is not UNSET:
            field_dict["keep_original"] = keep_original
        if status is not UNSET:
            field_dict["status"] = status
        if stage is not UNSET:
            field_dict["stage"] = stage
        if percent is not UNSET:
            field_dict["percent"] = percent
        if error is not UNSET:
            field_dict["error"] = error
        if report is not UNSET:
            field_dict["report"] = report
        if dataset_version is not UNSET:
            field_dict["dataset_version"] = dataset_version
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if updated_at is not UNSET:
            field_dict["updated_at"] = updated_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        format_ = FormatEnum(d.pop("format"))

        text_column = d.pop("text_column", UNSET)

        _domain = d.pop("domain", UNSET)
        domain: DomainEnum | Unset
        if isinstance(_domain, Unset):
            domain = UNSET
        else:
            domain = DomainEnum(_domain)

        original_filename = d.pop("original_filename", UNSET)

        size_bytes = d.pop("size_bytes", UNSET)

        keep_original = d.pop("keep_original", UNSET)

        _status = d.pop("status", UNSET)
        status: UploadStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = UploadStatusEnum(_status)

        stage = d.pop("stage", UNSET)

        percent = d.pop("percent", UNSET)

        error = d.pop("error", UNSET)

        report = d.pop("report", UNSET)

        def _parse_dataset_version(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        dataset_version = _parse_dataset_version(d.pop("dataset_version", UNSET))

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        _updated_at = d.pop("updated_at", UNSET)
        updated_at: datetime.datetime | Unset
        if isinstance(_updated_at, Unset):
            updated_at = UNSET
        else:
            updated_at = datetime.datetime.fromisoformat(_updated_at)

        upload = cls(
            id=id,
            name=name,
            format_=format_,
            text_column=text_column,
            domain=domain,
            original_filename=original_filename,
            size_bytes=size_bytes,
            keep_original=keep_original,
            status=status,
            stage=stage,
            percent=percent,
            error=error,
            report=report,
            dataset_version=dataset_version,
            created_at=created_at,
            updated_at=updated_at,
        )

        upload.additional_properties = d
        return upload

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
