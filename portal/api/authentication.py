"""Bearer-token authentication for the partner API (``Authorization: Bearer gpp_<prefix>_<secret>``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from portal.api.throttling import anonymous_throttle
from portal.services import api_token_authenticate


class ApiTokenAuthentication(authentication.BaseAuthentication):
    """Authenticates a request by a hashed personal API token; ``request.auth`` is the ``ApiToken``.

    No header: not this scheme (other authenticators may apply). A malformed, unknown or revoked token,
    or one whose user is inactive or no longer a member of the token's organization (the check lives in
    ``portal.services.api_token_authenticate``): 401 ``authentication_failed`` (per RFC 6750 §3 the
    response carries ``WWW-Authenticate``). Failed attempts count against the anonymous throttle (429).
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: use 'Bearer <token>'.")
        token = api_token_authenticate(parts[1])
        if token is None:
            anonymous_throttle(request)  # guessing tokens costs the same budget as anonymous requests
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return f'{self.keyword} realm="api"'


class ApiTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "portal.api.authentication.ApiTokenAuthentication"
    name = "bearerToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "bearerFormat": "gpp_<prefix>_<secret>"}
