"""Exact money helpers. The ledger stores integer micro-CNY (1 CNY = 1,000,000 micros); no float ever.

Rounding is half-up (``ROUND_HALF_UP``), as in the design's domain rules.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

MICROS_PER_UNIT = 1_000_000
_MICRO = Decimal("0.000001")


class MoneyError(ValueError):
    """An amount that cannot be represented exactly in micro-CNY (too many decimals, not a number)."""


def to_micros(amount: Decimal | str | int) -> int:
    """Exact conversion of a CNY amount to integer micros; ``Decimal("10.00")`` -> ``10_000_000``.

    Raises ``MoneyError`` for floats, non-numbers, or more than 6 decimal places (no silent rounding).
    """
    if isinstance(amount, float):
        raise MoneyError("floats are not accepted for money; pass a Decimal or a string")
    try:
        value = Decimal(amount)
    except (InvalidOperation, TypeError) as exc:
        raise MoneyError(f"{amount!r} is not a number") from exc
    if not value.is_finite():
        raise MoneyError(f"{amount!r} is not finite")
    micros = value * MICROS_PER_UNIT
    if micros != micros.to_integral_value():
        raise MoneyError(f"{amount} has more than 6 decimal places")
    return int(micros)


def from_micros(micros: int) -> Decimal:
    """Integer micros to a Decimal with exactly 6 places: ``10_000_000`` -> ``Decimal("10.000000")``."""
    return (Decimal(micros) / MICROS_PER_UNIT).quantize(_MICRO)


def round_micros(value: Decimal) -> int:
    """Round an exact Decimal amount of micros half-up to an integer number of micros."""
    return int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))


def format_cny(micros: int, places: int = 2) -> str:
    """Display string with ``places`` decimals rounded half-up: ``10_000_000`` -> ``"10.00"``."""
    quantum = Decimal(1).scaleb(-places)
    return str(from_micros(micros).quantize(quantum, rounding=ROUND_HALF_UP))
