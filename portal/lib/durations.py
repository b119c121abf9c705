"""Durations in words of the active language: ``16 h 28 min`` in English, ``16 小时 28 分`` in Chinese."""

from __future__ import annotations

from django.utils.translation import gettext


def minutes_text(minutes: int | None) -> str:
    """``minutes`` (whole, ≥ 0) as hours and minutes: "16 h 28 min" / "16 小时 28 分", "45 min" / "45 分钟";
    "∞" for ``None`` (a balance that lasts for ever)."""
    if minutes is None:
        return "∞"
    hours, rest = divmod(int(minutes), 60)
    if hours:
        return gettext("%(h)d h %(m)d min") % {"h": hours, "m": rest}
    return gettext("%(m)d min") % {"m": rest}
