from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.statement import Statement
from ...types import UNSET, Response, Unset


def _get_kwargs(
    year: int,
    month: int,
    *,
    organization: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["organization"] = organization

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/statements/{year}/{month}".format(
            year=quote(str(year), safe=""),
            month=quote(str(month), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Statement | None:
    if response.status_code == 200:
        response_200 = Statement.from_dict(response.json())

        return response_200

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Statement]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    year: int,
    month: int,
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Response[Statement]:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Statement]
    """

    kwargs = _get_kwargs(
        year=year,
        month=month,
        organization=organization,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    year: int,
    month: int,
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Statement | None:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Statement
    """

    return sync_detailed(
        year=year,
        month=month,
        client=client,
        organization=organization,
    ).parsed


async def asyncio_detailed(
    year: int,
    month: int,
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Response[Statement]:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Statement]
    """

    kwargs = _get_kwargs(
        year=year,
        month=month,
        organization=organization,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    year: int,
    month: int,
    *,
    client: AuthenticatedClient,
    organization: str | Unset = UNSET,
) -> Statement | None:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Statement
    """

    return (
        await asyncio_detailed(
            year=year,
            month=month,
            client=client,
            organization=organization,
        )
    ).parsed
