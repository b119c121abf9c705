from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.app_visibility_enum import AppVisibilityEnum
from ..models.category_enum import CategoryEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="PublishRequest")


@_attrs_define
class PublishRequest:
    """
    Attributes:
        job_id (int):
        checkpoint_id (int):
        app (str | Unset): add a version to this app of yours instead of creating one
        name (str | Unset):  Default: ''.
        category (CategoryEnum | Unset): * `legal` - Legal
            * `finance` - Finance
            * `medical` - Medical
            * `general` - General Default: CategoryEnum.GENERAL.
        description (str | Unset):  Default: ''.
        price_per_call (str | Unset):  Default: '0.000000'.
        price_per_1k_tokens (str | Unset): CNY per 1,000 generated tokens, on top of the price per call Default:
            '0.000000'.
        price_per_1k_prompt_tokens (str | Unset): CNY per 1,000 prompt tokens of the OpenAI-compatible API, on top of
            the price per call Default: '0.000000'.
        visibility (AppVisibilityEnum | Unset): * `private` - Private to the organization
            * `public` - Public in the marketplace Default: AppVisibilityEnum.PRIVATE.
    """

    job_id: int
    checkpoint_id: int
    app: str | Unset = UNSET
    name: str | Unset = ""
    category: CategoryEnum | Unset = CategoryEnum.GENERAL
    description: str | Unset = ""
    price_per_call: str | Unset = "0.000000"
    price_per_1k_tokens: str | Unset = "0.000000"
    price_per_1k_prompt_tokens: str | Unset = "0.000000"
    visibility: AppVisibilityEnum | Unset = AppVisibilityEnum.PRIVATE
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        job_id = self.job_id

        checkpoint_id = self.checkpoint_id

        app = self.app

        name = self.name

        category: str | Unset = UNSET
        if not isinstance(self.category, Unset):
            category = self.category.value

        description = self.description

        price_per_call = self.price_per_call

        price_per_1k_tokens = self.price_per_1k_tokens

        price_per_1k_prompt_tokens = self.price_per_1k_prompt_tokens

        visibility: str | Unset = UNSET
        if not isinstance(self.visibility, Unset):
            visibility = self.visibility.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "job_id": job_id,
                "checkpoint_id": checkpoint_id,
            }
        )
        if app is not UNSET:
            field_dict["app"] = app
        if name is not UNSET:
            field_dict["name"] = name
        if category is not UNSET:
            field_dict["category"] = category
        if description is not UNSET:
            field_dict["description"] = description
        if price_per_call is not UNSET:
            field_dict["price_per_call"] = price_per_call
        if price_per_1k_tokens is not UNSET:
            field_dict["price_per_1k_tokens"] = price_per_1k_tokens
        if price_per_1k_prompt_tokens is not UNSET:
            field_dict["price_per_1k_prompt_tokens"] = price_per_1k_prompt_tokens
        if visibility is not UNSET:
            field_dict["visibility"] = visibility

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        job_id = d.pop("job_id")

        checkpoint_id = d.pop("checkpoint_id")

        app = d.pop("app", UNSET)

        name = d.pop("name", UNSET)

        _category = d.pop("category", UNSET)
        category: CategoryEnum | Unset
        if isinstance(_category, Unset):
            category = UNSET
        else:
            category = CategoryEnum(_category)

        description = d.pop("description", UNSET)

        price_per_call = d.pop("price_per_call", UNSET)

        price_per_1k_tokens = d.pop("price_per_1k_tokens", UNSET)

        price_per_1k_prompt_tokens = d.pop("price_per_1k_prompt_tokens", UNSET)

        _visibility = d.pop("visibility", UNSET)
        visibility: AppVisibilityEnum | Unset
        if isinstance(_visibility, Unset):
            visibility = UNSET
        else:
            visibility = AppVisibilityEnum(_visibility)

        publish_request = cls(
            job_id=job_id,
            checkpoint_id=checkpoint_id,
            app=app,
            name=name,
            category=category,
            description=description,
            price_per_call=price_per_call,
            price_per_1k_tokens=price_per_1k_tokens,
            price_per_1k_prompt_tokens=price_per_1k_prompt_tokens,
            visibility=visibility,
        )

        publish_request.additional_properties = d
        return publish_request

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
