"""Template filters for money in micro-CNY: ``{{ micros|cny }}`` -> ``10.00``, ``|cny6`` -> ``10.000000``."""

from django import template

from billing.money import format_cny

register = template.Library()


@register.filter
def cny(micros: int) -> str:
    return format_cny(int(micros or 0), 2)


@register.filter
def cny6(micros: int) -> str:
    return format_cny(int(micros or 0), 6)
