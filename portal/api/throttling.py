"""Per-token request throttling (``DEFAULT_THROTTLE_RATES['token']``)."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

from portal.models import ApiToken


class TokenRateThrottle(SimpleRateThrottle):
    """Limits each API token (or, for session users, each user; anonymous: each IP) to the ``token`` rate."""

    scope = "token"

    def get_cache_key(self, request: Request, view: Any) -> str:
        if isinstance(request.auth, ApiToken):
            ident = f"t{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"u{request.user.pk}"
        else:
            ident = f"ip{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AnonymousRateThrottle(SimpleRateThrottle):
    """Limits unauthenticated requests and failed token attempts per client IP (the ``anon`` rate)."""

    scope = "anon"

    def get_cache_key(self, request: Request, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


def anonymous_throttle(request: Request) -> None:
    """Count one unauthenticated request of the client; raise ``Throttled`` (429) past the ``anon`` rate.

    Called where DRF would answer 401 before its throttles run (a missing or bad token), so anonymous and
    bad-token traffic is limited too.
    """
    throttle = AnonymousRateThrottle()
    if not throttle.allow_request(request, None):  # type: ignore[arg-type]  # the view is not used by this throttle
        raise exceptions.Throttled(throttle.wait())
