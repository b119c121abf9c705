from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.source_enum import SourceEnum

T = TypeVar("T", bound="JobLog")


@_attrs_define
class JobLog:
    """Answer of ``GET /jobs/{id}/logs``: one node rank's log lines with their offsets (0-based line numbers in
    that attempt's rank log). Follow a log by passing ``cursor`` back as ``after`` (with ``attempt``), never by
    comparing lines.

        Attributes:
            job (int):
            attempt (int | None): attempt number; null before any submit
            next_attempt (int | None): the job's next submitted attempt after this one; null while this is the newest
            rank (int):
            ranks (int): node ranks of this attempt
            source (SourceEnum): * `live` - live
                * `archive` - archive
                * `none` - none
            lines (list[str]):
            first (int): offset of lines[0]
            cursor (int): offset after the last line returned: pass it as `after`
            dropped (int | None): lines between `after` and `first` the portal no longer has; null: an unknown number (the
                cluster rotated the log or restarted its container)
            more (bool): more lines after `cursor` are already there: ask again at once
    """

    job: int
    attempt: int | None
    next_attempt: int | None
    rank: int
    ranks: int
    source: SourceEnum
    lines: list[str]
    first: int
    cursor: int
    dropped: int | None
    more: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job = self.job

        attempt: int | None
        attempt = self.attempt

        next_attempt: int | None
        next_attempt = self.next_attempt

        rank = self.rank

        ranks = self.ranks

        source = self.source.value

        lines = self.lines

        first = self.first

        cursor = self.cursor

        dropped: int | None
        dropped = self.dropped

        more = self.more

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job": job,
                "attempt": attempt,
                "next_attempt": next_attempt,
                "rank": rank,
                "ranks": ranks,
                "source": source,
                "lines": lines,
                "first": first,
                "cursor": cursor,
                "dropped": dropped,
                "more": more,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job = d.pop("job")

        def _parse_attempt(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        attempt = _parse_attempt(d.pop("attempt"))

        def _parse_next_attempt(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        next_attempt = _parse_next_attempt(d.pop("next_attempt"))

        rank = d.pop("rank")

        ranks = d.pop("ranks")

        source = SourceEnum(d.pop("source"))

        lines = cast(list[str], d.pop("lines"))

        first = d.pop("first")

        cursor = d.pop("cursor")

        def _parse_dropped(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        dropped = _parse_dropped(d.pop("dropped"))

        more = d.pop("more")

        job_log = cls(
            job=job,
            attempt=attempt,
            next_attempt=next_attempt,
            rank=rank,
            ranks=ranks,
            source=source,
            lines=lines,
            first=first,
            cursor=cursor,
            dropped=dropped,
            more=more,
        )

        job_log.additional_properties = d
        return job_log

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
