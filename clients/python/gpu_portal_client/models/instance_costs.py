from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.tier_enum import TierEnum

T = TypeVar("T", bound="InstanceCosts")


@_attrs_define
class InstanceCosts:
    """Output of ``GET /instances/{id}/costs``: the tier, its preemptions and what they cost (nothing lost
    when every resume started at the checkpoint: ``steps_rerun`` = ``minutes_rerun`` = 0), the metered
    minutes and charges against the on-demand price (micro-CNY), and idle autostop's minutes saved.

        Attributes:
            tier (TierEnum): * `on_demand` - On demand
                * `interruptible` - Interruptible
            preemptions (int):
            steps_rerun (int):
            minutes_rerun (int):
            minutes_billed (int):
            charged_micros (int):
            on_demand_micros (int):
            saved_micros (int):
            autostop_at (datetime.datetime | None):
            idle_minutes_saved (int):
    """

    tier: TierEnum
    preemptions: int
    steps_rerun: int
    minutes_rerun: int
    minutes_billed: int
    charged_micros: int
    on_demand_micros: int
    saved_micros: int
    autostop_at: datetime.datetime | None
    idle_minutes_saved: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tier = self.tier.value

        preemptions = self.preemptions

        steps_rerun = self.steps_rerun

        minutes_rerun = self.minutes_rerun

        minutes_billed = self.minutes_billed

        charged_micros = self.charged_micros

        on_demand_micros = self.on_demand_micros

        saved_micros = self.saved_micros

        autostop_at: None | str
        if isinstance(self.autostop_at, datetime.datetime):
            autostop_at = self.autostop_at.isoformat()
        else:
            autostop_at = self.autostop_at

        idle_minutes_saved = self.idle_minutes_saved

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "tier": tier,
                "preemptions": preemptions,
                "steps_rerun": steps_rerun,
                "minutes_rerun": minutes_rerun,
                "minutes_billed": minutes_billed,
                "charged_micros": charged_micros,
                "on_demand_micros": on_demand_micros,
                "saved_micros": saved_micros,
                "autostop_at": autostop_at,
                "idle_minutes_saved": idle_minutes_saved,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        tier = TierEnum(d.pop("tier"))

        preemptions = d.pop("preemptions")

        steps_rerun = d.pop("steps_rerun")

        minutes_rerun = d.pop("minutes_rerun")

        minutes_billed = d.pop("minutes_billed")

        charged_micros = d.pop("charged_micros")

        on_demand_micros = d.pop("on_demand_micros")

        saved_micros = d.pop("saved_micros")

        def _parse_autostop_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                autostop_at_type_0 = datetime.datetime.fromisoformat(data)

                return autostop_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        autostop_at = _parse_autostop_at(d.pop("autostop_at"))

        idle_minutes_saved = d.pop("idle_minutes_saved")

        instance_costs = cls(
            tier=tier,
            preemptions=preemptions,
            steps_rerun=steps_rerun,
            minutes_rerun=minutes_rerun,
            minutes_billed=minutes_billed,
            charged_micros=charged_micros,
            on_demand_micros=on_demand_micros,
            saved_micros=saved_micros,
            autostop_at=autostop_at,
            idle_minutes_saved=idle_minutes_saved,
        )

        instance_costs.additional_properties = d
        return instance_costs

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
