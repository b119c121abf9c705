"""The metering tick's PostgreSQL statements: each organization chunk's minutes planned, priced and rounded by
the database (issue 15, item 8).

One pass of a chunk (one transaction, the chunk's wallets locked by the caller) is:

1. ``CREATE TEMP TABLE … AS SELECT`` — every begun, uncharged minute of the chunk's run segments, one row per
   (segment, minute index), computed from the instances app's selector (embedded as a subquery, so billing
   reads instances only through it), the metering cursors and the price book: the price in force when the
   minute began, the run of minutes at one price (``price_minute_index``, continuing the cursor's run), the
   charge ``cumulative(k) - cumulative(k - 1)`` in integer arithmetic (the rule of ``billing.pricing``), the
   organization's local month and the number of its grant expiries at or before the minute (the posting
   batch, as ``billing.metering`` splits it);
2. one ``SELECT`` of the pass's flags and one of its batches — per (organization, month, grant bucket): first
   and last minute, rows, total and the digest of the batch's (segment, minute index) pairs, the same key the
   portable path derives;
3. after the caller posted the batches (``ledger_post_many``), one ``INSERT … SELECT`` of the usage records
   (``ON CONFLICT DO NOTHING``: a shortfall of rows means a concurrent tick got there first) and one upsert of
   the cursors from the same table.

The amounts, keys and cursors are those of the portable path in ``billing.metering`` (tests run both);
minutes the portable path must handle row by row — older than the lookback (written off) or without a price
— make the pass report ``fallback`` and the caller charges that chunk the portable way.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection

from billing.choices import PriceTier
from billing.models import GpuPrice, MeteringCursor, UsageRecord
from portal.db import quoted_table

_MICRO = timedelta(microseconds=1)
TEMP = "billing_tick_minutes"  # a temporary table: private to the connection, dropped at the end of the pass

# ceil((b - a) / 1 minute) in exact integer microseconds, 0 when b <= a (``metering.started_minutes``)
_STARTED = (
    "(CASE WHEN {b} > {a} THEN ((EXTRACT(EPOCH FROM ({b} - {a})) * 1000000)::bigint + 59999999) / 60000000 ELSE 0 END)"
)


def billing_zone() -> zoneinfo.ZoneInfo:
    """The organizations' local time zone for posting usage (``BILLING_TIME_ZONE``, default Asia/Shanghai)."""
    return zoneinfo.ZoneInfo(getattr(settings, "BILLING_TIME_ZONE", "Asia/Shanghai"))


def _started(a: str, b: str) -> str:
    return _STARTED.format(a=a, b=b)


@dataclass(frozen=True)
class Batch:
    """The minutes of one organization posted together: same local month, same grants valid. ``total_micros``
    is their full price; ``digest`` hashes their (segment, minute index) pairs in (minute, segment, index)
    order."""

    organization_id: int
    month: str
    bucket: int
    first: datetime
    last: datetime
    rows: int
    total_micros: int
    digest: str


@dataclass(frozen=True)
class Plan:
    """What a pass found: ``fallback`` when some minute needs the portable path (nothing planned is used):
    a write-off, a missing price, or an instance of a discounted tier (``PriceTier.INTERRUPTIBLE``: its
    per-minute price is the price book's less the tier discount in force, which the portable path applies),
    ``more`` when segments have minutes beyond this pass's share, and the batches to post."""

    fallback: bool
    more: bool
    batches: list[Batch]


def plan(
    *,
    segments_sql: str,
    segments_params: tuple[Any, ...],
    org_ids: list[int],
    now: datetime,
    window_start: datetime,
    per_segment: int,
    zone: str,
    grants: dict[int, list[list[Any]]],
) -> Plan:
    """Fill the pass's temporary table and read its flags and batches (four statements). ``segments_sql`` is
    the selector's SQL (``run_segments_overlapping`` with ``segment_id``); ``grants`` as read under the lock
    ({organization: [[account id, balance, expires_at], …]})."""
    # twin of billing.metering.segment_until: an open segment up to its last sighting (inclusive) when it has one
    until = "LEAST(COALESCE(s.ended_at, s.seen_until + interval '1 microsecond', %s), %s)"
    expiries = sorted({(org, g[2]) for org, gs in grants.items() for g in gs})
    sql = f"""
CREATE TEMP TABLE {TEMP} AS
WITH seg AS (
    SELECT s.segment_id, s.instance_id, s.organization_id, s.gpu_type, s.mode, s.gpu_count, s.started_at,
        s.tier <> %s AS discounted, {until} AS until
    FROM ({segments_sql}) s WHERE s.organization_id = ANY(%s)
), span AS (
    SELECT seg.*, c.price_per_gpu_hour_micros AS cur_price, c.price_minute_index AS cur_index,
        CASE WHEN c.instance_id IS NULL THEN 0
             WHEN c.segment_id = seg.segment_id THEN c.segment_minutes
             WHEN c.last_minute >= seg.started_at THEN {
        _started(
            "seg.started_at",
            "c.last_minute + CASE WHEN c.segment_id IS NULL THEN interval '1 minute' ELSE interval '1 microsecond' END",
        )
    }
             ELSE 0 END AS done,
        {_started("seg.started_at", "seg.until")} AS total,
        LEAST({_started("seg.started_at", "seg.until")}, {_started("seg.started_at", "%s::timestamptz")}) AS too_old
    FROM seg LEFT JOIN {quoted_table(MeteringCursor)} c ON c.instance_id = seg.instance_id
), capped AS (
    SELECT span.*, LEAST(total, done + %s) AS last FROM span WHERE done < total
), todo AS (  -- a later segment of an instance waits while an earlier one has minutes beyond this pass
    SELECT * FROM (
        SELECT c.*, bool_or(c.last < c.total) OVER (PARTITION BY c.instance_id ORDER BY c.started_at, c.segment_id
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS waits,
            count(*) OVER (PARTITION BY c.instance_id) AS n_segments
        FROM capped c
    ) w WHERE w.waits IS NOT TRUE
), book AS (
    SELECT gpu_type, mode, effective_from AS price_from, price_per_gpu_hour_micros AS price,
        lead(effective_from) OVER (PARTITION BY gpu_type, mode ORDER BY effective_from, id) AS price_until
    FROM {quoted_table(GpuPrice)}
), expiry AS (
    SELECT o, array_agg(e) AS es FROM unnest(%s::bigint[], %s::timestamptz[]) AS g(o, e) GROUP BY o
), first_price AS (  -- the common case: one segment to charge, one price over its minutes (no window needed)
    SELECT t.*, b.price AS price0, t.n_segments = 1 AND b.price IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM book c WHERE c.gpu_type = t.gpu_type AND c.mode = t.mode
                AND c.price_from > t.started_at + t.done * interval '1 minute'
                AND c.price_from <= t.started_at + (t.last - 1) * interval '1 minute') AS simple
    FROM todo t LEFT JOIN book b ON b.gpu_type = t.gpu_type AND b.mode = t.mode
        AND t.started_at + t.done * interval '1 minute' >= b.price_from
        AND (b.price_until IS NULL OR t.started_at + t.done * interval '1 minute' < b.price_until)
), simple AS (
    SELECT t.*, i AS minute_index, t.started_at + i * interval '1 minute' AS minute, t.price0 AS price,
        CASE WHEN t.cur_price = t.price0 THEN t.cur_index ELSE 0 END + (i - t.done) + 1 AS run
    FROM first_price t CROSS JOIN LATERAL generate_series(t.done, t.last - 1) AS i WHERE t.simple
), minutes AS (  -- the rest: price per minute, runs continued across segments and restarted at price changes
    SELECT t.*, i AS minute_index, t.started_at + i * interval '1 minute' AS minute
    FROM first_price t CROSS JOIN LATERAL generate_series(t.done, t.last - 1) AS i WHERE NOT t.simple
), priced AS (
    SELECT m.*, b.price,
        lag(b.price, 1, m.cur_price) OVER w AS prev_price
    FROM minutes m LEFT JOIN book b ON b.gpu_type = m.gpu_type AND b.mode = m.mode
        AND m.minute >= b.price_from AND (b.price_until IS NULL OR m.minute < b.price_until)
    WINDOW w AS (PARTITION BY m.instance_id ORDER BY m.started_at, m.segment_id, m.minute_index)
), islands AS (
    SELECT p.*, sum(CASE WHEN p.price IS DISTINCT FROM p.prev_price THEN 1 ELSE 0 END) OVER (
        PARTITION BY p.instance_id ORDER BY p.started_at, p.segment_id, p.minute_index) AS island
    FROM priced p
), runs AS (
    SELECT i.*, row_number() OVER (PARTITION BY i.instance_id, i.island
        ORDER BY i.started_at, i.segment_id, i.minute_index)
        + CASE WHEN i.island = 0 THEN i.cur_index ELSE 0 END AS run
    FROM islands i
), charged AS (
    SELECT organization_id, instance_id, segment_id, minute_index, minute, gpu_type, mode, gpu_count, started_at,
        price, run, done, too_old, last, total, discounted FROM simple
    UNION ALL
    SELECT organization_id, instance_id, segment_id, minute_index, minute, gpu_type, mode, gpu_count, started_at,
        price, run, done, too_old, last, total, discounted FROM runs
)
SELECT r.organization_id, r.instance_id, r.segment_id, r.minute_index, r.minute, r.gpu_type, r.mode,
    r.gpu_count, r.started_at, r.price, r.run,
    (r.price * r.gpu_count * r.run + 30) / 60 - (r.price * r.gpu_count * (r.run - 1) + 30) / 60 AS amount,
    to_char(r.minute AT TIME ZONE %s, 'YYYYMM') AS month,
    COALESCE((SELECT count(*) FROM unnest(x.es) AS e WHERE e <= r.minute), 0)::int AS bucket,
    r.done < r.too_old AS old, r.last < r.total AS capped, r.discounted
FROM charged r LEFT JOIN expiry x ON x.o = r.organization_id
"""
    end = now + _MICRO
    params = [
        PriceTier.ON_DEMAND,
        end,
        end,
        *segments_params,
        org_ids,
        window_start,
        window_start,
        per_segment,
        [o for o, _ in expiries],
        [e for _, e in expiries],
        zone,
    ]
    with connection.cursor() as cursor:
        # The planner guesses 1,000 minutes per segment (generate_series) and would spend seconds compiling
        # the statement with JIT for a few milliseconds of work; off for this transaction only.
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        cursor.execute(
            "SELECT count(*), COALESCE(bool_or(old OR price IS NULL OR discounted), false),"
            " COALESCE(bool_or(capped), false)"
            f" FROM {TEMP}"
        )
        rows, fallback, more = cursor.fetchone()
        if fallback or not rows:
            cursor.execute(f"DROP TABLE {TEMP}")
            return Plan(bool(fallback), False, [])
        cursor.execute(
            "SELECT organization_id, month, bucket, min(minute), max(minute), count(*), sum(amount),"
            " left(encode(sha256(convert_to(string_agg(segment_id::text || ':' || minute_index::text, ';'"
            f" ORDER BY minute, segment_id, minute_index), 'UTF8')), 'hex'), 40) FROM {TEMP}"
            " GROUP BY organization_id, month, bucket"
        )
        batches = [
            Batch(int(org), month, int(bucket), first, last, int(rows), int(total), digest)
            for org, month, bucket, first, last, rows, total, digest in cursor.fetchall()
        ]
    return Plan(False, bool(more), batches)


def apply(*, transaction_ids: dict[tuple[int, str, int], int | None], rows: int) -> bool:
    """Insert the planned usage records, each with its batch's transaction id (None where nothing was
    covered), and move the cursors; drop the temporary table. Returns False (nothing else done) when fewer
    than ``rows`` records went in: a concurrent tick charged some of these minutes first, and the caller must
    roll back."""
    keys = list(transaction_ids.items())
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quoted_table(UsageRecord)} (organization_id, instance_id, segment_id, minute_index,"
            " minute, gpu_type, mode, gpu_count, price_per_gpu_hour_micros, price_minute_index, amount_micros,"
            " transaction_id)"
            " SELECT m.organization_id, m.instance_id, m.segment_id, m.minute_index, m.minute, m.gpu_type, m.mode,"
            f" m.gpu_count, m.price, m.run, m.amount, b.txn FROM {TEMP} m"
            " LEFT JOIN unnest(%s::bigint[], %s::text[], %s::int[], %s::bigint[]) AS b(o, month, bucket, txn)"
            " ON b.o = m.organization_id AND b.month = m.month AND b.bucket = m.bucket"
            " ON CONFLICT (segment_id, minute_index) DO NOTHING",
            [[k[0] for k, _ in keys], [k[1] for k, _ in keys], [k[2] for k, _ in keys], [t for _, t in keys]],
        )
        if cursor.rowcount != rows:
            return False
        cursor.execute(
            f"INSERT INTO {quoted_table(MeteringCursor)} (instance_id, segment_id, segment_minutes, last_minute,"
            " price_per_gpu_hour_micros, price_minute_index)"
            " SELECT DISTINCT ON (instance_id) instance_id, segment_id, minute_index + 1, minute, price, run"
            f" FROM {TEMP} ORDER BY instance_id, started_at DESC, segment_id DESC, minute_index DESC"
            " ON CONFLICT (instance_id) DO UPDATE SET segment_id = excluded.segment_id, segment_minutes ="
            " excluded.segment_minutes, last_minute = excluded.last_minute, price_per_gpu_hour_micros ="
            " excluded.price_per_gpu_hour_micros, price_minute_index = excluded.price_minute_index"
        )
        cursor.execute(f"DROP TABLE {TEMP}")
    return True


def organization_sizes(*, segments_sql: str, segments_params: tuple[Any, ...]) -> list[tuple[int, int]]:
    """(organization id, run segments) of the tick's scan, by organization id (one statement): how the tick
    cuts its chunks without reading every segment into Python."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT organization_id, count(*) FROM ({segments_sql}) s GROUP BY organization_id ORDER BY 1",
            segments_params,
        )
        return [(int(org), int(n)) for org, n in cursor.fetchall()]
