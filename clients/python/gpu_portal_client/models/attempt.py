from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.attempt_state_enum import AttemptStateEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="Attempt")


@_attrs_define
class Attempt:
    """
    Attributes:
        number (int):
        gpu_count (int): GPUs this attempt ran on (an elastic resume may use fewer)
        state (AttemptStateEnum | Unset): * `pending` - Pending
            * `running` - Running
            * `succeeded` - Succeeded
            * `failed` - Failed
            * `preempted` - Preempted
            * `stopped` - Stopped
            * `unknown` - Unknown
        exit_code (int | None | Unset):
        message (str | Unset):
        message_code (str | Unset):
        message_params (Any | Unset):
        resume_from_step (int | Unset):
        started_step (int | None | Unset):
        placement (Any | Unset):
        submitted_at (datetime.datetime | None | Unset):
        first_step_at (datetime.datetime | None | Unset):
        ended_at (datetime.datetime | None | Unset):
    """

    number: int
    gpu_count: int
    state: AttemptStateEnum | Unset = UNSET
    exit_code: int | None | Unset = UNSET
    message: str | Unset = UNSET
    message_code: str | Unset = UNSET
    message_params: Any | Unset = UNSET
    resume_from_step: int | Unset = UNSET
    started_step: int | None | Unset = UNSET
    placement: Any | Unset = UNSET
    submitted_at: datetime.datetime | None | Unset = UNSET
    first_step_at: datetime.datetime | None | Unset = UNSET
    ended_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        number = self.number

        gpu_count = self.gpu_count

        state: str | Unset = UNSET
        if not isinstance(self.state, Unset):
            state = self.state.value

        exit_code: int | None | Unset
        if isinstance(self.exit_code, Unset):
            exit_code = UNSET
        else:
            exit_code = self.exit_code

        message = self.message

        message_code = self.message_code

        message_params = self.message_params

        resume_from_step = self.resume_from_step

        started_step: int | None | Unset
        if isinstance(self.started_step, Unset):
            started_step = UNSET
        else:
            started_step = self.started_step

        placement = self.placement

        submitted_at: None | str | Unset
        if isinstance(self.submitted_at, Unset):
            submitted_at = UNSET
        elif isinstance(self.submitted_at, datetime.datetime):
            submitted_at = self.submitted_at.isoformat()
        else:
            submitted_at = self.submitted_at

        first_step_at: None | str | Unset
        if isinstance(self.first_step_at, Unset):
            first_step_at = UNSET
        elif isinstance(self.first_step_at, datetime.datetime):
            first_step_at = self.first_step_at.isoformat()
        else:
            first_step_at = self.first_step_at

        ended_at: None | str | Unset
        if isinstance(self.ended_at, Unset):
            ended_at = UNSET
        elif isinstance(self.ended_at, datetime.datetime):
            ended_at = self.ended_at.isoformat()
        else:
            ended_at = self.ended_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "number": number,
                "gpu_count": gpu_count,
            }
        )
        if state is not UNSET:
            field_dict["state"] = state
        if exit_code is not UNSET:
            field_dict["exit_code"] = exit_code
        if message is not UNSET:
            field_dict["message"] = message
        if message_code is not UNSET:
            field_dict["message_code"] = message_code
        if message_params is not UNSET:
            field_dict["message_params"] = message_params
        if resume_from_step is not UNSET:
            field_dict["resume_from_step"] = resume_from_step
        if started_step is not UNSET:
            field_dict["started_step"] = started_step
        if placement is not UNSET:
            field_dict["placement"] = placement
        if submitted_at is not UNSET:
            field_dict["submitted_at"] = submitted_at
        if first_step_at is not UNSET:
            field_dict["first_step_at"] = first_step_at
        if ended_at is not UNSET:
            field_dict["ended_at"] = ended_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        number = d.pop("number")

        gpu_count = d.pop("gpu_count")

        _state = d.pop("state", UNSET)
        state: AttemptStateEnum | Unset
        if isinstance(_state, Unset):
            state = UNSET
        else:
            state = AttemptStateEnum(_state)

        def _parse_exit_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        exit_code = _parse_exit_code(d.pop("exit_code", UNSET))

        message = d.pop("message", UNSET)

        message_code = d.pop("message_code", UNSET)

        message_params = d.pop("message_params", UNSET)

        resume_from_step = d.pop("resume_from_step", UNSET)

        def _parse_started_step(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        started_step = _parse_started_step(d.pop("started_step", UNSET))

        placement = d.pop("placement", UNSET)

        def _parse_submitted_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                submitted_at_type_0 = datetime.datetime.fromisoformat(data)

                return submitted_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        submitted_at = _parse_submitted_at(d.pop("submitted_at", UNSET))

        def _parse_first_step_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                first_step_at_type_0 = datetime.datetime.fromisoformat(data)

                return first_step_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        first_step_at = _parse_first_step_at(d.pop("first_step_at", UNSET))

        def _parse_ended_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                ended_at_type_0 = datetime.datetime.fromisoformat(data)

                return ended_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        ended_at = _parse_ended_at(d.pop("ended_at", UNSET))

        attempt = cls(
            number=number,
            gpu_count=gpu_count,
            state=state,
            exit_code=exit_code,
            message=message,
            message_code=message_code,
            message_params=message_params,
            resume_from_step=resume_from_step,
            started_step=started_step,
            placement=placement,
            submitted_at=submitted_at,
            first_step_at=first_step_at,
            ended_at=ended_at,
        )

        attempt.additional_properties = d
        return attempt

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
