from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.wallet import Wallet
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    organization: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["organization"] = organization

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/wallet",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Wallet | None:
    if response.status_code == 200:
        response_200 = Wallet.from_dict(response.json())

        return response_200

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Wallet]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Response[Wallet]:
    """The organization's wallet: total, trial (unexpired grants) and paid balance, and grants.

    Args:
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Wallet]
    """

    kwargs = _get_kwargs(
        organization=organization,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Wallet | None:
    """The organization's wallet: total, trial (unexpired grants) and paid balance, and grants.

    Args:
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Wallet
    """

    return sync_detailed(
        client=client,
        organization=organization,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Response[Wallet]:
    """The organization's wallet: total, trial (unexpired grants) and paid balance, and grants.

    Args:
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Wallet]
    """

    kwargs = _get_kwargs(
        organization=organization,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Wallet | None:
    """The organization's wallet: total, trial (unexpired grants) and paid balance, and grants.

    Args:
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Wallet
    """

    return (
        await asyncio_detailed(
            client=client,
            organization=organization,
        )
    ).parsed
