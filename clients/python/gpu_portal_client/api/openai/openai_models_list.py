from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.open_ai_error import OpenAIError
from ...models.openai_models_list_response_200 import OpenaiModelsListResponse200
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/openai/v1/models",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> OpenAIError | OpenaiModelsListResponse200 | None:
    if response.status_code == 200:
        response_200 = OpenaiModelsListResponse200.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = OpenAIError.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = OpenAIError.from_dict(response.json())

        return response_401

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

    if response.status_code == 429:
        response_429 = OpenAIError.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[OpenAIError | OpenaiModelsListResponse200]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[OpenAIError | OpenaiModelsListResponse200]:
    """OpenAI ``GET /v1/models``: the model apps your organization may call, with their prices (CNY).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiModelsListResponse200]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> OpenAIError | OpenaiModelsListResponse200 | None:
    """OpenAI ``GET /v1/models``: the model apps your organization may call, with their prices (CNY).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiModelsListResponse200
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[OpenAIError | OpenaiModelsListResponse200]:
    """OpenAI ``GET /v1/models``: the model apps your organization may call, with their prices (CNY).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiModelsListResponse200]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> OpenAIError | OpenaiModelsListResponse200 | None:
    """OpenAI ``GET /v1/models``: the model apps your organization may call, with their prices (CNY).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiModelsListResponse200
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
