"""Template filters for money in micro-CNY (billing formats money: `billing.money`): ``{{ micros|cny }}`` -> ``10.00``,
``|cny6`` -> ``10.000000``; plus hours/minutes and pretty JSON. Loaded everywhere as ``{% load money %}``."""

from django import template

from billing.money import format_cny

register = template.Library()


@register.filter
def cny(micros: int) -> str:
    """Grouped by thousands in the active language's format: ``1,234.50``."""
    return _grouped(format_cny(int(micros or 0), 2))


@register.filter
def cny6(micros: int) -> str:
    return _grouped(format_cny(int(micros or 0), 6))


def _grouped(text: str) -> str:
    """A fixed-point amount string with the active locale's thousands separator (no rounding: the places of
    ``format_cny`` are kept)."""
    from decimal import Decimal

    from django.utils.formats import number_format

    places = len(text.split(".", 1)[1]) if "." in text else 0
    return number_format(Decimal(text), decimal_pos=places, use_l10n=True, force_grouping=True)


@register.filter
def hours(minutes: int) -> int:
    """Whole hours of a number of minutes (for "lasts 11 h 40 min")."""
    return int(minutes or 0) // 60


@register.filter
def minutes_part(minutes: int) -> int:
    """Minutes left over after whole hours."""
    return int(minutes or 0) % 60


@register.filter
def duration_minutes(minutes: int | None) -> str:
    """Minutes as "16 h 28 min" / "16 小时 28 分" (the active language), see ``portal.lib.durations``."""
    from portal.lib.durations import minutes_text

    return minutes_text(minutes)


@register.filter
def pretty_json(value: object) -> str:
    """Indented JSON (UTF-8 kept) for showing API payloads in the console."""
    import json

    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
