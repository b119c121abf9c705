from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.jupyter_access_state_enum import JupyterAccessStateEnum

T = TypeVar("T", bound="JupyterAccess")


@_attrs_define
class JupyterAccess:
    """Shape of the field, for the OpenAPI schema.

    Attributes:
        state (JupyterAccessStateEnum): * `unavailable` - unavailable
            * `starting` - starting
            * `ready` - ready
        url (None | str):
    """

    state: JupyterAccessStateEnum
    url: None | str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        state = self.state.value

        url: None | str
        url = self.url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "state": state,
                "url": url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        state = JupyterAccessStateEnum(d.pop("state"))

        def _parse_url(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        url = _parse_url(d.pop("url"))

        jupyter_access = cls(
            state=state,
            url=url,
        )

        jupyter_access.additional_properties = d
        return jupyter_access

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
