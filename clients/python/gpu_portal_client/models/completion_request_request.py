from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.completion_request_request_stream_options_type_0 import (
        CompletionRequestRequestStreamOptionsType0,
    )


T = TypeVar("T", bound="CompletionRequestRequest")


@_attrs_define
class CompletionRequestRequest:
    """
    Attributes:
        model (str): the slug of a model app (GET /models)
        prompt (Any): a string, or an array of token ids
        max_tokens (int | None | Unset): completion tokens at most (held before the call)
        temperature (float | None | Unset):
        top_p (float | None | Unset):
        seed (int | None | Unset):
        stop (Any | Unset): a string or up to 4 strings
        stream (bool | Unset):  Default: False.
        stream_options (CompletionRequestRequestStreamOptionsType0 | None | Unset):
        user (str | Unset):
        n (int | None | Unset): 1 only
    """

    model: str
    prompt: Any
    max_tokens: int | None | Unset = UNSET
    temperature: float | None | Unset = UNSET
    top_p: float | None | Unset = UNSET
    seed: int | None | Unset = UNSET
    stop: Any | Unset = UNSET
    stream: bool | Unset = False
    stream_options: CompletionRequestRequestStreamOptionsType0 | None | Unset = UNSET
    user: str | Unset = UNSET
    n: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.completion_request_request_stream_options_type_0 import (
            CompletionRequestRequestStreamOptionsType0,
        )

        model = self.model

        prompt = self.prompt

        max_tokens: int | None | Unset
        if isinstance(self.max_tokens, Unset):
            max_tokens = UNSET
        else:
            max_tokens = self.max_tokens

        temperature: float | None | Unset
        if isinstance(self.temperature, Unset):
            temperature = UNSET
        else:
            temperature = self.temperature

        top_p: float | None | Unset
        if isinstance(self.top_p, Unset):
            top_p = UNSET
        else:
            top_p = self.top_p

        seed: int | None | Unset
        if isinstance(self.seed, Unset):
            seed = UNSET
        else:
            seed = self.seed

        stop = self.stop

        stream = self.stream

        stream_options: dict[str, Any] | None | Unset
        if isinstance(self.stream_options, Unset):
            stream_options = UNSET
        elif isinstance(
            self.stream_options, CompletionRequestRequestStreamOptionsType0
        ):
            stream_options = self.stream_options.to_dict()
        else:
            stream_options = self.stream_options

        user = self.user

        n: int | None | Unset
        if isinstance(self.n, Unset):
            n = UNSET
        else:
            n = self.n

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "model": model,
                "prompt": prompt,
            }
        )
        if max_tokens is not UNSET:
            field_dict["max_tokens"] = max_tokens
        if temperature is not UNSET:
            field_dict["temperature"] = temperature
        if top_p is not UNSET:
            field_dict["top_p"] = top_p
        if seed is not UNSET:
            field_dict["seed"] = seed
        if stop is not UNSET:
            field_dict["stop"] = stop
        if stream is not UNSET:
            field_dict["stream"] = stream
        if stream_options is not UNSET:
            field_dict["stream_options"] = stream_options
        if user is not UNSET:
            field_dict["user"] = user
        if n is not UNSET:
            field_dict["n"] = n

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.completion_request_request_stream_options_type_0 import (
            CompletionRequestRequestStreamOptionsType0,
        )

        d = dict(src_dict)
        model = d.pop("model")

        prompt = d.pop("prompt")

        def _parse_max_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_tokens = _parse_max_tokens(d.pop("max_tokens", UNSET))

        def _parse_temperature(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        temperature = _parse_temperature(d.pop("temperature", UNSET))

        def _parse_top_p(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        top_p = _parse_top_p(d.pop("top_p", UNSET))

        def _parse_seed(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        seed = _parse_seed(d.pop("seed", UNSET))

        stop = d.pop("stop", UNSET)

        stream = d.pop("stream", UNSET)

        def _parse_stream_options(
            data: object,
        ) -> CompletionRequestRequestStreamOptionsType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                stream_options_type_0 = (
                    CompletionRequestRequestStreamOptionsType0.from_dict(data)
                )

                return stream_options_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(CompletionRequestRequestStreamOptionsType0 | None | Unset, data)

        stream_options = _parse_stream_options(d.pop("stream_options", UNSET))

        user = d.pop("user", UNSET)

        def _parse_n(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        n = _parse_n(d.pop("n", UNSET))

        completion_request_request = cls(
            model=model,
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            seed=seed,
            stop=stop,
            stream=stream,
            stream_options=stream_options,
            user=user,
            n=n,
        )

        completion_request_request.additional_properties = d
        return completion_request_request

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
