from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
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
) -> ErrorEnvelope | Statement | None:
    if response.status_code == 200:
        response_200 = Statement.from_dict(response.json())

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
) -> Response[ErrorEnvelope | Statement]:
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
) -> Response[ErrorEnvelope | Statement]:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | Statement]
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
) -> ErrorEnvelope | Statement | None:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | Statement
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
) -> Response[ErrorEnvelope | Statement]:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | Statement]
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
) -> ErrorEnvelope | Statement | None:
    """One month's statement (time zone of the user); totals equal the ledger.

    Args:
        year (int):
        month (int):
        organization (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | Statement
    """

    return (
        await asyncio_detailed(
            year=year,
            month=month,
            client=client,
            organization=organization,
        )
    ).parsed
