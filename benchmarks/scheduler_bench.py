"""Scheduler benchmark: the pure function and the portal's pass side by side; prints figures, asserts nothing
about time.

Run (pure function only, no Django needed)::

    .venv/bin/python benchmarks/scheduler_bench.py [--runs 7] [--scale 1.0]

With ``DATABASE_URL`` set (PostgreSQL), the portal's real pass (``instances.scheduling_pass.schedule_pass``,
the body of ``instances_schedule`` without the Celery enqueue of the launch tasks) is measured too, on a
throw-away test database (``test_<name>``, created with the migrations and dropped at the end)::

    DATABASE_URL=postgres://postgres@127.0.0.1:5435/postgres .venv/bin/python benchmarks/scheduler_bench.py

``--scale`` shrinks every size (nodes, queue) for a quick check that it works (e.g. ``--scale 0.05``);
``--only TEXT`` runs the cases whose label contains TEXT; ``--profile`` prints the slowest statements and a
profile of one more portal pass per queue; ``--phases`` prints where a warm pass goes (each step, the commit,
the WAL written, and the server's own time per statement where ``pg_stat_statements`` is loaded); ``--no-gc``
turns Python's cyclic garbage collector off (on a loaded machine its full collections over the benchmark's own
large inventories added up to 1.5 s to some mixed-queue passes: compare both).

Cases (8-GPU H100 nodes; 1 % cordoned):

1. A 1024-GPU bare-metal gang (128 whole nodes) on 2,000 and on 20,000 nodes, once in blocks of 125 nodes
   (no single block can hold it: it spans blocks) and once in blocks of 250 (one block holds it). Pure:
   index built per call (``place``) and on an index kept between calls. Portal: a cold pass (index rebuilt
   from the database) and warm passes (index kept; the gang is put back in the queue between runs).
2. A mixed queue of 10,000 requests (1-8 GPU containers, 8-64 GPU gangs, 8-256 GPU bare metal; 50
   organizations, 4 in 5 with a 512-GPU quota) on 2,000 nodes, a third partly used: placements per second
   and the statements of one pass.
3. Worst cases: a nearly full cluster (95 % of nodes partly used, the mixed queue), and many small jobs ahead
   of a big gang (5,000 one-GPU requests, a 1024-GPU gang, 5,000 more).
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from instances.scheduler import (
    CapacityIndex,
    NodeView,
    Placement,
    PlacementRequest,
    QueueResult,
    place,
    schedule_queue,
)

GPU = "H100-80G-SXM"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def inventory(nodes: int = 2000, per_block: int = 125, *, partly_used: float = 0.0, seed: int = 1) -> list[NodeView]:
    rng = random.Random(seed)
    out = []
    for i in range(nodes):
        free = 8 if rng.random() >= partly_used else rng.randint(0, 7)
        state = "cordoned" if rng.random() < 0.01 else "ready"
        out.append(NodeView(f"node-{i:05d}", GPU, 8, free, f"block-{i // per_block:03d}", state))  # type: ignore[arg-type]
    return out


def mixed_queue(n: int = 10_000, seed: int = 2) -> list[PlacementRequest]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        r = rng.random()
        if r < 0.6:
            gpus, mode = rng.choice([1, 1, 2, 4, 3]), "container"
        elif r < 0.9:
            gpus, mode = 8 * rng.choice([1, 2, 4, 8]), "container"
        else:
            gpus, mode = 8 * rng.choice([1, 2, 16, 32]), "bare_metal"
        out.append(
            PlacementRequest(
                f"req-{i}",
                f"org-{rng.randrange(50)}",
                GPU,
                gpus,
                mode,  # type: ignore[arg-type]
                T0 + timedelta(seconds=i),
            )
        )
    return out


def small_then_gang(n: int = 10_000) -> list[PlacementRequest]:
    half = n // 2
    out = [
        PlacementRequest(f"s{i}", f"org-{i % 50}", GPU, 1, "container", T0 + timedelta(seconds=i))  # type: ignore[arg-type]
        for i in range(half)
    ]
    out.append(PlacementRequest("gang", "org-big", GPU, 1024, "bare_metal", T0 + timedelta(seconds=half)))  # type: ignore[arg-type]
    out += [
        PlacementRequest(f"t{i}", f"org-{i % 50}", GPU, 1, "container", T0 + timedelta(seconds=half + 1 + i))  # type: ignore[arg-type]
        for i in range(half)
    ]
    return out


ONLY = ""  # --only: a substring of the case labels to run


QUOTAS: dict[str, int | None] = {f"org-{i}": (512 if i % 5 else None) for i in range(50)}


def median_ms(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3, out


def sized(n: int, scale: float) -> int:
    return max(16, int(n * scale))


def gang_cases(scale: float) -> list[tuple[str, int, int]]:
    return [c for c in _gang_cases(scale) if ONLY in c[0]]


def _gang_cases(scale: float) -> list[tuple[str, int, int]]:
    return [
        (
            f"gang 1024 GPUs, {sized(n, scale):,} nodes, {per} per block ({'fits' if per >= 128 else 'spans'})",
            sized(n, scale),
            per,
        )
        for n in (2000, 20_000)
        for per in (125, 250)
    ]


def queue_cases(scale: float) -> list[tuple[str, list[NodeView], list[PlacementRequest]]]:
    return [c for c in _queue_cases(scale) if ONLY in c[0]]


def _queue_cases(scale: float) -> list[tuple[str, list[NodeView], list[PlacementRequest]]]:
    n, q = sized(2000, scale), sized(10_000, scale)
    return [
        (f"mixed queue {q:,} on {n:,} nodes (1/3 partly used)", inventory(n, partly_used=0.33), mixed_queue(q)),
        (
            f"nearly full: mixed queue {q:,} on {n:,} nodes (95% partly used)",
            inventory(n, partly_used=0.95),
            mixed_queue(q),
        ),
        (
            f"{q // 2:,} one-GPU jobs, a 1024-GPU gang, {q // 2:,} more, on {n:,} free nodes",
            inventory(n),
            small_then_gang(q),
        ),
    ]


# --- pure function ------------------------------------------------------------------------------------------
def pure(runs: int, scale: float) -> None:
    print("== pure function (instances.scheduler) ==")
    gang = PlacementRequest("gang", "org", GPU, 1024, "bare_metal", T0)  # type: ignore[arg-type]
    for label, n, per in gang_cases(scale):
        nodes = inventory(n, per)
        fresh, res = median_ms(lambda nodes=nodes: place(gang, nodes), runs)
        index = CapacityIndex(nodes)

        def kept(index: CapacityIndex = index) -> QueueResult:
            out = schedule_queue([gang], index, {}, {})
            for p in out.placements:
                for name, gpus in p.assignments:
                    index.release(name, gpus)
            return out

        warm, _ = median_ms(kept, runs)
        ok = isinstance(res, Placement)
        print(
            f"{label}: index built per call {fresh:.2f} ms, kept index {warm:.3f} ms; "
            f"{'placed, block=' + str(res.block) if ok else 'not placed'}"
        )
    for label, nodes, queue in queue_cases(scale):
        ms, res = median_ms(lambda nodes=nodes, queue=queue: schedule_queue(queue, nodes, QUOTAS, {}), runs)
        print(
            f"{label}: {ms:.1f} ms per pass, {len(res.placements)} placed, {len(res.waiting)} waiting -> "
            f"{len(res.placements) / ms * 1e3:,.0f} placements/s"
        )


# --- portal pass ------------------------------------------------------------------------------------------
def phase_breakdown(ids: list[int], runs: int, requeue: Callable[[list[int]], None]) -> None:
    """``--phases``: where a warm pass over the queue ``ids`` goes, averaged over ``runs`` passes (each after
    ``requeue``): wall time of each step of ``schedule_pass`` (its module's functions wrapped for the
    measurement), of the commit, the WAL the pass writes, and, where the server has ``pg_stat_statements``
    loaded (``shared_preload_libraries``), the server's own execution time per statement (the floor that no
    client-side change removes)."""
    import functools

    from django.db import connection, transaction

    from instances import scheduler, scheduling_pass, transitions

    spent: dict[str, float] = {}
    restore: list[tuple[Any, str, Any]] = []

    def wrap(module: Any, name: str, label: str) -> None:
        original = getattr(module, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t

        restore.append((module, name, original))
        setattr(module, name, timed)

    steps = ["_queue_read", "_inventory_current", "_quotas_and_usage", "_requests_of", "_nodes_lock"]
    for name in steps:
        wrap(scheduling_pass, name, name.strip("_"))
    wrap(scheduler, "schedule_queue", "schedule_queue (the pure function)")
    wrap(transitions, "_moves_apply_pg", "the write statement (client side)")
    wrap(scheduling_pass, "_write_waiting", "write_waiting")
    with connection.cursor() as cur:
        try:
            with transaction.atomic():  # a refused CREATE EXTENSION leaves the connection usable
                cur.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                cur.execute("SELECT pg_stat_statements_reset()")
            stats = True
        except Exception:  # not loaded on this server: client-side figures only
            stats = False
    wrap(connection, "commit", "commit")
    total, wal = 0.0, 0
    try:
        for _ in range(runs):
            requeue(ids)
            with connection.cursor() as cur:
                cur.execute("SELECT pg_current_wal_lsn()")
                (lsn,) = cur.fetchone()
            t = time.perf_counter()
            scheduling_pass.schedule_pass()
            total += time.perf_counter() - t
            with connection.cursor() as cur:
                cur.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", [lsn])
                wal += int(cur.fetchone()[0])
    finally:
        for module, name, original in restore:
            if module is connection:
                del connection.commit  # back to the class's method
            else:
                setattr(module, name, original)
    print(f"  phases of a warm pass (mean of {runs}): total {total / runs * 1e3:.1f} ms, WAL {wal / runs / 1e6:.2f} MB")
    for label, seconds in spent.items():
        print(f"    {label:40s} {seconds / runs * 1e3:7.1f} ms")
    if stats:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT query, calls, total_exec_time FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid "
                "WHERE d.datname = current_database() AND query NOT LIKE '%%pg_stat_statements%%' "
                "AND query NOT LIKE '%%pg_current_wal_lsn%%' AND query NOT LIKE 'UPDATE%%placement%%IN%%' "
                "ORDER BY total_exec_time DESC LIMIT 8"
            )
            print("  server time per pass (pg_stat_statements; foreign-key checks run at commit):")
            for query, calls, ms in cur.fetchall():
                print(f"    {ms / runs:7.2f} ms  x{calls / runs:<6.0f} {' '.join(query.split())[:90]}")


def portal(runs: int, scale: float, profile: bool = False, phases: bool = False) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    name = connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    print(f"== portal pass (instances.scheduling_pass.schedule_pass) on {connection.vendor} ({name}) ==")
    try:
        from instances.models import GpuQuota, GpuType, Instance, Node
        from instances.scheduling_pass import inventory_cache_clear, schedule_pass
        from portal.models import Organization

        settings.INSTANCES_DEFAULT_GPU_QUOTA = None  # as the pure figures: no quota but QUOTAS
        call_command("seed_gpu_catalog", verbosity=0)
        h100 = GpuType.objects.get(code=GPU)
        orgs = {f"org-{i}": Organization.objects.create(name=f"org-{i}", slug=f"org-{i}") for i in range(50)}
        orgs["org-big"] = orgs["org"] = Organization.objects.create(name="big", slug="big")
        busy_org = Organization.objects.create(name="busy", slug="busy")
        GpuQuota.objects.bulk_create([GpuQuota(organization=orgs[k], gpus=q) for k, q in QUOTAS.items() if q])

        def load(nodes: list[NodeView], queue: list[PlacementRequest]) -> list[int]:
            Instance.objects.all().delete()
            Node.objects.all().delete()
            Node.objects.bulk_create(
                [Node(name=n.name, gpu_type=h100, gpus=n.gpus_total, block=n.block, state=n.state) for n in nodes],
                batch_size=5000,
            )
            # the GPUs already in use: one running instance per partly used node
            Instance.objects.bulk_create(
                [
                    Instance(
                        organization=busy_org,
                        name=f"busy-{n.name}",
                        kind="interactive",
                        gpu_type=h100,
                        gpu_count=n.gpus_total - n.gpus_free,
                        status="running",
                        placement=[[n.name, n.gpus_total - n.gpus_free]],
                    )
                    for n in nodes
                    if n.gpus_free < n.gpus_total
                ],
                batch_size=5000,
            )
            made = Instance.objects.bulk_create(
                [
                    Instance(
                        organization=orgs[r.org_id],
                        name=r.request_id,
                        kind="interactive",
                        gpu_type=h100,
                        gpu_count=r.gpus,
                        mode=r.mode,
                        status="scheduling",
                        submitted_at=r.submitted_at,
                    )
                    for r in queue
                ],
                batch_size=5000,
            )
            return [i.pk for i in made]

        def requeue(ids: list[int]) -> None:
            """Put the instances a pass placed back in the queue, as if the same requests arrived again (the
            waiting ones keep their positions and reasons, so a pass writes only what changed)."""
            Instance.objects.filter(pk__in=ids).exclude(status="scheduling").update(status="scheduling", placement=[])

        def measure(ids: list[int], *, warm: bool) -> tuple[float, int, int]:
            """Median ms of a pass over the queue ``ids`` (put back in the queue before each run), its
            statements and placements. Cold: the kept index is dropped before each run; warm: it is kept
            (built by one pass first), and each run finds the previous run's placements released."""
            inventory_cache_clear()
            if warm:
                requeue(ids)
                schedule_pass()  # builds the index kept for the runs
            times, statements, placed = [], 0, 0
            for _ in range(runs):
                requeue(ids)
                if not warm:
                    inventory_cache_clear()
                with CaptureQueriesContext(connection) as ctx:
                    t = time.perf_counter()
                    placed = len(schedule_pass())
                    times.append(time.perf_counter() - t)
                statements = len(ctx.captured_queries)
            return statistics.median(times) * 1e3, statements, placed

        gang = PlacementRequest("gang", "org", GPU, 1024, "bare_metal", T0)  # type: ignore[arg-type]
        for label, n, per in gang_cases(scale):
            ids = load(inventory(n, per), [gang])
            cold, st_cold, placed = measure(ids, warm=False)
            warm, st_warm, _ = measure(ids, warm=True)
            print(
                f"{label}: cold pass (index rebuilt) {cold:.1f} ms / {st_cold} statements; "
                f"warm pass (index kept) {warm:.1f} ms / {st_warm} statements; placed {placed}"
            )
        for label, nodes, queue in queue_cases(scale):
            ids = load(nodes, queue)
            inventory_cache_clear()
            with CaptureQueriesContext(connection) as ctx:
                t = time.perf_counter()
                placed = len(schedule_pass())
                first = (time.perf_counter() - t) * 1e3
            print(
                f"{label}: first pass (index built, every position written) {first:.0f} ms, "
                f"{len(ctx.captured_queries)} statements, {placed} placed -> "
                f"{placed / first * 1e3:,.0f} placements/s"
            )
            cold, st_cold, placed = measure(ids, warm=False)
            warm, st_warm, placed = measure(ids, warm=True)
            print(
                f"{label}: again, index rebuilt {cold:.0f} ms, index kept {warm:.0f} ms per pass ({st_warm} "
                f"statements), {placed} placed -> {placed / warm * 1e3:,.0f} placements/s with the index kept, "
                f"{placed / cold * 1e3:,.0f} rebuilt"
            )
            if phases:
                phase_breakdown(ids, runs, requeue)
            if profile:
                import cProfile
                import pstats

                requeue(ids)
                timed: list[tuple[float, str]] = []

                def timer(
                    execute: Any,
                    sql: str,
                    params: Any,
                    many: bool,
                    context: Any,
                    timed: list[tuple[float, str]] = timed,
                ) -> Any:
                    t = time.perf_counter()
                    try:
                        return execute(sql, params, many, context)
                    finally:
                        timed.append(((time.perf_counter() - t) * 1e3, sql[:90]))

                with cProfile.Profile() as prof, connection.execute_wrapper(timer):
                    schedule_pass()
                for ms, sql in sorted(timed, reverse=True)[:8]:
                    print(f"  {ms:7.2f} ms  {sql}")
                pstats.Stats(prof).sort_stats(os.environ.get("BENCH_SORT", "cumtime")).print_stats(25)
    finally:
        inventory_cache_clear()
        connection.creation.destroy_test_db(name, verbosity=0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per figure (the median is printed)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every size (quick check: 0.05)")
    ap.add_argument("--pure-only", action="store_true", help="skip the portal pass even with DATABASE_URL")
    ap.add_argument("--profile", action="store_true", help="print a profile of one warm portal pass per queue")
    ap.add_argument(
        "--phases",
        action="store_true",
        help="print where a warm portal pass goes per queue: each step, the commit, WAL, and the server's "
        "time per statement where pg_stat_statements is loaded",
    )
    ap.add_argument("--only", default="", help="run only the cases whose label contains this text")
    ap.add_argument(
        "--no-gc",
        action="store_true",
        help="disable Python's cyclic garbage collector: its full collections over this process's "
        "large inventories added pauses of up to 1.5 s to some passes",
    )
    args = ap.parse_args()
    global ONLY
    ONLY = args.only
    if args.no_gc:
        gc.disable()
    pure(args.runs, args.scale)
    if os.environ.get("DATABASE_URL") and not args.pure_only:
        portal(args.runs, args.scale, args.profile, args.phases)
    else:
        print("(set DATABASE_URL to a PostgreSQL server to measure the portal pass)")


if __name__ == "__main__":
    main()
