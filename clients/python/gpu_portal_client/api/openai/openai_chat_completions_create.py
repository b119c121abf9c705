from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.chat_completion_request_request import ChatCompletionRequestRequest
from ...models.open_ai_error import OpenAIError
from ...models.openai_chat_completions_create_response_200 import (
    OpenaiChatCompletionsCreateResponse200,
)
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: ChatCompletionRequestRequest,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/openai/v1/chat/completions",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> OpenAIError | OpenaiChatCompletionsCreateResponse200 | None:
    if response.status_code == 200:
        response_200 = OpenaiChatCompletionsCreateResponse200.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = OpenAIError.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = OpenAIError.from_dict(response.json())

        return response_401

    if response.status_code == 402:
        response_402 = OpenAIError.from_dict(response.json())

        return response_402

    if response.status_code == 403:
        response_403 = OpenAIError.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = OpenAIError.from_dict(response.json())

        return response_404

    if response.status_code == 405:
        response_405 = OpenAIError.from_dict(response.json())

        return response_405

    if response.status_code == 406:
        response_406 = OpenAIError.from_dict(response.json())

        return response_406

    if response.status_code == 409:
        response_409 = OpenAIError.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = OpenAIError.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = OpenAIError.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = OpenAIError.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = OpenAIError.from_dict(response.json())

        return response_429

    if response.status_code == 502:
        response_502 = OpenAIError.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = OpenAIError.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = OpenAIError.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[OpenAIError | OpenaiChatCompletionsCreateResponse200]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: ChatCompletionRequestRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[OpenAIError | OpenaiChatCompletionsCreateResponse200]:
    """A chat completion of a model app (OpenAI's chat completions API; the messages are rendered with the
    model's chat template). With `stream: true` the answer is `text/event-stream`: one chunk per token,
    the usage on the last one, then `data: [DONE]`. The hold for `max_tokens` is taken before the first
    byte; the call is charged for the tokens sent (prompt + completion × the app's prices per 1,000
    tokens, plus its price per call), nothing when no token was produced.

    Args:
        idempotency_key (str | Unset):
        body (ChatCompletionRequestRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiChatCompletionsCreateResponse200]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: ChatCompletionRequestRequest,
    idempotency_key: str | Unset = UNSET,
) -> OpenAIError | OpenaiChatCompletionsCreateResponse200 | None:
    """A chat completion of a model app (OpenAI's chat completions API; the messages are rendered with the
    model's chat template). With `stream: true` the answer is `text/event-stream`: one chunk per token,
    the usage on the last one, then `data: [DONE]`. The hold for `max_tokens` is taken before the first
    byte; the call is charged for the tokens sent (prompt + completion × the app's prices per 1,000
    tokens, plus its price per call), nothing when no token was produced.

    Args:
        idempotency_key (str | Unset):
        body (ChatCompletionRequestRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiChatCompletionsCreateResponse200
    """

    return sync_detailed(
        client=client,
        body=body,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: ChatCompletionRequestRequest,
    idempotency_key: str | Unset = UNSET,
) -> Response[OpenAIError | OpenaiChatCompletionsCreateResponse200]:
    """A chat completion of a model app (OpenAI's chat completions API; the messages are rendered with the
    model's chat template). With `stream: true` the answer is `text/event-stream`: one chunk per token,
    the usage on the last one, then `data: [DONE]`. The hold for `max_tokens` is taken before the first
    byte; the call is charged for the tokens sent (prompt + completion × the app's prices per 1,000
    tokens, plus its price per call), nothing when no token was produced.

    Args:
        idempotency_key (str | Unset):
        body (ChatCompletionRequestRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiChatCompletionsCreateResponse200]
    """

    kwargs = _get_kwargs(
        body=body,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: ChatCompletionRequestRequest,
    idempotency_key: str | Unset = UNSET,
) -> OpenAIError | OpenaiChatCompletionsCreateResponse200 | None:
    """A chat completion of a model app (OpenAI's chat completions API; the messages are rendered with the
    model's chat template). With `stream: true` the answer is `text/event-stream`: one chunk per token,
    the usage on the last one, then `data: [DONE]`. The hold for `max_tokens` is taken before the first
    byte; the call is charged for the tokens sent (prompt + completion × the app's prices per 1,000
    tokens, plus its price per call), nothing when no token was produced.

    Args:
        idempotency_key (str | Unset):
        body (ChatCompletionRequestRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiChatCompletionsCreateResponse200
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            idempotency_key=idempotency_key,
        )
    ).parsed
