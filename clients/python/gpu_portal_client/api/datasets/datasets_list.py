from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.datasets_list_domain import DatasetsListDomain
from ...models.error_envelope import ErrorEnvelope
from ...models.paginated_dataset_list import PaginatedDatasetList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    commercial_use: bool | Unset = UNSET,
    cursor: str | Unset = UNSET,
    derivative_models: bool | Unset = UNSET,
    domain: DatasetsListDomain | Unset = UNSET,
    free: bool | Unset = UNSET,
    language: str | Unset = UNSET,
    organization: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
    q: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["commercial_use"] = commercial_use

    params["cursor"] = cursor

    params["derivative_models"] = derivative_models

    json_domain: str | Unset = UNSET
    if not isinstance(domain, Unset):
        json_domain = domain.value

    params["domain"] = json_domain

    params["free"] = free

    params["language"] = language

    params["organization"] = organization

    params["page_size"] = page_size

    params["q"] = q

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/api/v1/datasets",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorEnvelope | PaginatedDatasetList | None:
    if response.status_code == 200:
        response_200 = PaginatedDatasetList.from_dict(response.json())

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
) -> Response[ErrorEnvelope | PaginatedDatasetList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    commercial_use: bool | Unset = UNSET,
    cursor: str | Unset = UNSET,
    derivative_models: bool | Unset = UNSET,
    domain: DatasetsListDomain | Unset = UNSET,
    free: bool | Unset = UNSET,
    language: str | Unset = UNSET,
    organization: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
    q: str | Unset = UNSET,
) -> Response[ErrorEnvelope | PaginatedDatasetList]:
    """Datasets visible to the organization (public ones and its own private ones), newest first.

    Args:
        commercial_use (bool | Unset):
        cursor (str | Unset):
        derivative_models (bool | Unset):
        domain (DatasetsListDomain | Unset):
        free (bool | Unset):
        language (str | Unset):
        organization (str | Unset):
        page_size (int | Unset):
        q (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedDatasetList]
    """

    kwargs = _get_kwargs(
        commercial_use=commercial_use,
        cursor=cursor,
        derivative_models=derivative_models,
        domain=domain,
        free=free,
        language=language,
        organization=organization,
        page_size=page_size,
        q=q,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    commercial_use: bool | Unset = UNSET,
    cursor: str | Unset = UNSET,
    derivative_models: bool | Unset = UNSET,
    domain: DatasetsListDomain | Unset = UNSET,
    free: bool | Unset = UNSET,
    language: str | Unset = UNSET,
    organization: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
    q: str | Unset = UNSET,
) -> ErrorEnvelope | PaginatedDatasetList | None:
    """Datasets visible to the organization (public ones and its own private ones), newest first.

    Args:
        commercial_use (bool | Unset):
        cursor (str | Unset):
        derivative_models (bool | Unset):
        domain (DatasetsListDomain | Unset):
        free (bool | Unset):
        language (str | Unset):
        organization (str | Unset):
        page_size (int | Unset):
        q (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedDatasetList
    """

    return sync_detailed(
        client=client,
        commercial_use=commercial_use,
        cursor=cursor,
        derivative_models=derivative_models,
        domain=domain,
        free=free,
        language=language,
        organization=organization,
        page_size=page_size,
        q=q,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    commercial_use: bool | Unset = UNSET,
    cursor: str | Unset = UNSET,
    derivative_models: bool | Unset = UNSET,
    domain: DatasetsListDomain | Unset = UNSET,
    free: bool | Unset = UNSET,
    language: str | Unset = UNSET,
    organization: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
    q: str | Unset = UNSET,
) -> Response[ErrorEnvelope | PaginatedDatasetList]:
    """Datasets visible to the organization (public ones and its own private ones), newest first.

    Args:
        commercial_use (bool | Unset):
        cursor (str | Unset):
        derivative_models (bool | Unset):
        domain (DatasetsListDomain | Unset):
        free (bool | Unset):
        language (str | Unset):
        organization (str | Unset):
        page_size (int | Unset):
        q (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorEnvelope | PaginatedDatasetList]
    """

    kwargs = _get_kwargs(
        commercial_use=commercial_use,
        cursor=cursor,
        derivative_models=derivative_models,
        domain=domain,
        free=free,
        language=language,
        organization=organization,
        page_size=page_size,
        q=q,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    commercial_use: bool | Unset = UNSET,
    cursor: str | Unset = UNSET,
    derivative_models: bool | Unset = UNSET,
    domain: DatasetsListDomain | Unset = UNSET,
    free: bool | Unset = UNSET,
    language: str | Unset = UNSET,
    organization: str | Unset = UNSET,
    page_size: int | Unset = UNSET,
    q: str | Unset = UNSET,
) -> ErrorEnvelope | PaginatedDatasetList | None:
    """Datasets visible to the organization (public ones and its own private ones), newest first.

    Args:
        commercial_use (bool | Unset):
        cursor (str | Unset):
        derivative_models (bool | Unset):
        domain (DatasetsListDomain | Unset):
        free (bool | Unset):
        language (str | Unset):
        organization (str | Unset):
        page_size (int | Unset):
        q (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorEnvelope | PaginatedDatasetList
    """

    return (
        await asyncio_detailed(
            client=client,
            commercial_use=commercial_use,
            cursor=cursor,
            derivative_models=derivative_models,
            domain=domain,
            free=free,
            language=language,
            organization=organization,
            page_size=page_size,
            q=q,
        )
    ).parsed
