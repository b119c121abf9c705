from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.jobs_logs_retrieve_response_200 import JobsLogsRetrieveResponse200
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: int,
    *,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["attempt"] = attempt

    params["lines"] = lines

    params["rank"] = rank

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/jobs/{id}/logs".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | JobsLogsRetrieveResponse200 | None:
    if response.status_code == 200:
        response_200 = JobsLogsRetrieveResponse200.from_dict(response.json())

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
) -> Response[ErrorEnvelope | JobsLogsRetrieveResponse200]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: int,
    *,
    client: AuthenticatedClient,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> Response[ErrorEnvelope | JobsLogsRetrieveResponse200]:
    """The last ``lines`` lines of one node rank's log: live from its pod, else the portal's archived
    copy. ``{"job", "attempt", "rank", "ranks", "source": live|archive|none, "lines"}``; an unknown rank
    or attempt is a 404 ``unknown_rank``.

    Args:
        id (int):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | JobsLogsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        attempt=attempt,
        lines=lines,
        rank=rank,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: int,
    *,
    client: AuthenticatedClient,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> ErrorEnvelope | JobsLogsRetrieveResponse200 | None:
    """The last ``lines`` lines of one node rank's log: live from its pod, else the portal's archived
    copy. ``{"job", "attempt", "rank", "ranks", "source": live|archive|none, "lines"}``; an unknown rank
    or attempt is a 404 ``unknown_rank``.

    Args:
        id (int):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | JobsLogsRetrieveResponse200
    """

    return sync_detailed(
        id=id,
        client=client,
        attempt=attempt,
        lines=lines,
        rank=rank,
    ).parsed


async def asyncio_detailed(
    id: int,
    *,
    client: AuthenticatedClient,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> Response[ErrorEnvelope | JobsLogsRetrieveResponse200]:
    """The last ``lines`` lines of one node rank's log: live from its pod, else the portal's archived
    copy. ``{"job", "attempt", "rank", "ranks", "source": live|archive|none, "lines"}``; an unknown rank
    or attempt is a 404 ``unknown_rank``.

    Args:
        id (int):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | JobsLogsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        attempt=attempt,
        lines=lines,
        rank=rank,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: int,
    *,
    client: AuthenticatedClient,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> ErrorEnvelope | JobsLogsRetrieveResponse200 | None:
    """The last ``lines`` lines of one node rank's log: live from its pod, else the portal's archived
    copy. ``{"job", "attempt", "rank", "ranks", "source": live|archive|none, "lines"}``; an unknown rank
    or attempt is a 404 ``unknown_rank``.

    Args:
        id (int):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | JobsLogsRetrieveResponse200
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            attempt=attempt,
            lines=lines,
            rank=rank,
        )
    ).parsed
