"""Fixtures of the webhook tests: a receiver on loopback (pytest-httpserver, allowed by the test setting
``APP_ALLOW_HTTP_ENDPOINTS``), alice's endpoint subscribed to every event type, API clients."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def loopback(settings: Any) -> None:
    """Plain-http loopback endpoints allowed (the development and test setting, as for app endpoints)."""
    settings.APP_ALLOW_HTTP_ENDPOINTS = True


@pytest.fixture
def hook(alice: Any, alice_org: Any, httpserver: Any, loopback: None) -> tuple[Any, str]:
    """alice's endpoint ``<httpserver>/hook`` subscribed to every event type: ``(endpoint, secret)``."""
    from portal.webhooks.choices import EventType
    from portal.webhooks.services import webhook_endpoint_create

    return webhook_endpoint_create(
        organization=alice_org,
        user=alice,
        url=httpserver.url_for("/hook"),
        event_types=list(EventType.values),
        description="alice's receiver",
    )


@pytest.fixture
def api_client(db: Any) -> Any:
    """``api_client(user, organization)``: an API client with the strongest token ``user`` may hold there."""
    from rest_framework.test import APIClient

    from portal.choices import TokenScope
    from portal.services import api_token_create

    def make(user: Any, organization: Any) -> APIClient:
        client = APIClient()
        from portal.permissions import Action, allowed_actions

        # the strongest token the user's role may hold (members: read only)
        scope = (
            TokenScope.WRITE
            if Action.TOKENS_CREATE_WRITE in allowed_actions(user=user, organization=organization)
            else TokenScope.READ
        )
        token = api_token_create(user=user, organization=organization, name="t", scope=scope)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.plaintext}")
        return client

    return make
