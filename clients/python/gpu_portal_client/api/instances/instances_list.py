from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.paginated_instance_list import PaginatedInstanceList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    cursor: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["cursor"] = cursor

    params["page_size"] = page_size

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/instances",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | PaginatedInstanceList | None:
    if response.status_code == 200:
        response_200 = PaginatedInstanceList.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorEnvelope.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorEnvelope.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorEnvelope.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorEnvelope.from_dict(response.json())

        return response_404

    if response.status_code == 405:
        response_405 = ErrorEnvelope.from_dict(response.json())

        return response_405

    if response.status_code == 406:
        response_406 = ErrorEnvelope.from_dict(response.json())

        return response_406

    if response.status_code == 429:
        response_429 = ErrorEnvelope.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorEnvelope | PaginatedInstanceList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    cursor: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
) -> Response[ErrorEnvelope | PaginatedInstanceList]:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedInstanceList]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        page_size=page_size,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    cursor: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
) -> ErrorEnvelope | PaginatedInstanceList | None:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedInstanceList
    """

    return sync_detailed(
        client=client,
        cursor=cursor,
        page_size=page_size,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    cursor: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
) -> Response[ErrorEnvelope | PaginatedInstanceList]:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedInstanceList]
    """

    kwargs = _get_kwargs(
        cursor=cursor,
        page_size=page_size,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    cursor: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
) -> ErrorEnvelope | PaginatedInstanceList | None:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedInstanceList
    """

    return (
        await asyncio_detailed(
            client=client,
            cursor=cursor,
            page_size=page_size,
        )
    ).parsed
