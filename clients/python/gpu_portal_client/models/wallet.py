from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.grant import Grant


T = TypeVar("T", bound="Wallet")


@_attrs_define
class Wallet:
    """Amounts are decimal strings in CNY with 6 places (exact micro-CNY); ``*_micros`` as integers.

    Attributes:
        organization (str):
        currency (str):
        balance (str):
        trial_balance (str):
        paid_balance (str):
        balance_micros (int):
        trial_expires_at (datetime.datetime | None):
        grants (list[Grant]):
    """

    organization: str
    currency: str
    balance: str
    trial_balance: str
    paid_balance: str
    balance_micros: int
    trial_expires_at: datetime.datetime | None
    grants: list[Grant]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        organization = self.organization

        currency = self.currency

        balance = self.balance

        trial_balance = self.trial_balance

        paid_balance = self.paid_balance

        balance_micros = self.balance_micros

        trial_expires_at: None | str
        if isinstance(self.trial_expires_at, datetime.datetime):
            trial_expires_at = self.trial_expires_at.isoformat()
        else:
            trial_expires_at = self.trial_expires_at

        grants = []
        for grants_item_data in self.grants:
            grants_item = grants_item_data.to_dict()
            grants.append(grants_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "organization": organization,
                "currency": currency,
                "balance": balance,
                "trial_balance": trial_balance,
                "paid_balance": paid_balance,
                "balance_micros": balance_micros,
                "trial_expires_at": trial_expires_at,
                "grants": grants,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.grant import Grant

        d = dict(src_dict)
        organization = d.pop("organization")

        currency = d.pop("currency")

        balance = d.pop("balance")

        trial_balance = d.pop("trial_balance")

        paid_balance = d.pop("paid_balance")

        balance_micros = d.pop("balance_micros")

        def _parse_trial_expires_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                trial_expires_at_type_0 = datetime.datetime.fromisoformat(data)

                return trial_expires_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        trial_expires_at = _parse_trial_expires_at(d.pop("trial_expires_at"))

        grants = []
        _grants = d.pop("grants")
        for grants_item_data in _grants:
            grants_item = Grant.from_dict(grants_item_data)

            grants.append(grants_item)

        wallet = cls(
            organization=organization,
            currency=currency,
            balance=balance,
            trial_balance=trial_balance,
            paid_balance=paid_balance,
            balance_micros=balance_micros,
            trial_expires_at=trial_expires_at,
            grants=grants,
        )

        wallet.additional_properties = d
        return wallet

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
