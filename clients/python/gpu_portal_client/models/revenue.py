from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Revenue")


@_attrs_define
class Revenue:
    """
    Attributes:
        app (str):
        calls (int):
        gross_micros (int):
        revenue_micros (int):
    """

    app: str
    calls: int
    gross_micros: int
    revenue_micros: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        calls = self.calls

        gross_micros = self.gross_micros

        revenue_micros = self.revenue_micros

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "calls": calls,
                "gross_micros": gross_micros,
                "revenue_micros": revenue_micros,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        app = d.pop("app")

        calls = d.pop("calls")

        gross_micros = d.pop("gross_micros")

        revenue_micros = d.pop("revenue_micros")

        revenue = cls(
            app=app,
            calls=calls,
            gross_micros=gross_micros,
            revenue_micros=revenue_micros,
        )

        revenue.additional_properties = d
        return revenue

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
