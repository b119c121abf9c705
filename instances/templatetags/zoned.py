"""``|zoned``: a time in the reader's zone, labelled with that zone's offset from UTC (job and instance pages)."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def zoned(value: datetime | None, precision: str = "seconds") -> str:
    """``2026-12-02 18:00:00 UTC+08:00``: ``value`` (aware) in the active time zone (the user's, set by
    ``portal.middleware.UserTimezoneMiddleware``), labelled with its offset — in digits, so it reads the same
    in every language (an abbreviation such as "CST" is ambiguous and English). ``precision="minutes"``
    drops the seconds. ``""`` for no value."""
    if value is None:
        return ""
    local = timezone.localtime(value)
    offset = local.strftime("%z") or "+0000"
    shown = local.strftime("%Y-%m-%d %H:%M" if precision == "minutes" else "%Y-%m-%d %H:%M:%S")
    return f"{shown} UTC{offset[:3]}:{offset[3:5]}"
