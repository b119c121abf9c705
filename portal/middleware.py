"""Request middleware: refuse NUL / oversized query values up front; activate the signed-in user's time zone
(default Asia/Shanghai; times are stored in UTC)."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.utils import timezone


class UserTimezoneMiddleware:
    """Activates the signed-in user's time zone for the request (default ``PORTAL_DEFAULT_TIMEZONE``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = getattr(request.user, "timezone", None) or settings.PORTAL_DEFAULT_TIMEZONE
        try:
            timezone.activate(zoneinfo.ZoneInfo(name))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            timezone.activate(zoneinfo.ZoneInfo(settings.PORTAL_DEFAULT_TIMEZONE))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()


MAX_PARAM_CHARS = 2048  # one query-string value; cursors, slugs and filters are far shorter


def request_problem(request: HttpRequest) -> str | None:
    """Why a request's path or query string cannot be served (a NUL character, an oversized value), or None.

    A NUL reaches PostgreSQL as a query parameter and fails there (a 500); refusing it up front gives every
    view, console and API alike, the same clear 400.
    """
    if "\x00" in request.path:
        return "The URL must not contain the NUL character (%00)."
    for key, values in request.GET.lists():
        if "\x00" in key or any("\x00" in v for v in values):
            return f"The query parameter {key.replace(chr(0), '')[:40]!r} must not contain the NUL character (%00)."
        if len(key) > 200 or any(len(v) > MAX_PARAM_CHARS for v in values):
            return f"The query parameter {key[:40]!r} is longer than {MAX_PARAM_CHARS} characters."
    return None


class RequestSanityMiddleware:
    """Answers 400 to a request whose URL or query string carries a NUL or an oversized value (see
    :func:`request_problem`): the API's error envelope under ``/api/``, a plain page elsewhere."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = request_problem(request)
        if problem is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse(
                {"error": {"code": "invalid_parameter", "message": problem, "details": None}}, status=400
            )
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
