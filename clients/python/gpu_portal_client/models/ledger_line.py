from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="LedgerLine")


@_attrs_define
class LedgerLine:
    """
    Attributes:
        id (int):
        transaction_id (int):
        created_at (datetime.datetime):
        kind (str):
        account (str):
        amount (str):
        amount_micros (int):
        memo (str):
    """

    id: int
    transaction_id: int
    created_at: datetime.datetime
    kind: str
    account: str
    amount: str
    amount_micros: int
    memo: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        transaction_id = self.transaction_id

        created_at = self.created_at.isoformat()

        kind = self.kind

        account = self.account

        amount = self.amount

        amount_micros = self.amount_micros

        memo = self.memo

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "transaction_id": transaction_id,
                "created_at": created_at,
                "kind": kind,
                "account": account,
                "amount": amount,
                "amount_micros": amount_micros,
                "memo": memo,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        transaction_id = d.pop("transaction_id")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        kind = d.pop("kind")

        account = d.pop("account")

        amount = d.pop("amount")

        amount_micros = d.pop("amount_micros")

        memo = d.pop("memo")

        ledger_line = cls(
            id=id,
            transaction_id=transaction_id,
            created_at=created_at,
            kind=kind,
            account=account,
            amount=amount,
            amount_micros=amount_micros,
            memo=memo,
        )

        ledger_line.additional_properties = d
        return ledger_line

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
