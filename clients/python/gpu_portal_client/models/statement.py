from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.statement_kind import StatementKind
    from ..models.statement_usage import StatementUsage
    from ..models.statement_volume import StatementVolume
    from ..models.statement_write_off import StatementWriteOff


T = TypeVar("T", bound="Statement")


@_attrs_define
class Statement:
    """
    Attributes:
        year (int):
        month (int):
        start (datetime.datetime):
        end (datetime.datetime):
        opening_micros (int):
        closing_micros (int):
        by_kind (list[StatementKind]):
        usage (list[StatementUsage]):
        usage_total_micros (int):
        usage_uncovered_micros (int): shortfall: usage the balance could not cover
        write_offs (list[StatementWriteOff]): minutes older than the metering lookback, not charged
        volumes (list[StatementVolume]): persistent volume storage, per started GB-hour
    """

    year: int
    month: int
    start: datetime.datetime
    end: datetime.datetime
    opening_micros: int
    closing_micros: int
    by_kind: list[StatementKind]
    usage: list[StatementUsage]
    usage_total_micros: int
    usage_uncovered_micros: int
    write_offs: list[StatementWriteOff]
    volumes: list[StatementVolume]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        year = self.year

        month = self.month

        start = self.start.isoformat()

        end = self.end.isoformat()

        opening_micros = self.opening_micros

        closing_micros = self.closing_micros

        by_kind = []
        for by_kind_item_data in self.by_kind:
            by_kind_item = by_kind_item_data.to_dict()
            by_kind.append(by_kind_item)

        usage = []
        for usage_item_data in self.usage:
            usage_item = usage_item_data.to_dict()
            usage.append(usage_item)

        usage_total_micros = self.usage_total_micros

        usage_uncovered_micros = self.usage_uncovered_micros

        write_offs = []
        for write_offs_item_data in self.write_offs:
            write_offs_item = write_offs_item_data.to_dict()
            write_offs.append(write_offs_item)

        volumes = []
        for volumes_item_data in self.volumes:
            volumes_item = volumes_item_data.to_dict()
            volumes.append(volumes_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "year": year,
                "month": month,
                "start": start,
                "end": end,
                "opening_micros": opening_micros,
                "closing_micros": closing_micros,
                "by_kind": by_kind,
                "usage": usage,
                "usage_total_micros": usage_total_micros,
                "usage_uncovered_micros": usage_uncovered_micros,
                "write_offs": write_offs,
                "volumes": volumes,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.statement_kind import StatementKind
        from ..models.statement_usage import StatementUsage
        from ..models.statement_volume import StatementVolume
        from ..models.statement_write_off import StatementWriteOff

        d = dict(src_dict)
        year = d.pop("year")

        month = d.pop("month")

        start = datetime.datetime.fromisoformat(d.pop("start"))

        end = datetime.datetime.fromisoformat(d.pop("end"))

        opening_micros = d.pop("opening_micros")

        closing_micros = d.pop("closing_micros")

        by_kind = []
        _by_kind = d.pop("by_kind")
        for by_kind_item_data in _by_kind:
            by_kind_item = StatementKind.from_dict(by_kind_item_data)

            by_kind.append(by_kind_item)

        usage = []
        _usage = d.pop("usage")
        for usage_item_data in _usage:
            usage_item = StatementUsage.from_dict(usage_item_data)

            usage.append(usage_item)

        usage_total_micros = d.pop("usage_total_micros")

        usage_uncovered_micros = d.pop("usage_uncovered_micros")

        write_offs = []
        _write_offs = d.pop("write_offs")
        for write_offs_item_data in _write_offs:
            write_offs_item = StatementWriteOff.from_dict(write_offs_item_data)

            write_offs.append(write_offs_item)

        volumes = []
        _volumes = d.pop("volumes")
        for volumes_item_data in _volumes:
            volumes_item = StatementVolume.from_dict(volumes_item_data)

            volumes.append(volumes_item)

        statement = cls(
            year=year,
            month=month,
            start=start,
            end=end,
            opening_micros=opening_micros,
            closing_micros=closing_micros,
            by_kind=by_kind,
            usage=usage,
            usage_total_micros=usage_total_micros,
            usage_uncovered_micros=usage_uncovered_micros,
            write_offs=write_offs,
            volumes=volumes,
        )

        statement.additional_properties = d
        return statement

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
