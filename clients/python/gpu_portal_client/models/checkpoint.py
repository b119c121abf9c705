from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Checkpoint")


@_attrs_define
class Checkpoint:
    """
    Attributes:
        id (int):
        step (int):
        location (str):
        attempt (int):
        created_at (datetime.datetime | Unset):
        size_bytes (int | Unset):
        loss (float | None | Unset):
        complete (bool | Unset):
        rolled_back (bool | Unset):
        pinned (bool | Unset):
        deleted_at (datetime.datetime | None | Unset):
    """

    id: int
    step: int
    location: str
    attempt: int
    created_at: datetime.datetime | Unset = UNSET
    size_bytes: int | Unset = UNSET
    loss: float | None | Unset = UNSET
    complete: bool | Unset = UNSET
    rolled_back: bool | Unset = UNSET
    pinned: bool | Unset = UNSET
    deleted_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        step = self.step

        location = self.location

        attempt = self.attempt

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        size_bytes = self.size_bytes

        loss: float | None | Unset
        if isinstance(self.loss, Unset):
            loss = UNSET
        else:
            loss = self.loss

        complete = self.complete

        rolled_back = self.rolled_back

        pinned = self.pinned

        deleted_at: None | str | Unset
        if isinstance(self.deleted_at, Unset):
            deleted_at = UNSET
        elif isinstance(self.deleted_at, datetime.datetime):
            deleted_at = self.deleted_at.isoformat()
        else:
            deleted_at = self.deleted_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "step": step,
                "location": location,
                "attempt": attempt,
            }
        )
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if size_bytes is not UNSET:
            field_dict["size_bytes"] = size_bytes
        if loss is not UNSET:
            field_dict["loss"] = loss
        if complete is not UNSET:
            field_dict["complete"] = complete
        if rolled_back is not UNSET:
            field_dict["rolled_back"] = rolled_back
        if pinned is not UNSET:
            field_dict["pinned"] = pinned
        if deleted_at is not UNSET:
            field_dict["deleted_at"] = deleted_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        step = d.pop("step")

        location = d.pop("location")

        attempt = d.pop("attempt")

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        size_bytes = d.pop("size_bytes", UNSET)

        def _parse_loss(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        loss = _parse_loss(d.pop("loss", UNSET))

        complete = d.pop("complete", UNSET)

        rolled_back = d.pop("rolled_back", UNSET)

        pinned = d.pop("pinned", UNSET)

        def _parse_deleted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                deleted_at_type_0 = datetime.datetime.fromisoformat(data)

                return deleted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        deleted_at = _parse_deleted_at(d.pop("deleted_at", UNSET))

        checkpoint = cls(
            id=id,
            step=step,
            location=location,
            attempt=attempt,
            created_at=created_at,
            size_bytes=size_bytes,
            loss=loss,
            complete=complete,
            rolled_back=rolled_back,
            pinned=pinned,
            deleted_at=deleted_at,
        )

        checkpoint.additional_properties = d
        return checkpoint

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
