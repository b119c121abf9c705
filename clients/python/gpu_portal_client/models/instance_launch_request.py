from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.mode_enum import ModeEnum
from ..models.tier_enum import TierEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="InstanceLaunchRequest")


@_attrs_define
class InstanceLaunchRequest:
    """Input of ``POST /instances``: an interactive instance (JupyterLab, SSH) running ``command`` if given.

    Attributes:
        gpu_type (str):
        gpu_count (int): GPUs
        name (str | Unset):  Default: ''.
        mode (ModeEnum | Unset): * `container` - Container
            * `bare_metal` - Bare metal Default: ModeEnum.CONTAINER.
        image (str | Unset):  Default: ''.
        command (list[str] | Unset): argv run in the image; omitted or []: none, JupyterLab and SSH keep the instance
            running until it is stopped or idle autostop stops it
        volumes (list[str] | Unset): names of your organization's volumes to attach read-write (one active instance per
            volume)
        tier (TierEnum | Unset): * `on_demand` - On demand
            * `interruptible` - Interruptible Default: TierEnum.ON_DEMAND.
        idle_autostop_minutes (int | None | Unset): stop after this many idle minutes (0 = off; omitted = the
            organization's default)
    """

    gpu_type: str
    gpu_count: int
    name: str | Unset = ""
    mode: ModeEnum | Unset = ModeEnum.CONTAINER
    image: str | Unset = ""
    command: list[str] | Unset = UNSET
    volumes: list[str] | Unset = UNSET
    tier: TierEnum | Unset = TierEnum.ON_DEMAND
    idle_autostop_minutes: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        gpu_type = self.gpu_type

        gpu_count = self.gpu_count

        name = self.name

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        image = self.image

        command: list[str] | Unset = UNSET
        if not isinstance(self.command, Unset):
            command = self.command

        volumes: list[str] | Unset = UNSET
        if not isinstance(self.volumes, Unset):
            volumes = self.volumes

        tier: str | Unset = UNSET
        if not isinstance(self.tier, Unset):
            tier = self.tier.value

        idle_autostop_minutes: int | None | Unset
        if isinstance(self.idle_autostop_minutes, Unset):
            idle_autostop_minutes = UNSET
        else:
            idle_autostop_minutes = self.idle_autostop_minutes

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "gpu_type": gpu_type,
                "gpu_count": gpu_count,
            }
        )
        if name is not UNSET:
            field_dict["name"] = name
        if mode is not UNSET:
            field_dict["mode"] = mode
        if image is not UNSET:
            field_dict["image"] = image
        if command is not UNSET:
            field_dict["command"] = command
        if volumes is not UNSET:
            field_dict["volumes"] = volumes
        if tier is not UNSET:
            field_dict["tier"] = tier
        if idle_autostop_minutes is not UNSET:
            field_dict["idle_autostop_minutes"] = idle_autostop_minutes

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        gpu_type = d.pop("gpu_type")

        gpu_count = d.pop("gpu_count")

        name = d.pop("name", UNSET)

        _mode = d.pop("mode", UNSET)
        mode: ModeEnum | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = ModeEnum(_mode)

        image = d.pop("image", UNSET)

        command = cast(list[str], d.pop("command", UNSET))

        volumes = cast(list[str], d.pop("volumes", UNSET))

        _tier = d.pop("tier", UNSET)
        tier: TierEnum | Unset
        if isinstance(_tier, Unset):
            tier = UNSET
        else:
            tier = TierEnum(_tier)

        def _parse_idle_autostop_minutes(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        idle_autostop_minutes = _parse_idle_autostop_minutes(
            d.pop("idle_autostop_minutes", UNSET)
        )

        instance_launch_request = cls(
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            name=name,
            mode=mode,
            image=image,
            command=command,
            volumes=volumes,
            tier=tier,
            idle_autostop_minutes=idle_autostop_minutes,
        )

        instance_launch_request.additional_properties = d
        return instance_launch_request

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
