"""Scope check for API tokens: a ``read`` token may only use safe methods."""

from __future__ import annotations

from typing import Any

from rest_framework import permissions
from rest_framework.request import Request

from portal.api.throttling import anonymous_throttle
from portal.choices import TokenScope
from portal.models import ApiToken


class TokenScopePermission(permissions.BasePermission):
    """Refuses (403 ``permission_denied``) unsafe methods for tokens without the ``write`` scope.

    Session-authenticated console users (``request.auth`` is not a token) are not restricted here. A write
    token whose user was demoted to a role that cannot hold one acts as ``read`` (its scope is lowered at
    authentication), so the role table limits tokens too.
    """

    message = "This API token has the read scope only; create a token with the write scope."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken) or request.method in permissions.SAFE_METHODS:
            return True
        return token.scope == TokenScope.WRITE


class IsAuthenticatedThrottled(permissions.IsAuthenticated):
    """``IsAuthenticated`` that counts refused anonymous requests against the anonymous throttle (429)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if super().has_permission(request, view):
            return True
        anonymous_throttle(request)
        return False
