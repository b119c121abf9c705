from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.paginated_ssh_key_list import PaginatedSshKeyList
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
        "url": "/api/v1/ssh-keys",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | PaginatedSshKeyList | None:
    if response.status_code == 200:
        response_200 = PaginatedSshKeyList.from_dict(response.json())

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
) -> Response[ErrorEnvelope | PaginatedSshKeyList]:
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
) -> Response[ErrorEnvelope | PaginatedSshKeyList]:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedSshKeyList]
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
) -> ErrorEnvelope | PaginatedSshKeyList | None:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedSshKeyList
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
) -> Response[ErrorEnvelope | PaginatedSshKeyList]:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedSshKeyList]
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
) -> ErrorEnvelope | PaginatedSshKeyList | None:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        cursor (str | Unset):
        page_size (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedSshKeyList
    """

    return (
        await asyncio_detailed(
            client=client,
            cursor=cursor,
            page_size=page_size,
        )
    ).parsed
