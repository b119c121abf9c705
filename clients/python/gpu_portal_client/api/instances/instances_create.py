from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_envelope import ErrorEnvelope
from ...models.instance import Instance
from ...models.instance_launch_request import InstanceLaunchRequest
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: InstanceLaunchRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(idempotency_key, Unset):
        headers["Idempotency-Key"] = idempotency_key

    params: dict[str, Any] = {}

    params["organization"] = organization

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/api/v1/instances",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | Instance | None:
    if response.status_code == 201:
        response_201 = Instance.from_dict(response.json())

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
) -> Response[ErrorEnvelope | Instance]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: InstanceLaunchRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorEnvelope | Instance]:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (InstanceLaunchRequest): Input of ``POST /instances``: an interactive instance
            (JupyterLab, SSH) running ``command`` if given.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | Instance]
    """

    kwargs = _get_kwargs(
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: InstanceLaunchRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorEnvelope | Instance | None:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (InstanceLaunchRequest): Input of ``POST /instances``: an interactive instance
            (JupyterLab, SSH) running ``command`` if given.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | Instance
    """

    return sync_detailed(
        client=client,
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: InstanceLaunchRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[ErrorEnvelope | Instance]:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (InstanceLaunchRequest): Input of ``POST /instances``: an interactive instance
            (JupyterLab, SSH) running ``command`` if given.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | Instance]
    """

    kwargs = _get_kwargs(
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: InstanceLaunchRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> ErrorEnvelope | Instance | None:
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``).

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (InstanceLaunchRequest): Input of ``POST /instances``: an interactive instance
            (JupyterLab, SSH) running ``command`` if given.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | Instance
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            organization=organization,
            idempotency_key=idempotency_key,
        )
    ).parsed
