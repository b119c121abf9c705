from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.instance_kind_enum import InstanceKindEnum
from ..models.instance_status_enum import InstanceStatusEnum
from ..models.mode_enum import ModeEnum
from ..models.tier_enum import TierEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.jupyter_access import JupyterAccess
    from ..models.ssh_access import SshAccess


T = TypeVar("T", bound="Instance")


@_attrs_define
class Instance:
    """
    Attributes:
        id (int):
        name (str):
        gpu_type (str):
        gpu_count (int):
        image (str):
        job (int | None):
        jupyter (JupyterAccess): Shape of the field, for the OpenAPI schema.
        ssh (None | SshAccess):
        kind (InstanceKindEnum | Unset): * `training` - Training job
            * `interactive` - Interactive
        status (InstanceStatusEnum | Unset): * `pending` - Pending
            * `scheduling` - Scheduling
            * `provisioning` - Provisioning
            * `running` - Running
            * `stopping` - Stopping
            * `stopped` - Stopped
            * `failed` - Failed
            * `preempted` - Preempted
        status_reason (str | Unset):
        status_reason_code (str | Unset):
        status_reason_params (Any | Unset):
        queue_position (int | None | Unset):
        mode (ModeEnum | Unset): * `container` - Container
            * `bare_metal` - Bare metal
        command (Any | Unset):
        placement (Any | Unset):
        submitted_at (datetime.datetime | Unset):
        created_at (datetime.datetime | Unset):
        tier (TierEnum | Unset): * `on_demand` - On demand
            * `interruptible` - Interruptible
        idle_autostop_minutes (int | None | Unset):
        last_activity_at (datetime.datetime | None | Unset):
        idle_warned_at (datetime.datetime | None | Unset):
        autostopped_at (datetime.datetime | None | Unset):
    """

    id: int
    name: str
    gpu_type: str
    gpu_count: int
    image: str
    job: int | None
    jupyter: JupyterAccess
    ssh: None | SshAccess
    kind: InstanceKindEnum | Unset = UNSET
    status: InstanceStatusEnum | Unset = UNSET
    status_reason: str | Unset = UNSET
    status_reason_code: str | Unset = UNSET
    status_reason_params: Any | Unset = UNSET
    queue_position: int | None | Unset = UNSET
    mode: ModeEnum | Unset = UNSET
    command: Any | Unset = UNSET
    placement: Any | Unset = UNSET
    submitted_at: datetime.datetime | Unset = UNSET
    created_at: datetime.datetime | Unset = UNSET
    tier: TierEnum | Unset = UNSET
    idle_autostop_minutes: int | None | Unset = UNSET
    last_activity_at: datetime.datetime | None | Unset = UNSET
    idle_warned_at: datetime.datetime | None | Unset = UNSET
    autostopped_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.ssh_access import SshAccess

        id = self.id

        name = self.name

        gpu_type = self.gpu_type

        gpu_count = self.gpu_count

        image = self.image

        job: int | None
        job = self.job

        jupyter = self.jupyter.to_dict()

        ssh: dict[str, Any] | None
        if isinstance(self.ssh, SshAccess):
            ssh = self.ssh.to_dict()
        else:
            ssh = self.ssh

        kind: str | Unset = UNSET
        if not isinstance(self.kind, Unset):
            kind = self.kind.value

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        status_reason = self.status_reason

        status_reason_code = self.status_reason_code

        status_reason_params = self.status_reason_params

        queue_position: int | None | Unset
        if isinstance(self.queue_position, Unset):
            queue_position = UNSET
        else:
            queue_position = self.queue_position

        mode: str | Unset = UNSET
        if not isinstance(self.mode, Unset):
            mode = self.mode.value

        command = self.command

        placement = self.placement

        submitted_at: str | Unset = UNSET
        if not isinstance(self.submitted_at, Unset):
            submitted_at = self.submitted_at.isoformat()

        created_at: str | Unset = UNSET
        if not isinstance(self.created_at, Unset):
            created_at = self.created_at.isoformat()

        tier: str | Unset = UNSET
        if not isinstance(self.tier, Unset):
            tier = self.tier.value

        idle_autostop_minutes: int | None | Unset
        if isinstance(self.idle_autostop_minutes, Unset):
            idle_autostop_minutes = UNSET
        else:
            idle_autostop_minutes = self.idle_autostop_minutes

        last_activity_at: None | str | Unset
        if isinstance(self.last_activity_at, Unset):
            last_activity_at = UNSET
        elif isinstance(self.last_activity_at, datetime.datetime):
            last_activity_at = self.last_activity_at.isoformat()
        else:
            last_activity_at = self.last_activity_at

        idle_warned_at: None | str | Unset
        if isinstance(self.idle_warned_at, Unset):
            idle_warned_at = UNSET
        elif isinstance(self.idle_warned_at, datetime.datetime):
            idle_warned_at = self.idle_warned_at.isoformat()
        else:
            idle_warned_at = self.idle_warned_at

        autostopped_at: None | str | Unset
        if isinstance(self.autostopped_at, Unset):
            autostopped_at = UNSET
        elif isinstance(self.autostopped_at, datetime.datetime):
            autostopped_at = self.autostopped_at.isoformat()
        else:
            autostopped_at = self.autostopped_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "gpu_type": gpu_type,
                "gpu_count": gpu_count,
                "image": image,
                "job": job,
                "jupyter": jupyter,
                "ssh": ssh,
            }
        )
        if kind is not UNSET:
            field_dict["kind"] = kind
        if status is not UNSET:
            field_dict["status"] = status
        if status_reason is not UNSET:
            field_dict["status_reason"] = status_reason
        if status_reason_code is not UNSET:
            field_dict["status_reason_code"] = status_reason_code
        if status_reason_params is not UNSET:
            field_dict["status_reason_params"] = status_reason_params
        if queue_position is not UNSET:
            field_dict["queue_position"] = queue_position
        if mode is not UNSET:
            field_dict["mode"] = mode
        if command is not UNSET:
            field_dict["command"] = command
        if placement is not UNSET:
            field_dict["placement"] = placement
        if submitted_at is not UNSET:
            field_dict["submitted_at"] = submitted_at
        if created_at is not UNSET:
            field_dict["created_at"] = created_at
        if tier is not UNSET:
            field_dict["tier"] = tier
        if idle_autostop_minutes is not UNSET:
            field_dict["idle_autostop_minutes"] = idle_autostop_minutes
        if last_activity_at is not UNSET:
            field_dict["last_activity_at"] = last_activity_at
        if idle_warned_at is not UNSET:
            field_dict["idle_warned_at"] = idle_warned_at
        if autostopped_at is not UNSET:
            field_dict["autostopped_at"] = autostopped_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.jupyter_access import JupyterAccess
        from ..models.ssh_access import SshAccess

        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        gpu_type = d.pop("gpu_type")

        gpu_count = d.pop("gpu_count")

        image = d.pop("image")

        def _parse_job(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        job = _parse_job(d.pop("job"))

        jupyter = JupyterAccess.from_dict(d.pop("jupyter"))

        def _parse_ssh(data: object) -> None | SshAccess:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                ssh_type_1 = SshAccess.from_dict(data)

                return ssh_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | SshAccess, data)

        ssh = _parse_ssh(d.pop("ssh"))

        _kind = d.pop("kind", UNSET)
        kind: InstanceKindEnum | Unset
        if isinstance(_kind, Unset):
            kind = UNSET
        else:
            kind = InstanceKindEnum(_kind)

        _status = d.pop("status", UNSET)
        status: InstanceStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = InstanceStatusEnum(_status)

        status_reason = d.pop("status_reason", UNSET)

        status_reason_code = d.pop("status_reason_code", UNSET)

        status_reason_params = d.pop("status_reason_params", UNSET)

        def _parse_queue_position(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        queue_position = _parse_queue_position(d.pop("queue_position", UNSET))

        _mode = d.pop("mode", UNSET)
        mode: ModeEnum | Unset
        if isinstance(_mode, Unset):
            mode = UNSET
        else:
            mode = ModeEnum(_mode)

        command = d.pop("command", UNSET)

        placement = d.pop("placement", UNSET)

        _submitted_at = d.pop("submitted_at", UNSET)
        submitted_at: datetime.datetime | Unset
        if isinstance(_submitted_at, Unset):
            submitted_at = UNSET
        else:
            submitted_at = datetime.datetime.fromisoformat(_submitted_at)

        _created_at = d.pop("created_at", UNSET)
        created_at: datetime.datetime | Unset
        if isinstance(_created_at, Unset):
            created_at = UNSET
        else:
            created_at = datetime.datetime.fromisoformat(_created_at)

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

        def _parse_last_activity_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                last_activity_at_type_0 = datetime.datetime.fromisoformat(data)

                return last_activity_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        last_activity_at = _parse_last_activity_at(d.pop("last_activity_at", UNSET))

        def _parse_idle_warned_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                idle_warned_at_type_0 = datetime.datetime.fromisoformat(data)

                return idle_warned_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        idle_warned_at = _parse_idle_warned_at(d.pop("idle_warned_at", UNSET))

        def _parse_autostopped_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                autostopped_at_type_0 = datetime.datetime.fromisoformat(data)

                return autostopped_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        autostopped_at = _parse_autostopped_at(d.pop("autostopped_at", UNSET))

        instance = cls(
            id=id,
            name=name,
            gpu_type=gpu_type,
            gpu_count=gpu_count,
            image=image,
            job=job,
            jupyter=jupyter,
            ssh=ssh,
            kind=kind,
            status=status,
            status_reason=status_reason,
            status_reason_code=status_reason_code,
            status_reason_params=status_reason_params,
            queue_position=queue_position,
            mode=mode,
            command=command,
            placement=placement,
            submitted_at=submitted_at,
            created_at=created_at,
            tier=tier,
            idle_autostop_minutes=idle_autostop_minutes,
            last_activity_at=last_activity_at,
            idle_warned_at=idle_warned_at,
            autostopped_at=autostopped_at,
        )

        instance.additional_properties = d
        return instance

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
