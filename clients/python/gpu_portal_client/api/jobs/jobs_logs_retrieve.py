from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.job_log import JobLog
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: int,
    *,
    after: int | Unset = UNSET,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["after"] = after

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
) -> ErrorEnvelope | JobLog | None:
    if response.status_code == 200:
        response_200 = JobLog.from_dict(response.json())

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
) -> Response[ErrorEnvelope | JobLog]:
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
    after: int | Unset = UNSET,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> Response[ErrorEnvelope | JobLog]:
    """One node rank's log: live from its pod (local: its log file), else the portal's archived copy.
    Without ``after`` the last ``lines`` lines; with ``after`` (the ``cursor`` of an earlier answer,
    with
    its ``attempt``) up to ``lines`` lines from that offset on, oldest first, ``more`` when others are
    waiting, ``dropped`` counting the lines the portal no longer has. An unknown rank or attempt is a
    404
    ``unknown_rank``.

    Args:
        id (int):
        after (int | Unset):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | JobLog]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
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
    after: int | Unset = UNSET,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> ErrorEnvelope | JobLog | None:
    """One node rank's log: live from its pod (local: its log file), else the portal's archived copy.
    Without ``after`` the last ``lines`` lines; with ``after`` (the ``cursor`` of an earlier answer,
    with
    its ``attempt``) up to ``lines`` lines from that offset on, oldest first, ``more`` when others are
    waiting, ``dropped`` counting the lines the portal no longer has. An unknown rank or attempt is a
    404
    ``unknown_rank``.

    Args:
        id (int):
        after (int | Unset):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | JobLog
    """

    return sync_detailed(
        id=id,
        client=client,
        after=after,
        attempt=attempt,
        lines=lines,
        rank=rank,
    ).parsed


async def asyncio_detailed(
    id: int,
    *,
    client: AuthenticatedClient,
    after: int | Unset = UNSET,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> Response[ErrorEnvelope | JobLog]:
    """One node rank's log: live from its pod (local: its log file), else the portal's archived copy.
    Without ``after`` the last ``lines`` lines; with ``after`` (the ``cursor`` of an earlier answer,
    with
    its ``attempt``) up to ``lines`` lines from that offset on, oldest first, ``more`` when others are
    waiting, ``dropped`` counting the lines the portal no longer has. An unknown rank or attempt is a
    404
    ``unknown_rank``.

    Args:
        id (int):
        after (int | Unset):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | JobLog]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
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
    after: int | Unset = UNSET,
    attempt: int | Unset = UNSET,
    lines: int | Unset = 200,
    rank: int | Unset = 0,
) -> ErrorEnvelope | JobLog | None:
    """One node rank's log: live from its pod (local: its log file), else the portal's archived copy.
    Without ``after`` the last ``lines`` lines; with ``after`` (the ``cursor`` of an earlier answer,
    with
    its ``attempt``) up to ``lines`` lines from that offset on, oldest first, ``more`` when others are
    waiting, ``dropped`` counting the lines the portal no longer has. An unknown rank or attempt is a
    404
    ``unknown_rank``.

    Args:
        id (int):
        after (int | Unset):
        attempt (int | Unset):
        lines (int | Unset):  Default: 200.
        rank (int | Unset):  Default: 0.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | JobLog
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            after=after,
            attempt=attempt,
            lines=lines,
            rank=rank,
        )
    ).parsed
