"""Monthly statements: every wallet movement of an organization in a calendar month (in the user's time
zone), with usage lines per instance from the usage records; totals equal the ledger."""

from __future__ import annotations

import csv
import io
import zoneinfo
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Count, Max, Min, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from billing.choices import AccountKind, TransactionKind
from billing.models import LedgerEntry, UsageRecord, UsageWriteOff, VolumeUsage
from billing.money import format_cny
from portal.models import Organization


@dataclass(frozen=True)
class UsageLine:
    instance_id: int
    gpu_type: str
    mode: str
    gpu_count: int
    minutes: int
    amount_micros: int
    first_minute: datetime
    last_minute: datetime


@dataclass(frozen=True)
class WriteOffLine:
    """Minutes of an instance not charged because they began more than the metering lookback before the tick
    that found them (``UsageWriteOff``); ``amount_micros`` is what they would have cost."""

    instance_id: int
    minutes: int
    amount_micros: int
    first_minute: datetime


@dataclass(frozen=True)
class VolumeLine:
    """A volume's storage charged in the month: started hours of ``size_gb`` GB (``VolumeUsage`` rows),
    their full price and the part the balance could not cover."""

    volume_id: int
    name: str
    size_gb: int
    hours: int
    amount_micros: int
    shortfall_micros: int
    first_hour: datetime


@dataclass(frozen=True)
class KindLine:
    kind: str
    label: str
    count: int
    amount_micros: int  # signed: positive adds to the wallet


@dataclass(frozen=True)
class Statement:
    organization: Organization
    year: int
    month: int
    start: datetime
    end: datetime
    opening_micros: int
    closing_micros: int
    by_kind: list[KindLine]
    usage: list[UsageLine]
    usage_total_micros: int
    usage_uncovered_micros: int  # the shortfall: usage the balance could not cover (usage lines − ledger usage)
    write_offs: list[WriteOffLine]
    volumes: list[VolumeLine] = field(default_factory=list)  # storage lines (ledger kind "storage")

    @property
    def net_micros(self) -> int:
        return sum(k.amount_micros for k in self.by_kind)


def month_bounds(year: int, month: int, tz_name: str) -> tuple[datetime, datetime]:
    """[start, end) of a calendar month in ``tz_name`` as aware datetimes. Raises ValueError for a bad month."""
    if not 1 <= month <= 12 or not 2000 <= year <= 2100:
        raise ValueError("month must be 1-12 and year 2000-2100")
    tz = zoneinfo.ZoneInfo(tz_name)
    start = datetime(year, month, 1, tzinfo=tz)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=tz)
    return start, end


def statement_build(*, organization: Organization, year: int, month: int, tz_name: str = "Asia/Shanghai") -> Statement:
    """The organization's statement for one month. ``net`` equals the change of its wallet balance
    (paid + grants, expiries included) over the month, which equals the sum of its ledger entries."""
    start, end = month_bounds(year, month, tz_name)
    entries = LedgerEntry.objects.filter(account__organization=organization)
    opening = entries.filter(transaction__created_at__lt=start).aggregate(s=Sum("amount_micros"))["s"] or 0
    month_entries = entries.filter(transaction__created_at__gte=start, transaction__created_at__lt=end)
    rows = (
        month_entries.values("transaction__kind")
        .annotate(n=Count("transaction", distinct=True), s=Sum("amount_micros"))
        .order_by("transaction__kind")
    )
    labels = dict(TransactionKind.choices)
    by_kind = [
        KindLine(
            r["transaction__kind"], str(labels.get(r["transaction__kind"], r["transaction__kind"])), r["n"], r["s"]
        )
        for r in rows
    ]
    usage_rows = (
        UsageRecord.objects.filter(organization=organization, minute__gte=start, minute__lt=end)
        .values("instance_id", "gpu_type", "mode", "gpu_count")
        .annotate(minutes=Count("id"), amount=Sum("amount_micros"), first=Min("minute"), last=Max("minute"))
        .order_by("instance_id", "gpu_type")
    )
    usage = [
        UsageLine(
            r["instance_id"], r["gpu_type"], r["mode"], r["gpu_count"], r["minutes"], r["amount"], r["first"], r["last"]
        )
        for r in usage_rows
    ]
    usage_total = sum(u.amount_micros for u in usage)
    usage_ledger = -sum(k.amount_micros for k in by_kind if k.kind == TransactionKind.USAGE)
    closing = opening + sum(k.amount_micros for k in by_kind)
    write_offs = [
        WriteOffLine(r["instance_id"], r["minutes"], r["amount"], r["first"])
        for r in UsageWriteOff.objects.filter(organization=organization, first_minute__gte=start, first_minute__lt=end)
        .values("instance_id")
        .annotate(minutes=Sum("minutes"), amount=Sum("amount_micros"), first=Min("first_minute"))
        .order_by("instance_id")
    ]
    volumes = [
        VolumeLine(r["volume_id"], r["name"], r["size_gb"], r["hours"], r["amount"], r["short"], r["first"])
        for r in VolumeUsage.objects.filter(organization=organization, hour__gte=start, hour__lt=end)
        .values("volume_id", "size_gb")
        .annotate(
            name=Max("volume_name"),
            hours=Count("id"),
            amount=Sum("amount_micros"),
            short=Sum("shortfall_micros"),
            first=Min("hour"),
        )
        .order_by("volume_id", "size_gb")
    ]
    return Statement(
        organization,
        year,
        month,
        start,
        end,
        opening,
        closing,
        by_kind,
        usage,
        usage_total,
        usage_total - usage_ledger,
        write_offs,
        volumes,
    )


def statement_csv(statement: Statement, *, names: dict[int, str] | None = None, app_calls: Sequence[Any] = ()) -> str:
    """The statement as CSV (UTF-8, amounts in CNY with 6 decimals). Usage lines are negative (charged); the
    shortfall line (usage the balance could not cover) and write-off lines are positive: not charged.
    ``names``: instance id -> "legal-tiny (job 7)" (``billing.line_labels.instance_names``), appended to the
    usage and write-off items; ``app_calls``: ``billing.line_labels.AppCallLine`` rows, one line per app."""
    names = names or {}

    def item(instance_id: int) -> str:
        name = names.get(instance_id)
        return f"instance {instance_id}: {name}" if name else f"instance {instance_id}"

    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["section", "item", "detail", "quantity", "amount_cny"])
    w.writerow(["balance", "opening", statement.start.isoformat(), "", format_cny(statement.opening_micros, 6)])
    for k in statement.by_kind:
        w.writerow(["ledger", k.kind, k.label, k.count, format_cny(k.amount_micros, 6)])
    for u in statement.usage:
        w.writerow(
            [
                "usage",
                item(u.instance_id),
                f"{u.gpu_count} x {u.gpu_type} ({u.mode})",
                f"{u.minutes} min",
                format_cny(-u.amount_micros, 6),
            ]
        )
    if statement.usage_uncovered_micros:
        w.writerow(
            [
                "usage",
                "shortfall",
                "usage the balance could not cover (not charged)",
                "",
                format_cny(statement.usage_uncovered_micros, 6),
            ]
        )
    for x in statement.write_offs:
        w.writerow(
            [
                "write-off",
                item(x.instance_id),
                "older than the metering lookback (not charged)",
                f"{x.minutes} min",
                format_cny(x.amount_micros, 6),
            ]
        )
    for v in statement.volumes:
        volume = f"volume {v.volume_id} {v.name}"
        w.writerow(["storage", volume, f"{v.size_gb} GB", f"{v.hours} h", format_cny(-v.amount_micros, 6)])
        if v.shortfall_micros:
            w.writerow(["storage", "shortfall", f"{volume} (not charged)", "", format_cny(v.shortfall_micros, 6)])
    for a in app_calls:
        w.writerow(["app-call", a.label, "", f"{a.calls} calls", format_cny(-a.amount_micros, 6)])
    w.writerow(["balance", "closing", statement.end.isoformat(), "", format_cny(statement.closing_micros, 6)])
    return out.getvalue()


#: Ledger transaction kinds that charge a wallet for something bought, in the order the wallet chart stacks them.
SPEND_KINDS: tuple[TransactionKind, ...] = (
    TransactionKind.USAGE,
    TransactionKind.STORAGE,
    TransactionKind.APP_CALL,
    TransactionKind.LICENSE_FEE,
    TransactionKind.SPEND,
)
_WALLET_ACCOUNT_KINDS = (AccountKind.WALLET_PAID, AccountKind.CREDIT_GRANT)


@dataclass(frozen=True)
class DayCost:
    """What an organization's wallet was charged on one day, by kind of spend."""

    day: date  # a calendar day in the time zone asked for
    micros_by_kind: dict[str, int]  # every SPEND_KINDS value -> micro-CNY charged that day (≥ 0)

    @property
    def total_micros(self) -> int:
        return sum(self.micros_by_kind.values())


def daily_cost(*, organization: Organization, days: int = 30, tz_name: str = "Asia/Shanghai") -> list[DayCost]:
    """What the organization's wallet was charged per day for the last ``days`` days (today included, in
    ``tz_name``), oldest first, for the wallet chart: one ``DayCost`` per day, days without spend included.

    Computed from the ledger in one grouped query: the debits (negative entries) on the organization's wallet
    accounts (paid balance and credit grants) of transactions of the ``SPEND_KINDS`` (GPU usage, app calls,
    dataset license fees, other spend), by the transaction's day. Credits (a publisher's revenue share, a
    top-up), credit expiries, refunds and staff adjustments are not spend. Amounts are positive micro-CNY.
    """
    tz = zoneinfo.ZoneInfo(tz_name)
    today = timezone.now().astimezone(tz).date()
    first = today - timedelta(days=days - 1)
    rows = (
        LedgerEntry.objects.filter(
            account__organization=organization,
            account__kind__in=_WALLET_ACCOUNT_KINDS,
            amount_micros__lt=0,
            transaction__kind__in=SPEND_KINDS,
            transaction__created_at__gte=datetime(first.year, first.month, first.day, tzinfo=tz),
        )
        .annotate(day=TruncDate("transaction__created_at", tzinfo=tz))
        .values("day", "transaction__kind")
        .annotate(s=Sum("amount_micros"))
        .order_by("day", "transaction__kind")
        .values_list("day", "transaction__kind", "s")
    )
    charged: dict[tuple[date, str], int] = {(day, kind): -s for day, kind, s in rows}
    return [
        DayCost(day, {kind.value: charged.get((day, kind.value), 0) for kind in SPEND_KINDS})
        for day in (first + timedelta(days=i) for i in range(days))
    ]
