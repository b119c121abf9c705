"""Template filters for money in micro-CNY (billing formats money: `billing.money`): ``{{ micros|cny }}`` -> ``10.00``,
``|cny6`` -> ``10.000000``; plus hours/minutes and pretty JSON. Loaded everywhere as ``{% load money %}``."""

from django import template

from billing.money import format_cny

register = template.Library()


@register.filter
def cny(micros: int) -> str:
    return format_cny(int(micros or 0), 2)


@register.filter
def cny6(micros: int) -> str:
    return format_cny(int(micros or 0), 6)


@register.filter
def hours(minutes: int) -> int:
    """Whole hours of a number of minutes (for "lasts 11 h 40 min")."""
    return int(minutes or 0) // 60


@register.filter
def minutes_part(minutes: int) -> int:
    """Minutes left over after whole hours."""
    return int(minutes or 0) % 60


@register.filter
def pretty_json(value: object) -> str:
    """Indented JSON (UTF-8 kept) for showing API payloads in the console."""
    import json

    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
