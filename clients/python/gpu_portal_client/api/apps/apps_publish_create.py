from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.apps_publish_create_response_200 import AppsPublishCreateResponse200
from ...models.apps_publish_create_response_202 import AppsPublishCreateResponse202
from ...models.error_envelope import ErrorEnvelope
from ...models.publish_request import PublishRequest
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: PublishRequest,
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
        "url": "/api/v1/apps/publish",
        "params": params,
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope | None:
    if response.status_code == 200:
        response_200 = AppsPublishCreateResponse200.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = AppsPublishCreateResponse202.from_dict(response.json())

        return response_202

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
) -> Response[
    AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope
]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: PublishRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[
    AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope
]:
    """Publish a checkpoint of one of your training jobs as an app (or as a new version of ``app``).

    Answers 202 with the app and its new version in state ``building``: the checkpoint is exported and
    served
    by a background task; poll ``GET /apps/{slug}/versions`` for ``progress`` (and ``error`` naming the
    failed
    stage). The version records the training datasets and their licenses; making the app public or paid
    is
    refused later (409 ``license_forbids``) when a license forbids commercial use or derivative models.
    A job or checkpoint of another organization is a 404.

    ``Idempotency-Key``: a retry with the same key and body answers 200 with the same app and version
    (as they
    are now) and ``"replayed": true``, publishing and building nothing again; the same key with another
    body
    is a 409 ``idempotency_key_reused``. Keys are per organization.

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (PublishRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope]
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
    body: PublishRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope | None:
    """Publish a checkpoint of one of your training jobs as an app (or as a new version of ``app``).

    Answers 202 with the app and its new version in state ``building``: the checkpoint is exported and
    served
    by a background task; poll ``GET /apps/{slug}/versions`` for ``progress`` (and ``error`` naming the
    failed
    stage). The version records the training datasets and their licenses; making the app public or paid
    is
    refused later (409 ``license_forbids``) when a license forbids commercial use or derivative models.
    A job or checkpoint of another organization is a 404.

    ``Idempotency-Key``: a retry with the same key and body answers 200 with the same app and version
    (as they
    are now) and ``"replayed": true``, publishing and building nothing again; the same key with another
    body
    is a 409 ``idempotency_key_reused``. Keys are per organization.

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (PublishRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope
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
    body: PublishRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> Response[
    AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope
]:
    """Publish a checkpoint of one of your training jobs as an app (or as a new version of ``app``).

    Answers 202 with the app and its new version in state ``building``: the checkpoint is exported and
    served
    by a background task; poll ``GET /apps/{slug}/versions`` for ``progress`` (and ``error`` naming the
    failed
    stage). The version records the training datasets and their licenses; making the app public or paid
    is
    refused later (409 ``license_forbids``) when a license forbids commercial use or derivative models.
    A job or checkpoint of another organization is a 404.

    ``Idempotency-Key``: a retry with the same key and body answers 200 with the same app and version
    (as they
    are now) and ``"replayed": true``, publishing and building nothing again; the same key with another
    body
    is a 409 ``idempotency_key_reused``. Keys are per organization.

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (PublishRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope]
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
    body: PublishRequest,
    organization: str | Unset = UNSET,
    idempotency_key: str | Unset = UNSET,
) -> AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope | None:
    """Publish a checkpoint of one of your training jobs as an app (or as a new version of ``app``).

    Answers 202 with the app and its new version in state ``building``: the checkpoint is exported and
    served
    by a background task; poll ``GET /apps/{slug}/versions`` for ``progress`` (and ``error`` naming the
    failed
    stage). The version records the training datasets and their licenses; making the app public or paid
    is
    refused later (409 ``license_forbids``) when a license forbids commercial use or derivative models.
    A job or checkpoint of another organization is a 404.

    ``Idempotency-Key``: a retry with the same key and body answers 200 with the same app and version
    (as they
    are now) and ``"replayed": true``, publishing and building nothing again; the same key with another
    body
    is a 409 ``idempotency_key_reused``. Keys are per organization.

    Args:
        organization (str | Unset):
        idempotency_key (str | Unset):
        body (PublishRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        AppsPublishCreateResponse200 | AppsPublishCreateResponse202 | ErrorEnvelope
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            organization=organization,
            idempotency_key=idempotency_key,
        )
    ).parsed
