from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.call_status_enum import CallStatusEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Call")


@_attrs_define
class Call:
    """
    Attributes:
        id (int):
        app (str):
        cost (str):
        price_micros (int): held while reserved; what was charged once succeeded
        status (CallStatusEnum | Unset): * `reserved` - Reserved
            * `succeeded` - Succeeded
            * `failed` - Failed
        billed_tokens (int | None | Unset): completion tokens charged at the app's price per 1,000 tokens
        prompt_tokens (int | None | Unset): prompt tokens charged at the app's price per 1,000 prompt tokens
        latency_ms (int | None | Unset):
        error_code (str | Unset):
        created_at (datetime.datetime | Unset):
    """

    id: int
    app: str
    cost: str
    price_micros: int
    status: CallStatusEnum | Unset = UNSET
    billed_tokens: int | None | Unset = UNSET
    prompt_tokens: int | None | Unset = UNSET
    latency_ms: int | None | Unset = UNSET
    error_code: str | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        app = self.app

        cost = self.cost

        price_micros = self.price_micros

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        billed_tokens: int | None | Unset
        if isinstance(self.billed_tokens, Unset):
            billed_tokens = UNSET
        else:
            billed_tokens = self.billed_tokens

        prompt_tokens: int | None | Unset
        if isinstance(self.prompt_tokens, Unset):
            prompt_tokens = UNSET
        else:
            prompt_tokens = self.prompt_tokens

        latency_ms: int | None | Unset
        if isinstance(self.latency_ms, Unset):
            latency_ms = UNSET
        else:
            latency_ms = self.latency_ms

        error_code = self.error_code

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "app": app,
                "cost": cost,
                "price_micros": price_micros,
            }
        )
        if status is not UNSET:
            field_dict["status"] = status
        if billed_tokens is not UNSET:
            field_dict["billed_tokens"] = billed_tokens
        if prompt_tokens is not UNSET:
            field_dict["prompt_tokens"] = prompt_tokens
        if latency_ms is not UNSET:
            field_dict["latency_ms"] = latency_ms
        if error_code is not UNSET:
            field_dict["error_code"] = error_code
        if created_at is not UNSET:
            field_dict["created_at"] = created_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        app = d.pop("app")

        cost = d.pop("cost")

        price_micros = d.pop("price_micros")

        _status = d.pop("status", UNSET)
        status: CallStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = CallStatusEnum(_status)

        def _parse_billed_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        billed_tokens = _parse_billed_tokens(d.pop("billed_tokens", UNSET))

        def _parse_prompt_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        prompt_tokens = _parse_prompt_tokens(d.pop("prompt_tokens", UNSET))

        def _parse_latency_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        latency_ms = _parse_latency_ms(d.pop("latency_ms", UNSET))

        error_code = d.pop("error_code", UNSET)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

        call = cls(
            id=id,
            app=app,
            cost=cost,
            price_micros=price_micros,
            status=status,
            billed_tokens=billed_tokens,
            prompt_tokens=prompt_tokens,
            latency_ms=latency_ms,
            error_code=error_code,
            created_at=created_at,
        )

        call.additional_properties = d
        return call

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
