from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.apps_invoke_create_body import AppsInvokeCreateBody
from ...models.apps_invoke_create_response_200 import AppsInvokeCreateResponse200
from ...models.error_envelope import ErrorEnvelope
from ...types import UNSET, Response, Unset


def _get_kwargs(
    slug: str,
    *,
    body: AppsInvokeCreateBody | Unset = UNSET,
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
        "url": "/api/v1/apps/{slug}/invoke".format(
            slug=quote(str(slug), safe=""),
        ),
        "params": params,
    }

    if not isinstance(body, Unset):
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AppsInvokeCreateResponse200 | ErrorEnvelope | None:
    if response.status_code == 200:
        response_200 = AppsInvokeCreateResponse200.from_dict(response.json())

        return response_200

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
) -> Response[AppsInvokeCreateResponse200 | ErrorEnvelope]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: AppsInvokeCreateBody | Unset = UNSET,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[AppsInvokeCreateResponse200 | ErrorEnvelope]:
    """Call the app. Send the input as the JSON body; ``Idempotency-Key`` makes retries run and cost once.
    Errors: 422 ``input_invalid`` (with the JSON path), 413 body too large, 402 ``insufficient_funds``,
    409 ``call_in_progress`` / ``idempotency_key_reused``, 502 ``backend_error``, 504
    ``backend_timeout``
    — nothing is charged on any error.

    Args:
        slug (str):
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (AppsInvokeCreateBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppsInvokeCreateResponse200 | ErrorEnvelope]
    """

    kwargs = _get_kwargs(
        slug=slug,
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: AppsInvokeCreateBody | Unset = UNSET,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AppsInvokeCreateResponse200 | ErrorEnvelope | None:
    """Call the app. Send the input as the JSON body; ``Idempotency-Key`` makes retries run and cost once.
    Errors: 422 ``input_invalid`` (with the JSON path), 413 body too large, 402 ``insufficient_funds``,
    409 ``call_in_progress`` / ``idempotency_key_reused``, 502 ``backend_error``, 504
    ``backend_timeout``
    — nothing is charged on any error.

    Args:
        slug (str):
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (AppsInvokeCreateBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppsInvokeCreateResponse200 | ErrorEnvelope
    """

    return sync_detailed(
        slug=slug,
        client=client,
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    ).parsed


async def asyncio_detailed(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: AppsInvokeCreateBody | Unset = UNSET,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[AppsInvokeCreateResponse200 | ErrorEnvelope]:
    """Call the app. Send the input as the JSON body; ``Idempotency-Key`` makes retries run and cost once.
    Errors: 422 ``input_invalid`` (with the JSON path), 413 body too large, 402 ``insufficient_funds``,
    409 ``call_in_progress`` / ``idempotency_key_reused``, 502 ``backend_error``, 504
    ``backend_timeout``
    — nothing is charged on any error.

    Args:
        slug (str):
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (AppsInvokeCreateBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppsInvokeCreateResponse200 | ErrorEnvelope]
    """

    kwargs = _get_kwargs(
        slug=slug,
        body=body,
        organization=organization,
        idempotency_key=idempotency_key,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    slug: str,
    *,
    client: AuthenticatedClient,
    body: AppsInvokeCreateBody | Unset = UNSET,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AppsInvokeCreateResponse200 | ErrorEnvelope | None:
    """Call the app. Send the input as the JSON body; ``Idempotency-Key`` makes retries run and cost once.
    Errors: 422 ``input_invalid`` (with the JSON path), 413 body too large, 402 ``insufficient_funds``,
    409 ``call_in_progress`` / ``idempotency_key_reused``, 502 ``backend_error``, 504
    ``backend_timeout``
    — nothing is charged on any error.

    Args:
        slug (str):
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (AppsInvokeCreateBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppsInvokeCreateResponse200 | ErrorEnvelope
    """

    return (
        await asyncio_detailed(
            slug=slug,
            client=client,
            body=body,
            organization=organization,
            idempotency_key=idempotency_key,
        )
    ).parsed
