from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.open_ai_error import OpenAIError
from ...models.openai_models_retrieve_response_200 import (
    OpenaiModelsRetrieveResponse200,
)
from ...types import Response


def _get_kwargs(
    model: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/openai/v1/models/{model}".format(
            model=quote(str(model), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> OpenAIError | OpenaiModelsRetrieveResponse200 | None:
    if response.status_code == 200:
        response_200 = OpenaiModelsRetrieveResponse200.from_dict(response.json())

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
) -> Response[OpenAIError | OpenaiModelsRetrieveResponse200]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    model: str,
    *,
    client: AuthenticatedClient,
) -> Response[OpenAIError | OpenaiModelsRetrieveResponse200]:
    """OpenAI ``GET /v1/models/{model}``.

    Args:
        model (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiModelsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        model=model,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    model: str,
    *,
    client: AuthenticatedClient,
) -> OpenAIError | OpenaiModelsRetrieveResponse200 | None:
    """OpenAI ``GET /v1/models/{model}``.

    Args:
        model (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiModelsRetrieveResponse200
    """

    return sync_detailed(
        model=model,
        client=client,
    ).parsed


async def asyncio_detailed(
    model: str,
    *,
    client: AuthenticatedClient,
) -> Response[OpenAIError | OpenaiModelsRetrieveResponse200]:
    """OpenAI ``GET /v1/models/{model}``.

    Args:
        model (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[OpenAIError | OpenaiModelsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        model=model,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    model: str,
    *,
    client: AuthenticatedClient,
) -> OpenAIError | OpenaiModelsRetrieveResponse200 | None:
    """OpenAI ``GET /v1/models/{model}``.

    Args:
        model (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        OpenAIError | OpenaiModelsRetrieveResponse200
    """

    return (
        await asyncio_detailed(
            model=model,
            client=client,
        )
    ).parsed
