"""Which months have a statement: from the organization's first month (its creation, or its first ledger
transaction if that is earlier — backfilled or imported history) to the current month, in the user's time zone.

The wallet page offers exactly these months; a statement for a month before the first is refused (console
404, API 404 ``no_statement``) rather than shown as an empty month the organization never lived.
"""

from __future__ import annotations

import zoneinfo
from datetime import datetime

from django.db.models import Min
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import LedgerTransaction
from billing.statements import month_bounds
from portal.models import Organization

MAX_MONTHS_OFFERED = 24  # the wallet page links at most this many, newest first


class StatementBeforeFirstMonth(ValueError):
    """A statement was asked for a month before the organization's first month."""


def statement_first_month(*, organization: Organization, tz_name: str) -> tuple[int, int]:
    """(year, month) of the organization's first month in ``tz_name``. One query."""
    first_tx = LedgerTransaction.objects.filter(organization=organization).aggregate(m=Min("created_at"))["m"]
    start = min(t for t in (organization.created_at, first_tx) if t is not None)
    local = start.astimezone(zoneinfo.ZoneInfo(tz_name))
    return local.year, local.month


def statement_months(
    *, organization: Organization, tz_name: str, now: datetime | None = None, limit: int = MAX_MONTHS_OFFERED
) -> list[tuple[int, int]]:
    """(year, month) pairs from the current month back to the first month (at most ``limit``), newest first."""
    here = (now or timezone.now()).astimezone(zoneinfo.ZoneInfo(tz_name))
    fy, fm = statement_first_month(organization=organization, tz_name=tz_name)
    current, first = here.year * 12 + here.month - 1, fy * 12 + fm - 1
    return [(m // 12, m % 12 + 1) for m in range(current, max(first, current - limit + 1) - 1, -1)]


def statement_month_check(*, organization: Organization, year: int, month: int, tz_name: str) -> None:
    """Raises :class:`StatementBeforeFirstMonth` (a sentence naming the first month) for a month before the
    organization's first month; returns None otherwise (the month's own bounds are checked by the builder)."""
    month_bounds(year, month, tz_name)  # a month that does not exist is a ValueError of its own (400)
    fy, fm = statement_first_month(organization=organization, tz_name=tz_name)
    if (year, month) < (fy, fm):
        raise StatementBeforeFirstMonth(
            _("%(org)s has statements from %(first)s on; there is none for %(month)s.")
            % {"org": organization.name, "first": f"{fy}-{fm:02d}", "month": f"{year}-{month:02d}"}
        )
