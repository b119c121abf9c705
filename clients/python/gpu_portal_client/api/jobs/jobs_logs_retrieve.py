from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.jobs_logs_retrieve_response_200 import JobsLogsRetrieveResponse200
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: int,
    *,
    lines: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["lines"] = lines

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
) -> JobsLogsRetrieveResponse200 | None:
    if response.status_code == 200:
        response_200 = JobsLogsRetrieveResponse200.from_dict(response.json())

        return response_200

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[JobsLogsRetrieveResponse200]:
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
    lines: int | Unset = UNSET,
) -> Response[JobsLogsRetrieveResponse200]:
    """Your organization's training jobs: create, stop, restart, roll back, checkpoint now, checkpoints,
    logs, metrics.

    Args:
        id (int):
        lines (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobsLogsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        lines=lines,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: int,
    *,
    client: AuthenticatedClient,
    lines: int | Unset = UNSET,
) -> JobsLogsRetrieveResponse200 | None:
    """Your organization's training jobs: create, stop, restart, roll back, checkpoint now, checkpoints,
    logs, metrics.

    Args:
        id (int):
        lines (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobsLogsRetrieveResponse200
    """

    return sync_detailed(
        id=id,
        client=client,
        lines=lines,
    ).parsed


async def asyncio_detailed(
    id: int,
    *,
    client: AuthenticatedClient,
    lines: int | Unset = UNSET,
) -> Response[JobsLogsRetrieveResponse200]:
    """Your organization's training jobs: create, stop, restart, roll back, checkpoint now, checkpoints,
    logs, metrics.

    Args:
        id (int):
        lines (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[JobsLogsRetrieveResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        lines=lines,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: int,
    *,
    client: AuthenticatedClient,
    lines: int | Unset = UNSET,
) -> JobsLogsRetrieveResponse200 | None:
    """Your organization's training jobs: create, stop, restart, roll back, checkpoint now, checkpoints,
    logs, metrics.

    Args:
        id (int):
        lines (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        JobsLogsRetrieveResponse200
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            lines=lines,
        )
    ).parsed
