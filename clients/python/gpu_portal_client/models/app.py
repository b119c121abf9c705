from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.app_state_enum import AppStateEnum
from ..models.app_visibility_enum import AppVisibilityEnum
from ..models.category_enum import CategoryEnum
from ..types import UNSET, Unset

T = TypeVar("T", bound="App")


@_attrs_define
class App:
    """
    Attributes:
        slug (str):
        name (str):
        category (CategoryEnum): * `legal` - Legal
            * `finance` - Finance
            * `medical` - Medical
            * `general` - General
        publisher (str):
        price_per_call (str):
        price_per_1k_tokens (str): CNY per 1,000 completion tokens (the ``tokens`` an invoke's output reports, the
            ``completion_tokens`` of
            the OpenAI-compatible API's usage), on top of the price per call.
        price_per_1k_prompt_tokens (str): CNY per 1,000 prompt tokens of the OpenAI-compatible API
            (``usage.prompt_tokens``).
        description (str | Unset):
        visibility (AppVisibilityEnum | Unset): * `private` - Private to the organization
            * `public` - Public in the marketplace
        state (AppStateEnum | Unset): * `draft` - Draft
            * `in_review` - In review
            * `published` - Published
            * `suspended` - Suspended
        input_schema (Any | Unset):
        output_schema (Any | Unset):
        example_request (Any | Unset):
        example_response (Any | Unset):
        attributions (Any | Unset): attribution texts of training datasets
    """

    slug: str
    name: str
    category: CategoryEnum
    publisher: str
    price_per_call: str
    price_per_1k_tokens: str
    price_per_1k_prompt_tokens: str
    description: str | Unset = UNSET
    visibility: AppVisibilityEnum | Unset = UNSET
    state: AppStateEnum | Unset = UNSET
    input_schema: Any | Unset = UNSET
    output_schema: Any | Unset = UNSET
    example_request: Any | Unset = UNSET
    example_response: Any | Unset = UNSET
    attributions: Any | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        slug = self.slug

        name = self.name

        category = self.category.value

        publisher = self.publisher

        price_per_call = self.price_per_call

        price_per_1k_tokens = self.price_per_1k_tokens

        price_per_1k_prompt_tokens = self.price_per_1k_prompt_tokens

        description = self.description

        visibility: str | Unset = UNSET
        if not isinstance(self.visibility, Unset):
            visibility = self.visibility.value

        state: str | Unset = UNSET
        if not isinstance(self.state, Unset):
            state = self.state.value

        input_schema = self.input_schema

        output_schema = self.output_schema

        example_request = self.example_request

        example_response = self.example_response

        attributions = self.attributions

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "slug": slug,
                "name": name,
                "category": category,
                "publisher": publisher,
                "price_per_call": price_per_call,
                "price_per_1k_tokens": price_per_1k_tokens,
                "price_per_1k_prompt_tokens": price_per_1k_prompt_tokens,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if visibility is not UNSET:
            field_dict["visibility"] = visibility
        if state is not UNSET:
            field_dict["state"] = state
        if input_schema is not UNSET:
            field_dict["input_schema"] = input_schema
        if output_schema is not UNSET:
            field_dict["output_schema"] = output_schema
        if example_request is not UNSET:
            field_dict["example_request"] = example_request
        if example_response is not UNSET:
            field_dict["example_response"] = example_response
        if attributions is not UNSET:
            field_dict["attributions"] = attributions

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        slug = d.pop("slug")

        name = d.pop("name")

        category = CategoryEnum(d.pop("category"))

        publisher = d.pop("publisher")

        price_per_call = d.pop("price_per_call")

        price_per_1k_tokens = d.pop("price_per_1k_tokens")

        price_per_1k_prompt_tokens = d.pop("price_per_1k_prompt_tokens")

        description = d.pop("description", UNSET)

        _visibility = d.pop("visibility", UNSET)
        visibility: AppVisibilityEnum | Unset
        if isinstance(_visibility, Unset):
            visibility = UNSET
        else:
            visibility = AppVisibilityEnum(_visibility)

        _state = d.pop("state", UNSET)
        state: AppStateEnum | Unset
        if isinstance(_state, Unset):
            state = UNSET
        else:
            state = AppStateEnum(_state)

        input_schema = d.pop("input_schema", UNSET)

        output_schema = d.pop("output_schema", UNSET)

        example_request = d.pop("example_request", UNSET)

        example_response = d.pop("example_response", UNSET)

        attributions = d.pop("attributions", UNSET)

        app = cls(
            slug=slug,
            name=name,
            category=category,
            publisher=publisher,
            price_per_call=price_per_call,
            price_per_1k_tokens=price_per_1k_tokens,
            price_per_1k_prompt_tokens=price_per_1k_prompt_tokens,
            description=description,
            visibility=visibility,
            state=state,
            input_schema=input_schema,
            output_schema=output_schema,
            example_request=example_request,
            example_response=example_response,
            attributions=attributions,
        )

        app.additional_properties = d
        return app

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
