"""Run one seed: set the world up, apply its events one by one under the virtual clock, check every invariant
after every step, and digest the final ledger, usage rows, cursors and instance histories. Everything a seed
writes is rolled back at its end (one outer transaction), so seeds never see each other and the database is
left as it was found. Also the shrinker: the shortest event list that still breaks the same invariant."""

from __future__ import annotations

import contextlib
import hashlib
import json
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.simulation.events import Event, Refusal, event_apply, events_draw, world_populate
from tests.simulation.invariants import INVARIANTS, Invariant
from tests.simulation.world import World, boundaries, run_on_commit_now, world_start

ENGINES = ("portable", "sql")


@dataclass(frozen=True)
class Failure:
    """The first invariant broken: its name, the step (0 = the set-up, k = after the k-th event) and why."""

    invariant: str
    step: int
    message: str


@dataclass
class SeedResult:
    """What a seed's run did: its events, the invariant checks made, the digest of the final state, and the
    first failure (None when every check held)."""

    seed: int
    engine: str
    events: list[Event]
    checks: int = 0
    digest: str = ""
    failure: Failure | None = None
    log: list[str] = field(default_factory=list)


def _sequences_reset() -> None:
    """On PostgreSQL, restart every table's id sequence after its highest id: sequences do not roll back, so
    without this a seed's ids (and the idempotency keys and account codes that contain them) would depend on
    the seeds run before it. SQLite's ``sqlite_sequence`` rolls back with the transaction."""
    from django.apps import apps
    from django.core.management.color import no_style
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for sql in connection.ops.sequence_reset_sql(no_style(), apps.get_models()):
            cursor.execute(sql)


def _engine(engine: str) -> contextlib.AbstractContextManager[None]:
    from portal.db import portable_paths

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {', '.join(ENGINES)}")
    return portable_paths() if engine == "portable" else contextlib.nullcontext()


def state_digest() -> str:
    """SHA-256 (hex, 16 digits) of the final ledger (transactions with their entries, balances), usage rows,
    write-offs, metering cursors and instance histories, by natural keys, in a fixed order."""
    from billing.models import LedgerAccount, LedgerEntry, LedgerTransaction, MeteringCursor, UsageRecord, UsageWriteOff
    from instances.models import Instance, InstanceTransition
    from portal.marketplace.models import AppCall

    names = dict(Instance.objects.values_list("pk", "name"))
    entries: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for txn, code, amount in LedgerEntry.objects.order_by("account__code", "amount_micros").values_list(
        "transaction_id", "account__code", "amount_micros"
    ):
        entries[txn].append((code, amount))
    state: dict[str, Any] = {
        "transactions": sorted(
            (t.idempotency_key, t.kind, t.organization_id, t.memo, t.created_at.isoformat(), entries[t.pk])
            for t in LedgerTransaction.objects.all()
        ),
        "balances": sorted(LedgerAccount.objects.values_list("code", "balance_micros")),
        "usage": sorted(
            (names.get(r[0], "?"), *r[1:])
            for r in UsageRecord.objects.values_list(
                "instance_id",
                "minute_index",
                "minute",
                "gpu_type",
                "mode",
                "gpu_count",
                "price_per_gpu_hour_micros",
                "price_minute_index",
                "amount_micros",
                "transaction__idempotency_key",
            )
        ),
        "write_offs": sorted(
            (names.get(w[0], "?"), *w[1:])
            for w in UsageWriteOff.objects.values_list("instance_id", "first_minute_index", "minutes", "amount_micros")
        ),
        "cursors": sorted(
            tuple(v for k, v in row.items() if k not in ("id", "segment_id", "instance_id"))
            for row in MeteringCursor.objects.values()
        ),
        "histories": sorted(
            (names[t[0]], *t[1:])
            for t in InstanceTransition.objects.values_list(
                "instance_id", "from_status", "to_status", "reason_code", "created_at"
            )
        ),
        "calls": sorted(AppCall.objects.values_list("idempotency_key", "caller_id", "status", "price_micros")),
    }
    text = json.dumps(state, default=str, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _check(world: World, step: int, invariants: Sequence[Invariant], result: SeedResult) -> bool:
    for invariant in invariants:
        result.checks += 1
        broken = invariant(world)
        if broken:
            result.failure = Failure(invariant.__name__, step, "; ".join(broken[:3]))
            return False
    return True


@contextlib.contextmanager
def _rolled_back() -> Iterator[None]:
    from django.db import transaction

    with transaction.atomic():
        try:
            yield
        finally:
            transaction.set_rollback(True)


def run_seed(
    seed: int,
    *,
    engine: str = "portable",
    events: int | list[Event] = 300,
    verbose: Callable[[str], None] | None = None,
    invariants: Sequence[Invariant] = INVARIANTS,
) -> SeedResult:
    """Run ``seed`` on ``engine`` (``portable``: the Python twin of every two-engine rule; ``sql``: the
    set-based one where the database has it, i.e. on PostgreSQL) with its first ``events`` events (or an
    explicit list, for replays and the shrinker). Nothing it writes survives it."""
    import time_machine

    from instances.scheduling_pass import inventory_cache_clear

    todo = events_draw(seed, events) if isinstance(events, int) else list(events)
    world = world_start(seed)
    result = SeedResult(seed=seed, engine=engine, events=todo)
    say = verbose or (lambda line: None)
    inventory_cache_clear()
    with (
        time_machine.travel(world.now, tick=False) as traveller,
        boundaries(world),
        _engine(engine),
        _rolled_back(),
    ):
        world.clock = traveller
        _sequences_reset()
        try:
            run_on_commit_now(lambda: world_populate(world))
        except Exception as exc:  # a crash of a real service is a finding, reported as one
            result.failure = Failure("services_do_not_crash", 0, _crash(exc))
            return result
        if not _check(world, 0, invariants, result):
            return result
        for step, event in enumerate(todo, start=1):
            try:
                what = event_apply(world, event)
            except Refusal as exc:
                result.failure = Failure(exc.invariant, step, str(exc))
                return result
            except Exception as exc:
                result.failure = Failure("services_do_not_crash", step, _crash(exc))
                return result
            say(f"  {step:4d} {world.now:%m-%d %H:%M:%S} {event[0]:<18} {what}")
            if not _check(world, step, invariants, result):
                return result
        result.digest = state_digest()
    inventory_cache_clear()  # the cache saw rows the rollback removed
    return result


def _crash(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = next((f for f in reversed(frames) if "/tests/simulation/" not in f.filename), frames[-1])
    return f"{type(exc).__name__}: {exc} (at {where.filename.rsplit('/', 2)[-2:]}:{where.lineno})"


def shrink(
    seed: int,
    events: list[Event],
    failure: Failure,
    *,
    engine: str = "portable",
    max_runs: int = 200,
    invariants: Sequence[Invariant] = INVARIANTS,
) -> list[Event]:
    """The shortest list found (delta debugging, removing chunks then single events) of ``events`` that still
    breaks ``failure.invariant``; at most ``max_runs`` runs. The events after the failing step go first."""
    current = events[: failure.step] if failure.step else events
    runs = 0

    def fails(candidate: list[Event]) -> bool:
        nonlocal runs
        runs += 1
        got = run_seed(seed, engine=engine, events=candidate, invariants=invariants).failure
        return got is not None and got.invariant == failure.invariant

    chunk = max(1, len(current) // 2)
    while chunk >= 1 and runs < max_runs:
        i, removed = 0, False
        while i < len(current) and runs < max_runs:
            candidate = current[:i] + current[i + chunk :]
            if candidate != current and fails(candidate):
                current, removed = candidate, True
            else:
                i += chunk
        if not removed:
            chunk //= 2
    return current


__all__ = ["ENGINES", "Failure", "SeedResult", "run_seed", "shrink", "state_digest"]
