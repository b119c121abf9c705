from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.ssh_key_create import SshKeyCreate
from ...models.ssh_key_create_request import SshKeyCreateRequest
from ...types import Response


def _get_kwargs(
    *,
    body: SshKeyCreateRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/ssh-keys",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | SshKeyCreate | None:
    if response.status_code == 201:
        response_201 = SshKeyCreate.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = ErrorEnvelope.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorEnvelope.from_dict(response.json())

        return response_401

    if response.status_code == 402:
        response_402 = ErrorEnvelope.from_dict(response.json())

        return response_402

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

    if response.status_code == 409:
        response_409 = ErrorEnvelope.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorEnvelope.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorEnvelope.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorEnvelope.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorEnvelope.from_dict(response.json())

        return response_429

    if response.status_code == 502:
        response_502 = ErrorEnvelope.from_dict(response.json())

        return response_502

    if response.status_code == 503:
        response_503 = ErrorEnvelope.from_dict(response.json())

        return response_503

    if response.status_code == 504:
        response_504 = ErrorEnvelope.from_dict(response.json())

        return response_504

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorEnvelope | SshKeyCreate]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: SshKeyCreateRequest,
) -> Response[ErrorEnvelope | SshKeyCreate]:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        body (SshKeyCreateRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | SshKeyCreate]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: SshKeyCreateRequest,
) -> ErrorEnvelope | SshKeyCreate | None:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        body (SshKeyCreateRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | SshKeyCreate
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: SshKeyCreateRequest,
) -> Response[ErrorEnvelope | SshKeyCreate]:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        body (SshKeyCreateRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | SshKeyCreate]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: SshKeyCreateRequest,
) -> ErrorEnvelope | SshKeyCreate | None:
    """Your own active SSH keys, with SHA256 fingerprints as ``ssh-keygen -lf`` prints them. ``POST`` adds
    a
    key: a malformed key, DSA, RSA under 2048 bits, or a key already registered (to you or to someone
    else) is a 400 ``invalid_ssh_key`` and nothing is written. Adding a key needs a signed-in session
    (403 ``session_required`` with an API token): a key opens the instances of every organization the
    user
    belongs to, while a token is a credential of one membership. Listing and revoking work with a token.

    Args:
        body (SshKeyCreateRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | SshKeyCreate
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
