"""Property-based run of the whole OpenAPI schema with schemathesis (every operation, a bounded number of
generated requests each): no server errors, every answer's status code documented, every body matching its
documented schema, in the envelope for errors.

The API runs in-process through its WSGI application on the test database; alice's write token
authenticates every request, so the generated requests reach validation, scoping and the services.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from portal.choices import TokenScope
from portal.services import api_token_create

MAX_EXAMPLES = 8  # per operation; ~40 operations


@pytest.fixture(autouse=True)
def catalog(db: Any) -> Any:
    """The price book, and the test database connection kept open across requests: schemathesis calls the WSGI
    application directly, whose request signals would close it (Django's test client disconnects them too)."""
    from django.core.management import call_command
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    call_command("seed_catalog", verbosity=0)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(alice: Any, alice_org: Any) -> str:
    return api_token_create(user=alice, organization=alice_org, name="fuzz", scope=TokenScope.WRITE).plaintext


def _load() -> Any:
    from django.core.wsgi import get_wsgi_application

    return schemathesis.openapi.from_wsgi("/api/v1/schema?format=json", get_wsgi_application())


schema = _load()  # the schema page is public and reads no table, so it loads at collection time


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
def test_every_operation_answers_as_documented(case: Any, token: str) -> None:
    from schemathesis.checks import not_a_server_error

    case.call_and_validate(
        headers={"Authorization": f"Bearer {token}", "Host": "localhost"},
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )
