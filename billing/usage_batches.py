"""Posting batches of the metering tick: an organization's charged minutes grouped by local month and by the
credit grants valid at them, and the one posting per batch that spends grants first, then the paid balance
(issue 15, items 4 and 5). Both ways of planning a tick — rows in Python (``billing.metering``, SQLite) and
rows in PostgreSQL (``billing.tick_sql``) — go through ``batch_postings``, so their postings and idempotency
keys are the same.
"""

from __future__ import annotations

import bisect
import hashlib
from datetime import UTC, datetime
from typing import Any

from billing.choices import TransactionKind
from billing.ledger import BulkPosting
from billing.memos import memo
from billing.tick_sql import Batch, billing_zone
from portal.audit import audit_log
from portal.models import Organization


def usage_batches(
    rows: dict[int, list[tuple[Any, ...]]], grants: dict[int, list[list[Any]]]
) -> tuple[dict[int, list[Batch]], dict[tuple[int, int, int], tuple[int, str, int]]]:
    """The portable path's batches: per organization, its minutes in time order split at grant expiries and
    local month starts (as ``billing.tick_sql`` splits them in SQL). Returns (batches per organization, batch
    key (organization, month, bucket) per (organization, segment, minute index))."""
    zone = billing_zone()
    by_org: dict[int, list[Batch]] = {}
    batch_of: dict[tuple[int, int, int], tuple[int, str, int]] = {}
    for org, org_rows in rows.items():
        org_rows.sort(key=lambda r: (r[3], r[1], r[2]))
        expiries = sorted({g[2] for g in grants.get(org, [])})
        groups: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        for row in org_rows:
            key = (row[3].astimezone(zone).strftime("%Y%m"), bisect.bisect_right(expiries, row[3]))
            groups.setdefault(key, []).append(row)
            batch_of[(org, row[1], row[2])] = (org, *key)
        by_org[org] = [
            Batch(
                organization_id=org,
                month=month,
                bucket=bucket,
                first=batch[0][3],
                last=batch[-1][3],
                rows=len(batch),
                total_micros=sum(r[9] for r in batch),
                digest=hashlib.sha256(";".join(f"{r[1]}:{r[2]}" for r in batch).encode()).hexdigest()[:40],
            )
            for (month, bucket), batch in groups.items()
        ]
    return by_org, batch_of


def batch_postings(
    batches: dict[int, list[Batch]],
    wallets: dict[int, tuple[int, int]],
    grants: dict[int, list[list[Any]]],
    now: datetime,
    revenue_id: int,
    shortfalls: dict[int, int],
) -> tuple[list[BulkPosting], dict[tuple[int, str, int], str], int]:
    """Per organization, per batch in time order, one posting that takes grants valid at the batch's minutes
    (earliest expiry first), then paid, then adds the rest to ``shortfalls`` (micro-CNY per organization) with
    an audit row. ``grants`` and ``wallets`` balances are spent in place. Returns (postings, posting key per
    batch (organization, month, bucket), micro-CNY charged)."""
    now_month = now.astimezone(billing_zone()).strftime("%Y%m")
    postings: list[BulkPosting] = []
    key_of: dict[tuple[int, str, int], str] = {}
    charged = 0
    for org, org_batches in batches.items():
        org_grants = grants.get(org, [])
        paid_account, paid = wallets[org]
        shortfall_total = 0
        for batch in sorted(org_batches, key=lambda b: b.first):
            first, last, total = batch.first, batch.last, batch.total_micros
            legs: list[tuple[int, int]] = []
            left = total
            for grant in org_grants:
                if left == 0:
                    break
                if grant[2] > first and grant[1] > 0:
                    take = min(left, grant[1])
                    grant[1] -= take
                    left -= take
                    legs.append((grant[0], -take))
            if left and paid:
                take = min(left, paid)
                paid -= take
                left -= take
                legs.append((paid_account, -take))
            covered = total - left
            shortfall_total += left
            key = f"usage:{org}:{first.astimezone(UTC):%Y%m%d%H%M%S}:{batch.digest}"
            key_of[(org, batch.month, batch.bucket)] = key
            if covered == 0:
                continue
            legs.append((revenue_id, covered))
            metadata: dict[str, Any] = {
                "records": batch.rows,
                "first_minute": first.isoformat(),
                "last_minute": last.isoformat(),
            }
            if left:
                metadata["shortfall_micros"] = left
            postings.append(
                BulkPosting(
                    idempotency_key=key,
                    kind=TransactionKind.USAGE,
                    organization_id=org,
                    memo=memo("gpu_usage" if not left else "gpu_usage_uncovered"),
                    metadata=metadata,
                    created_at=now if batch.month == now_month else last,
                    legs=tuple(legs),
                )
            )
            charged += covered
        wallets[org] = (paid_account, paid)
        if shortfall_total:
            shortfalls[org] = shortfalls.get(org, 0) + shortfall_total
            audit_log(
                action="billing.usage_shortfall",
                organization=Organization(pk=org),
                extra={"shortfall_micros": shortfall_total},
            )
    return postings, key_of, charged
