from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.webhook_delivery_status_enum import WebhookDeliveryStatusEnum
from ..models.webhook_event_type_enum import WebhookEventTypeEnum
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.webhook_attempt import WebhookAttempt


T = TypeVar("T", bound="WebhookDelivery")


@_attrs_define
class WebhookDelivery:
    """
    Attributes:
        id (int):
        event_id (str): evt_…, the Webhook-Id header
        event_type (WebhookEventTypeEnum): * `instance.state_changed` - Instance state changed
            * `job.checkpoint_committed` - Job checkpoint committed
            * `job.finished` - Job finished
            * `job.failed` - Job failed
            * `job.preempted` - Job preempted
            * `job.resumed` - Job resumed
            * `wallet.balance_low` - Balance low
            * `wallet.top_up_credited` - Top-up credited
            * `app_call.failed` - App call failed
        event_created_at (datetime.datetime):
        data (Any):
        endpoint (int):
        retry_until (datetime.datetime):
        attempts (list[WebhookAttempt]):
        status (WebhookDeliveryStatusEnum | Unset): * `pending` - Pending
            * `succeeded` - Succeeded
            * `failed` - Failed
        attempt_count (int | Unset):
        next_attempt_at (datetime.datetime | None | Unset):
        last_status_code (int | None | Unset):
        last_error (str | Unset):
        delivered_at (datetime.datetime | None | Unset):
    """

    id: int
    event_id: str
    event_type: WebhookEventTypeEnum
    event_created_at: datetime.datetime
    data: Any
    endpoint: int
    retry_until: datetime.datetime
    attempts: list[WebhookAttempt]
    status: WebhookDeliveryStatusEnum | Unset = UNSET
    attempt_count: int | Unset = UNSET
    next_attempt_at: datetime.datetime | None | Unset = UNSET
    last_status_code: int | None | Unset = UNSET
    last_error: str | Unset = UNSET
    delivered_at: datetime.datetime | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        event_id = self.event_id

        event_type = self.event_type.value

        event_created_at = self.event_created_at.isoformat()

        data = self.data

        endpoint = self.endpoint

        retry_until = self.retry_until.isoformat()

        attempts = []
        for attempts_item_data in self.attempts:
            attempts_item = attempts_item_data.to_dict()
            attempts.append(attempts_item)

        status: str | Unset = UNSET
        if not isinstance(self.status, Unset):
            status = self.status.value

        attempt_count = self.attempt_count

        next_attempt_at: None | str | Unset
        if isinstance(self.next_attempt_at, Unset):
            next_attempt_at = UNSET
        elif isinstance(self.next_attempt_at, datetime.datetime):
            next_attempt_at = self.next_attempt_at.isoformat()
        else:
            next_attempt_at = self.next_attempt_at

        last_status_code: int | None | Unset
        if isinstance(self.last_status_code, Unset):
            last_status_code = UNSET
        else:
            last_status_code = self.last_status_code

        last_error = self.last_error

        delivered_at: None | str | Unset
        if isinstance(self.delivered_at, Unset):
            delivered_at = UNSET
        elif isinstance(self.delivered_at, datetime.datetime):
            delivered_at = self.delivered_at.isoformat()
        else:
            delivered_at = self.delivered_at

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "event_id": event_id,
                "event_type": event_type,
                "event_created_at": event_created_at,
                "data": data,
                "endpoint": endpoint,
                "retry_until": retry_until,
                "attempts": attempts,
            }
        )
        if status is not UNSET:
            field_dict["status"] = status
        if attempt_count is not UNSET:
            field_dict["attempt_count"] = attempt_count
        if next_attempt_at is not UNSET:
            field_dict["next_attempt_at"] = next_attempt_at
        if last_status_code is not UNSET:
            field_dict["last_status_code"] = last_status_code
        if last_error is not UNSET:
            field_dict["last_error"] = last_error
        if delivered_at is not UNSET:
            field_dict["delivered_at"] = delivered_at

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.webhook_attempt import WebhookAttempt

        d = dict(src_dict)
        id = d.pop("id")

        event_id = d.pop("event_id")

        event_type = WebhookEventTypeEnum(d.pop("event_type"))

        event_created_at = datetime.datetime.fromisoformat(d.pop("event_created_at"))

        data = d.pop("data")

        endpoint = d.pop("endpoint")

        retry_until = datetime.datetime.fromisoformat(d.pop("retry_until"))

        attempts = []
        _attempts = d.pop("attempts")
        for attempts_item_data in _attempts:
            attempts_item = WebhookAttempt.from_dict(attempts_item_data)

            attempts.append(attempts_item)

        _status = d.pop("status", UNSET)
        status: WebhookDeliveryStatusEnum | Unset
        if isinstance(_status, Unset):
            status = UNSET
        else:
            status = WebhookDeliveryStatusEnum(_status)

        attempt_count = d.pop("attempt_count", UNSET)

        def _parse_next_attempt_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                next_attempt_at_type_0 = datetime.datetime.fromisoformat(data)

                return next_attempt_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        next_attempt_at = _parse_next_attempt_at(d.pop("next_attempt_at", UNSET))

        def _parse_last_status_code(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        last_status_code = _parse_last_status_code(d.pop("last_status_code", UNSET))

        last_error = d.pop("last_error", UNSET)

        def _parse_delivered_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                delivered_at_type_0 = datetime.datetime.fromisoformat(data)

                return delivered_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        delivered_at = _parse_delivered_at(d.pop("delivered_at", UNSET))

        webhook_delivery = cls(
            id=id,
            event_id=event_id,
            event_type=event_type,
            event_created_at=event_created_at,
            data=data,
            endpoint=endpoint,
            retry_until=retry_until,
            attempts=attempts,
            status=status,
            attempt_count=attempt_count,
            next_attempt_at=next_attempt_at,
            last_status_code=last_status_code,
            last_error=last_error,
            delivered_at=delivered_at,
        )

        webhook_delivery.additional_properties = d
        return webhook_delivery

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
