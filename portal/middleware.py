"""Activate the signed-in user's time zone (default Asia/Shanghai); times are stored in UTC."""

from __future__ import annotations

import zoneinfo
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone


class UserTimezoneMiddleware:
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
