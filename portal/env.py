"""Typed readers for settings from environment variables.

Each helper returns the default when the variable is unset or empty and raises
``ImproperlyConfigured`` naming the variable when the value cannot be parsed — a typo in production
must stop the process at start, not surface later as a wrong price or a disabled check.
"""

from __future__ import annotations

import ipaddress
import os
from decimal import Decimal, InvalidOperation

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    return value.strip()


def env_str(name: str, default: str | None = None, *, required: bool = False) -> str:
    """String value of ``name``; raises ``ImproperlyConfigured`` if ``required`` and unset."""
    value = _raw(name)
    if value is None:
        if required or default is None:
            raise ImproperlyConfigured(f"environment variable {name} is required")
        return default
    return value


def env_bool(name: str, default: bool) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (case-insensitive); anything else raises."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false)")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Integer value; raises when not an integer or below ``minimum``."""
    value = _raw(name)
    if value is None:
        return default
    try:
        result = int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer") from exc
    if minimum is not None and result < minimum:
        raise ImproperlyConfigured(f"{name}={result} must be >= {minimum}")
    return result


def env_decimal(name: str, default: str) -> Decimal:
    """Exact decimal value (never a float), e.g. ``TRIAL_CREDIT=10.00``; raises when malformed or negative."""
    value = _raw(name) or default
    try:
        result = Decimal(value)
    except InvalidOperation as exc:
        raise ImproperlyConfigured(f"{name}={value!r} is not a decimal number") from exc
    if not result.is_finite() or result < 0:
        raise ImproperlyConfigured(f"{name}={value!r} must be a finite, non-negative number")
    return result


def env_list(name: str, default: list[str]) -> list[str]:
    """Comma-separated list with blanks dropped."""
    value = _raw(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


def env_networks(name: str) -> list[str]:
    """Comma-separated CIDRs (``10.20.0.0/16,fd12:3456::/48``) in their canonical form; raises on a malformed
    one or one with host bits set (``10.0.0.1/8`` is more likely a typo than a network)."""
    networks = []
    for item in env_list(name, []):
        try:
            networks.append(str(ipaddress.ip_network(item)))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {item!r} is not a network ({exc})") from exc
    return networks
