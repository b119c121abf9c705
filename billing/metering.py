"""Per-minute metering and the budget guard (Celery beat, every minute).

Rules (DESIGN.md §4, issues 6 and 15):
- billing is per **started minute of use**, counted from the start of each run segment: minute k (0-based)
  of a segment that started at s begins at s + k min, and is charged once it has begun — a segment of
  4 min 24 s pays 5 minutes, 60 s pays 1, 61 s pays 2 (``started_minutes``); each minute at the price in
  force when it began;
- one ``UsageRecord`` per (segment, minute index), enforced by a unique constraint: a duplicate tick, a
  retried task, a worker killed mid-tick or two beat processes charge nothing extra, and minutes missed
  while workers were down are charged by the next tick;
- amounts follow ``billing.pricing.minute_charge_micros`` (cumulative rounding at one price);
- each minute is charged against the credit grants valid at *that* minute (a catch-up batch is split at
  grant expiries), trial credit first, then the paid balance; what neither covers is a shortfall, shown on
  the statement as its own line; the budget guard should stop work before that happens;
- each minute is posted in the month (``BILLING_TIME_ZONE``, the organizations' local zone) in which it was
  used, so a month's usage lines and its ledger usage are the same minutes even when a tick runs late
  across midnight;
- minutes that began more than ``METERING_LOOKBACK_HOURS`` before the tick (workers down longer than that)
  are written off: a ``UsageWriteOff`` row, an audit row and a statement line, never silently dropped. The
  per-shard ``MeteringWatermark`` lets the tick see segments that ended before its window.

The tick is set-based. On PostgreSQL (``billing.tick_sql``) the database does the per-minute work: the tick
counts run segments per organization (one statement), cuts chunks of organizations (``chunk_rows`` minutes at
most per database transaction), and per pass locks the chunk's wallets in id order, reads balances and grants,
plans every due minute — price, run at one price, cumulative rounding, local month, grant bucket — into a
temporary table with one ``CREATE TABLE … AS SELECT``, reads one row per posting batch, posts the batches
(``ledger_post_many``: three statements) and inserts the usage records and cursors with one ``INSERT … SELECT``
each: about a dozen statements per pass whatever the number of minutes, and no row of a minute in Python. A
chunk with minutes to write off or without a price is charged by the portable path instead (``TickResult.
portable_chunks``). The portable path (SQLite) streams segments from the instances app's selector and computes
the minutes in Python with the same rules, batches and idempotency keys (``billing.usage_batches``); a test
runs both on one scenario and compares every row. ``metering_tick(shard=(k, n))`` charges only
organizations with ``id % n == k``, so n workers can share a tick.
"""

from __future__ import annotations

import logging
import zoneinfo
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Mod
from django.utils import timezone

from billing import tick_sql
from billing.bulk import bulk_insert, in_clause
from billing.choices import SystemAccount
from billing.models import (
    CreditGrant,
    LedgerAccount,
    MeteringCursor,
    MeteringWatermark,
    UsageRecord,
    UsageWriteOff,
    Wallet,
)
from billing.pricing import PriceBook, cumulative_charge_micros, minute_charge_micros
from billing.selectors import wallet_balance
from billing.services import IdempotencyKeyReused, ledger_post_many, system_account, wallet_create
from billing.tick_sql import Batch, billing_zone
from billing.usage_batches import batch_postings, usage_batches
from portal.audit import audit_log
from portal.db import db_value, quoted_table, set_based_paths
from portal.models import Organization

log = logging.getLogger(__name__)
MINUTE = timedelta(minutes=1)
MICRO = timedelta(microseconds=1)


def floor_minute(t: datetime) -> datetime:
    return t.replace(second=0, microsecond=0)


def started_minutes(*, started_at: datetime, until: datetime) -> int:
    """Minutes of use begun in [started_at, until): ceil((until - started_at) / 1 min), 0 when empty.
    4 min 24 s → 5; 60 s → 1; 61 s → 2."""
    micros = (until - started_at) // MICRO
    return -(-micros // 60_000_000) if micros > 0 else 0


def segment_until(ended_at: datetime | None, seen_until: datetime | None, now: datetime) -> datetime:
    """How far (exclusive) a tick at ``now`` charges a run segment, before the cap at ``now`` + 1 µs: a closed
    one to its end; an open one to its last sighting inclusive (``seen_until`` + 1 µs: the sighting's minute
    counts), or to ``now`` inclusive without a sighting. Twin: ``billing.tick_sql.plan``'s ``until``;
    ``tests/billing/test_metering_sql.py`` feeds both the same segments."""
    return ended_at if ended_at is not None else (seen_until if seen_until is not None else now) + MICRO


@dataclass
class TickResult:
    """What one tick did: records created, micro-CNY charged, organizations charged, conflicts (chunks left to
    a concurrent tick), shortfalls (micro-CNY the balance could not cover) per organization id, minutes
    written off (older than the lookback), database transactions (chunk passes) used, and, on PostgreSQL,
    chunks charged the portable way because a minute had to be written off or had no price."""

    records: int = 0
    charged_micros: int = 0
    organizations: int = 0
    conflicts: int = 0
    shortfalls: dict[int, int] = field(default_factory=dict)
    written_off_minutes: int = 0
    passes: int = 0
    portable_chunks: int = 0


class _Conflict(Exception):
    """A concurrent tick charged some of these minutes first; the pass rolls back and charges nothing."""


def metering_tick(
    *, now: datetime | None = None, shard: tuple[int, int] = (0, 1), chunk_rows: int = 50_000
) -> TickResult:
    """Charge every begun, not yet charged instance-minute up to ``now``; returns a ``TickResult``.

    ``shard=(k, n)`` limits the tick to organizations with ``id % n == k`` (run n workers with k = 0…n-1).
    ``chunk_rows`` bounds the minutes handled per database transaction (memory and lock time). Safe to run
    concurrently and repeatedly (see the module docstring).
    """
    from instances.selectors import run_segments_overlapping  # the instances app's read interface

    now = now or timezone.now()
    k, n = shard
    window_start = now - timedelta(hours=settings.METERING_LOOKBACK_HOURS)
    shard_key = f"{k}/{n}"
    mark = MeteringWatermark.objects.filter(shard=shard_key).first()
    scan_start = min(window_start, mark.scanned_until - MINUTE) if mark else window_start
    segments = run_segments_overlapping(scan_start, now + MICRO).annotate(segment_id=F("id"))
    if n > 1:
        segments = segments.alias(org_shard=Mod(F("instance__organization_id"), n)).filter(org_shard=k)
    segments = segments.order_by(  # type: ignore[misc]  # organization_id is a value of the selector
        "organization_id", "instance_id", "started_at", "id"
    )

    result = TickResult()
    revenue_id = system_account(SystemAccount.REVENUE).pk
    if set_based_paths():
        _tick_in_sql(segments, now, window_start, revenue_id, chunk_rows, result)
    else:
        _tick_in_python(segments, now, window_start, revenue_id, chunk_rows, result)
    table = quoted_table(MeteringWatermark)
    bulk_insert(
        table,
        [("shard", "text"), ("scanned_until", "timestamptz")],
        [(shard_key, now)],
        suffix=f"ON CONFLICT (shard) DO UPDATE SET scanned_until = excluded.scanned_until"
        f" WHERE {table}.scanned_until < excluded.scanned_until",
    )
    return result


def _tick_in_python(
    segments: Any, now: datetime, window_start: datetime, revenue_id: int, chunk_rows: int, result: TickResult
) -> None:
    """The portable tick (SQLite): segments read into Python in organization chunks, minutes computed here."""
    prices = PriceBook()
    chunk: list[dict[str, Any]] = []
    last_org = None
    for seg in segments.iterator(chunk_size=5000):
        if seg["organization_id"] != last_org and len(chunk) >= max(1, chunk_rows // 4):
            _charge_chunk(chunk, now, window_start, prices, revenue_id, chunk_rows, result)
            chunk = []
        last_org = seg["organization_id"]
        chunk.append(seg)
    if chunk:
        _charge_chunk(chunk, now, window_start, prices, revenue_id, chunk_rows, result)


class _Fallback(Exception):
    """Some minute of the chunk needs the portable path (written off, or without a price): roll back the pass."""


def _tick_in_sql(
    segments: Any, now: datetime, window_start: datetime, revenue_id: int, chunk_rows: int, result: TickResult
) -> None:
    """The PostgreSQL tick: chunks of organizations cut from per-organization segment counts, each charged by
    the statements of ``billing.tick_sql`` (a handful per pass whatever the number of minutes)."""
    sql, params = segments.order_by().query.sql_with_params()
    chunk: list[int] = []
    count = 0
    for org_id, n in tick_sql.organization_sizes(segments_sql=sql, segments_params=params):
        if chunk and count >= max(1, chunk_rows // 4):
            _charge_chunk_sql(chunk, count, segments, now, window_start, revenue_id, chunk_rows, result)
            chunk, count = [], 0
        chunk.append(org_id)
        count += n
    if chunk:
        _charge_chunk_sql(chunk, count, segments, now, window_start, revenue_id, chunk_rows, result)


def _charge_chunk_sql(
    org_ids: list[int],
    segment_count: int,
    segments: Any,
    now: datetime,
    window_start: datetime,
    revenue_id: int,
    chunk_rows: int,
    result: TickResult,
) -> None:
    """Charge a chunk of organizations in SQL passes of at most ``chunk_rows`` minutes; hand the chunk to the
    portable path when a pass finds minutes to write off or without a price."""
    _wallets_ensure(org_ids)
    per_segment = max(1, chunk_rows // segment_count)
    sql, params = segments.order_by().query.sql_with_params()  # the plan filters by organization itself
    while True:
        try:
            with transaction.atomic():
                more = _charge_pass_sql(sql, params, org_ids, now, window_start, revenue_id, per_segment, result)
        except (_Conflict, IdempotencyKeyReused):  # a concurrent tick charged these minutes first
            result.conflicts += 1
            return
        except _Fallback:
            result.portable_chunks += 1
            rows = list(segments.filter(instance__organization_id__in=org_ids))
            _charge_chunk(rows, now, window_start, PriceBook(), revenue_id, chunk_rows, result)
            return
        result.passes += 1
        if not more:
            return


def _charge_pass_sql(
    sql: str,
    params: tuple[Any, ...],
    org_ids: list[int],
    now: datetime,
    window_start: datetime,
    revenue_id: int,
    per_segment: int,
    result: TickResult,
) -> bool:
    """One database transaction of the PostgreSQL tick: lock and read, plan, post, record. Returns True when
    minutes are left over."""
    wallets, grants = _lock_and_read(org_ids, window_start)
    plan = tick_sql.plan(
        segments_sql=sql,
        segments_params=params,
        org_ids=org_ids,
        now=now,
        window_start=window_start,
        per_segment=per_segment,
        zone=billing_zone().key,
        grants=grants,
    )
    if plan.fallback:
        raise _Fallback
    if not plan.batches:
        return False
    by_org: dict[int, list[Batch]] = defaultdict(list)
    for batch in plan.batches:
        by_org[batch.organization_id].append(batch)
    postings, key_of, charged = batch_postings(by_org, wallets, grants, now, revenue_id, result.shortfalls)
    tracked = {paid_account for paid_account, _ in wallets.values()} | {g[0] for gs in grants.values() for g in gs}
    ids = ledger_post_many(postings=postings, tracked_account_ids=tracked) if postings else {}
    rows = sum(b.rows for b in plan.batches)
    if not tick_sql.apply(transaction_ids={k: ids.get(key) for k, key in key_of.items()}, rows=rows):
        raise _Conflict
    result.records += rows
    result.charged_micros += charged
    result.organizations += len(by_org)
    return plan.more


def _wallets_ensure(org_ids: list[int]) -> None:
    """Create the wallets these organizations lack (a tick may be the first to charge one)."""
    missing = set(org_ids) - set(
        Wallet.objects.filter(organization_id__in=org_ids).values_list("organization_id", flat=True)
    )
    for org_id in sorted(missing):
        wallet_create(organization=Organization.objects.get(pk=org_id))


@dataclass
class _Cursor:
    segment_id: int | None
    segment_minutes: int
    last_minute: datetime
    price: int
    index: int


def _charge_chunk(
    segments: list[dict[str, Any]],
    now: datetime,
    window_start: datetime,
    prices: PriceBook,
    revenue_id: int,
    chunk_rows: int,
    result: TickResult,
) -> None:
    """Charge the segments of a few organizations, in passes of at most ``chunk_rows`` minutes each."""
    org_ids = sorted({s["organization_id"] for s in segments})
    _wallets_ensure(org_ids)
    per_segment = max(1, chunk_rows // len(segments))
    while True:
        try:
            with transaction.atomic():
                more = _charge_pass(segments, org_ids, now, window_start, prices, revenue_id, per_segment, result)
        except (_Conflict, IdempotencyKeyReused):  # a concurrent tick charged these minutes first
            result.conflicts += 1
            return
        result.passes += 1
        if not more:
            return


def _charge_pass(
    segments: list[dict[str, Any]],
    org_ids: list[int],
    now: datetime,
    window_start: datetime,
    prices: PriceBook,
    revenue_id: int,
    per_segment: int,
    result: TickResult,
) -> bool:
    """One database transaction: lock, read, compute, write. Returns True when minutes are left over."""
    wallets, grants = _lock_and_read(org_ids, window_start)
    cursors = _cursors_read([s["instance_id"] for s in segments])
    rows: dict[int, list[tuple[Any, ...]]] = defaultdict(list)  # org -> usage rows
    write_offs: list[tuple[Any, ...]] = []
    changed: dict[int, _Cursor] = {}
    more = False
    waiting: set[int] = set()  # instances with an earlier segment left unfinished by this pass
    for seg in segments:
        iid, seg_id, start = seg["instance_id"], seg["segment_id"], seg["started_at"]
        if iid in waiting:  # charging a later segment first would move the cursor past the earlier one
            continue
        cur = changed.get(iid) or cursors.get(iid)
        if cur is None:
            done = 0
        elif cur.segment_id == seg_id:
            done = cur.segment_minutes
        elif cur.last_minute >= start:  # an older segment, or clock-minute cursor (segment unknown)
            done = started_minutes(
                started_at=start, until=cur.last_minute + (MINUTE if cur.segment_id is None else MICRO)
            )
        else:
            done = 0
        end = min(segment_until(seg["ended_at"], seg["seen_until"], now), now + MICRO)
        total = started_minutes(started_at=start, until=end)
        if done >= total:
            continue
        too_old = min(total, started_minutes(started_at=start, until=window_start))
        if done < too_old:  # began before the lookback: written off, visibly
            price = prices.at(seg["gpu_type"], seg["mode"], start + done * MINUTE, seg["tier"]) or 0
            minutes = too_old - done
            write_offs.append(
                (
                    seg["organization_id"],
                    iid,
                    seg_id,
                    done,
                    start + done * MINUTE,
                    minutes,
                    cumulative_charge_micros(price_per_gpu_hour_micros=price, gpus=seg["gpu_count"], minutes=minutes),
                    now,
                )
            )
            done = too_old
            cur = _Cursor(seg_id, done, start + (done - 1) * MINUTE, -1, 0)
            changed[iid] = cur
        last = min(total, done + per_segment)
        if last < total:
            more = True
            waiting.add(iid)
        for index in range(done, last):
            minute = start + index * MINUTE
            price_or_none = prices.at(seg["gpu_type"], seg["mode"], minute, seg["tier"])
            if price_or_none is None:
                log.error(
                    "no price for %s/%s at %s: instance %s not charged", seg["gpu_type"], seg["mode"], minute, iid
                )
                break
            price = price_or_none
            run = cur.index + 1 if cur is not None and cur.price == price else 1
            amount = minute_charge_micros(price_per_gpu_hour_micros=price, gpus=seg["gpu_count"], minute_index=run)
            rows[seg["organization_id"]].append(
                (iid, seg_id, index, minute, seg["gpu_type"], seg["mode"], seg["gpu_count"], price, run, amount)
            )
            cur = _Cursor(seg_id, index + 1, minute, price, run)
            changed[iid] = cur
    if not rows and not write_offs:
        return False
    by_org, batch_of = usage_batches(rows, grants)
    postings, key_of, charged = batch_postings(by_org, wallets, grants, now, revenue_id, result.shortfalls)
    tracked = {paid_account for paid_account, _ in wallets.values()} | {g[0] for gs in grants.values() for g in gs}
    ids = ledger_post_many(postings=postings, tracked_account_ids=tracked) if postings else {}
    usage = [
        (org, *row, ids.get(key_of[batch_of[(org, row[1], row[2])]]))
        for org, org_rows in rows.items()
        for row in org_rows
    ]
    inserted = bulk_insert(
        quoted_table(UsageRecord),
        [
            ("organization_id", "bigint"),
            ("instance_id", "bigint"),
            ("segment_id", "bigint"),
            ("minute_index", "integer"),
            ("minute", "timestamptz"),
            ("gpu_type", "text"),
            ("mode", "text"),
            ("gpu_count", "integer"),
            ("price_per_gpu_hour_micros", "bigint"),
            ("price_minute_index", "integer"),
            ("amount_micros", "bigint"),
            ("transaction_id", "bigint"),
        ],
        usage,
        suffix="ON CONFLICT (segment_id, minute_index) DO NOTHING",
        returning="id",
    )
    if len(inserted) != len(usage):
        raise _Conflict
    bulk_insert(
        quoted_table(MeteringCursor),
        [
            ("instance_id", "bigint"),
            ("segment_id", "bigint"),
            ("segment_minutes", "integer"),
            ("last_minute", "timestamptz"),
            ("price_per_gpu_hour_micros", "bigint"),
            ("price_minute_index", "integer"),
        ],
        [(iid, c.segment_id, c.segment_minutes, c.last_minute, c.price, c.index) for iid, c in changed.items()],
        suffix="ON CONFLICT (instance_id) DO UPDATE SET segment_id = excluded.segment_id, segment_minutes ="
        " excluded.segment_minutes, last_minute = excluded.last_minute, price_per_gpu_hour_micros ="
        " excluded.price_per_gpu_hour_micros, price_minute_index = excluded.price_minute_index",
    )
    if write_offs:
        _write_offs_record(write_offs, result)
    result.records += len(usage)
    result.charged_micros += charged
    result.organizations += len(rows)
    return more


def _lock_and_read(
    org_ids: list[int], earliest: datetime
) -> tuple[dict[int, tuple[int, int]], dict[int, list[list[Any]]]]:
    """Lock the wallets of ``org_ids`` in id order (one statement) and read, per organization, (paid account
    id, paid balance) and its unexpired grants with money left that expire after ``earliest``, as
    [account id, balance, expires_at] in spending order."""
    where, params = in_clause("w.organization_id", org_ids)
    lock = " FOR UPDATE OF w" if connection.features.has_select_for_update_of else ""
    accounts = quoted_table(LedgerAccount)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT w.organization_id, w.paid_account_id, a.balance_micros FROM {quoted_table(Wallet)} w"
            f" JOIN {accounts} a ON a.id = w.paid_account_id WHERE {where} ORDER BY w.id{lock}",
            params,
        )
        wallets = {int(org): (int(acc), int(bal)) for org, acc, bal in cursor.fetchall()}
        cursor.execute(
            "SELECT w.organization_id, g.account_id, ga.balance_micros, g.expires_at"
            f" FROM {quoted_table(CreditGrant)} g JOIN {quoted_table(Wallet)} w ON w.id = g.wallet_id"
            f" JOIN {accounts} ga ON ga.id = g.account_id"
            f" WHERE {where} AND g.expired_at IS NULL AND ga.balance_micros > 0 AND g.expires_at > %s"
            " ORDER BY g.expires_at, g.id",
            [*params, db_value(CreditGrant, "expires_at", earliest - MINUTE)],
        )
        grants: dict[int, list[list[Any]]] = defaultdict(list)
        for org, account, balance, expires in cursor.fetchall():
            if isinstance(expires, str):  # SQLite returns text from a raw query
                expires = CreditGrant._meta.get_field("expires_at").to_python(expires)
            if timezone.is_naive(expires):
                expires = timezone.make_aware(expires, zoneinfo.ZoneInfo("UTC"))
            grants[int(org)].append([int(account), int(balance), expires])
    return wallets, grants


def _cursors_read(instance_ids: list[int]) -> dict[int, _Cursor]:
    """The metering cursors of these instances (one statement)."""
    where, params = in_clause("instance_id", sorted(set(instance_ids)))
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT instance_id, segment_id, segment_minutes, last_minute, price_per_gpu_hour_micros,"
            f" price_minute_index FROM {quoted_table(MeteringCursor)} WHERE {where}",
            params,
        )
        rows = cursor.fetchall()
    field = MeteringCursor._meta.get_field("last_minute")
    out = {}
    for iid, seg, minutes, last, price, index in rows:
        if not isinstance(last, datetime):  # SQLite gives text
            last = field.to_python(last)
        if timezone.is_naive(last):
            last = timezone.make_aware(last, zoneinfo.ZoneInfo("UTC"))
        out[int(iid)] = _Cursor(seg, minutes, last, price, index)
    return out


def _write_offs_record(write_offs: list[tuple[Any, ...]], result: TickResult) -> None:
    inserted = bulk_insert(
        quoted_table(UsageWriteOff),
        [
            ("organization_id", "bigint"),
            ("instance_id", "bigint"),
            ("segment_id", "bigint"),
            ("first_minute_index", "integer"),
            ("first_minute", "timestamptz"),
            ("minutes", "integer"),
            ("amount_micros", "bigint"),
            ("created_at", "timestamptz"),
        ],
        write_offs,
        suffix="ON CONFLICT (segment_id, first_minute_index) DO NOTHING",
        returning="id",
    )
    if len(inserted) != len(write_offs):
        raise _Conflict
    for org, iid, seg_id, index, first, minutes, amount, _ in write_offs:
        result.written_off_minutes += minutes
        audit_log(
            action="billing.usage_written_off",
            organization=Organization(pk=org),
            staff=True,
            extra={
                "instance_id": iid,
                "segment_id": seg_id,
                "first_minute_index": index,
                "first_minute": first.isoformat(),
                "minutes": minutes,
                "amount_micros": amount,
                "reason": f"began more than {settings.METERING_LOOKBACK_HOURS} h before the tick",
            },
        )
    log.warning("metering wrote off %s minutes older than the lookback", sum(w[5] for w in write_offs))


# --- budget guard -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Burn:
    """An organization's spend rate from its running instances, in micro-CNY per minute (exact Decimal
    would be nicer for display; integer micros per minute rounded up is what the guard needs)."""

    per_minute_micros: int
    instance_ids: tuple[int, ...]


def burn_rates(*, now: datetime | None = None, organization: Organization | None = None) -> dict[int, Burn]:
    """Spend per minute of every organization with running instances (set-based), or of one organization
    (the dashboard asks for its own only)."""
    from instances.selectors import run_segments_overlapping

    now = now or timezone.now()
    current = floor_minute(now)
    rows = run_segments_overlapping(current, current + MINUTE).filter(ended_at__isnull=True)
    if organization is not None:
        rows = rows.filter(instance__organization_id=organization.pk)
    segments = list(rows)
    prices = PriceBook()
    per_org: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for s in segments:
        price = prices.at(s["gpu_type"], s["mode"], current, s["tier"]) or 0
        per_org[s["organization_id"]].append((s["instance_id"], -(-price * s["gpu_count"] // 60)))
    return {org: Burn(sum(c for _, c in items), tuple(i for i, _ in items)) for org, items in per_org.items()}


def budget_guard(*, now: datetime | None = None) -> list[int]:
    """Stop (after a final checkpoint) every running instance of organizations whose balance cannot cover
    ``BUDGET_GUARD_MINUTES`` more minutes; open or clear low-balance notices. Returns stopped instance ids.
    """
    from instances.reasons import Reason
    from instances.selectors import instances_for_org
    from instances.services import instance_stop

    stopped: list[int] = []
    rates = burn_rates(now=now)
    for org_id, burn in rates.items():
        organization = Organization.objects.get(pk=org_id)
        balance = wallet_balance(organization=organization, now=now).total_micros
        if balance < burn.per_minute_micros * settings.BUDGET_GUARD_MINUTES:
            for instance in instances_for_org(organization).filter(pk__in=burn.instance_ids):
                interactive = instance.kind == "interactive"  # its disk is kept; there is no checkpoint
                instance_stop(
                    instance=instance, reason=Reason("budget_stop_interactive" if interactive else "budget_stop")
                )
                stopped.append(instance.pk)
            audit_log(
                action="billing.budget_guard_stop",
                organization=organization,
                extra={
                    "balance_micros": balance,
                    "burn_per_minute_micros": burn.per_minute_micros,
                    "instances": list(burn.instance_ids),
                },
            )
    return stopped
