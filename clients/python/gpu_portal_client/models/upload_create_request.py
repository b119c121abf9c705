from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from .. import types
from ..models.domain_enum import DomainEnum
from ..models.format_enum import FormatEnum
from ..types import UNSET, File, Unset

T = TypeVar("T", bound="UploadCreateRequest")


@_attrs_define
class UploadCreateRequest:
    """
    Attributes:
        file (File):
        format_ (FormatEnum): * `jsonl` - JSONL (one object with a text field per line)
            * `txt` - Plain text (documents separated by blank lines)
            * `csv` - CSV (choose the text column)
        name (str | Unset):
        text_column (str | Unset):
        keep_original (bool | Unset):  Default: False.
        domain (DomainEnum | Unset): * `finance` - Finance
            * `medical` - Medical
            * `legal` - Legal
            * `other` - Other Default: DomainEnum.OTHER.
    """

    file: File
    format_: FormatEnum
    name: str | Unset = UNSET
    text_column: str | Unset = UNSET
    keep_original: bool | Unset = False
    domain: DomainEnum | Unset = DomainEnum.OTHER
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        file = self.file.to_tuple()

        format_ = self.format_.value

        name = self.name

        text_column = self.text_column

        keep_original = self.keep_original

        domain: str | Unset = UNSET
        if not isinstance(self.domain, Unset):
            domain = self.domain.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "file": file,
                "format": format_,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if text_column is not UNSET:
            field_dict["text_column"] = text_column
        if keep_original is not UNSET:
            field_dict["keep_original"] = keep_original
        if domain is not UNSET:
            field_dict["domain"] = domain

        return field_dict

    def to_multipart(self) -> types.RequestFiles:
        files: types.RequestFiles = []

        files.append(("file", self.file.to_tuple()))

        files.append(("format", (None, str(self.format_.value).encode(), "text/plain")))

        if not isinstance(self.name, Unset):
            files.append(("name", (None, str(self.name).encode(), "text/plain")))

        if not isinstance(self.text_column, Unset):
            files.append(
                ("text_column", (None, str(self.text_column).encode(), "text/plain"))
            )

        if not isinstance(self.keep_original, Unset):
            files.append(
                (
                    "keep_original",
                    (None, str(self.keep_original).encode(), "text/plain"),
                )
            )

        if not isinstance(self.domain, Unset):
            files.append(
                ("domain", (None, str(self.domain.value).encode(), "text/plain"))
            )

        for prop_name, prop in self.additional_properties.items():
            files.append((prop_name, (None, str(prop).encode(), "text/plain")))

        return files

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        file = File(payload=BytesIO(d.pop("file")))

        format_ = FormatEnum(d.pop("format"))

        name = d.pop("name", UNSET)

        text_column = d.pop("text_column", UNSET)

        keep_original = d.pop("keep_original", UNSET)

        _domain = d.pop("domain", UNSET)
        domain: DomainEnum | Unset
        if isinstance(_domain, Unset):
            domain = UNSET
        else:
            domain = DomainEnum(_domain)

        upload_create_request = cls(
            file=file,
            format_=format_,
            name=name,
            text_column=text_column,
            keep_original=keep_original,
            domain=domain,
        )

        upload_create_request.additional_properties = d
        return upload_create_request

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
