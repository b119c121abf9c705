"""What each wallet line is for, in words: a GPU usage line names its instances and training jobs, an app call
its app. Read-only; used by the wallet's ledger table and the statements (page and CSV).

A usage transaction charges a batch of instance-minutes (``UsageRecord.transaction``), so its subject is
read from those records; the instances' names come from ``instances.selectors.instance_labels`` (a documented
hook upward: billing keeps no foreign key into the instances app). App-call transactions already carry the
app's name in their memo and its slug in their metadata.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Sum
from django.utils.translation import gettext as _

from billing.choices import TransactionKind
from billing.models import LedgerEntry, LedgerTransaction, UsageRecord
from portal.models import Organization


def instance_names(instance_ids: Iterable[int]) -> dict[int, str]:
    """``{instance id: "legal-tiny (job 7)"}`` — the instance's name and its training job, or ``(instance 12)``
    for an interactive one; an id that no longer exists is absent. One query."""
    from instances.selectors import instance_labels  # hook upward (ARCHITECTURE.md)

    out = {}
    for pk, (name, job) in instance_labels(instance_ids).items():
        out[pk] = (
            _("%(name)s (job %(id)d)") % {"name": name, "id": job}
            if job is not None
            else _("%(name)s (instance %(id)d)") % {"name": name, "id": pk}
        )
    return out


def ledger_line_labels(entries: Iterable[LedgerEntry]) -> dict[int, str]:
    """``{transaction id: description}`` for the usage lines among ``entries`` ("GPU usage: legal-tiny (job 7)");
    other kinds keep their memo. Two queries whatever the number of lines."""
    usage_ids = {e.transaction_id for e in entries if e.transaction.kind == TransactionKind.USAGE}
    if not usage_ids:
        return {}
    pairs = set(
        UsageRecord.objects.filter(transaction_id__in=usage_ids).values_list("transaction_id", "instance_id").distinct()
    )
    names = instance_names(i for _t, i in pairs)
    by_tx: dict[int, list[int]] = {}
    for tx, inst in sorted(pairs):
        by_tx.setdefault(tx, []).append(inst)
    return {
        tx: _("GPU usage: %(subjects)s") % {"subjects": ", ".join(names.get(i, f"#{i}") for i in insts)}
        for tx, insts in by_tx.items()
    }


@dataclass(frozen=True)
class AppCallLine:
    """App calls of one app in a period: ``label`` is the ledger memo ("App call: Contract review"),
    ``calls`` transactions and ``amount_micros`` charged (positive)."""

    label: str
    calls: int
    amount_micros: int


def app_call_lines(*, organization: Organization, start: datetime, end: datetime) -> list[AppCallLine]:
    """The organization's app calls in ``[start, end)`` grouped by app, largest amount first. One query."""
    rows = (
        LedgerTransaction.objects.filter(
            organization=organization, kind=TransactionKind.APP_CALL, created_at__gte=start, created_at__lt=end
        )
        .values("memo")
        .annotate(n=Count("id", distinct=True))
        .order_by("memo")
    )
    counts = {r["memo"]: r["n"] for r in rows}
    amounts = (
        LedgerEntry.objects.filter(
            transaction__organization=organization,
            transaction__kind=TransactionKind.APP_CALL,
            transaction__created_at__gte=start,
            transaction__created_at__lt=end,
            account__organization=organization,
        )
        .values("transaction__memo")
        .annotate(s=Sum("amount_micros"))
    )
    spent = {r["transaction__memo"]: -int(r["s"] or 0) for r in amounts}
    lines = [AppCallLine(memo, n, spent.get(memo, 0)) for memo, n in counts.items()]
    return sorted(lines, key=lambda line: (-line.amount_micros, line.label))
