"""The portal's scheduling pass: the queue in the database through ``instances.scheduler.schedule_queue``.

``instances.services.instances_schedule`` calls :func:`schedule_pass`. What makes it fast at fleet scale
(issue 13, item 7; ``benchmarks/scheduler_bench.py`` prints the figures):

* **Passes serialize on one PostgreSQL advisory lock** (``pg_advisory_xact_lock``), not by locking every
  node row; only the nodes a pass chooses are locked (``SELECT … FOR UPDATE``), and a placement whose node
  was cordoned or drained meanwhile is dropped (its instance waits for the next pass). SQLite serializes
  writers by itself.
* **The capacity index is kept between passes** in the process (:class:`_Inventory`). Each pass checks it
  against the database with two small queries: a fingerprint of the node table (any added, removed,
  resized, moved or cordoned node changes it: the index is rebuilt) and the ``(id, updated_at)`` of the
  instances holding capacity (every status change sets ``updated_at``): those that left are released,
  those that arrived or changed are taken, so a pass costs O(changes × log nodes), not O(nodes). The cached
  index is taken out of the cache for the pass and put back only after commit; a failed or rolled-back
  pass leaves no cache (the next pass rebuilds), so the cache is never ahead of the database.
* **Set-based writes**: the moves go through :func:`instances.transitions.instances_transition` (one
  statement per kind of row), attempts are created in one INSERT, the queue positions and reasons of
  waiting instances that changed are written in one UPDATE (``instances.bulk.rows_update``: PostgreSQL's
  ``unnest`` of arrays), quotas and
  usage are two grouped queries. The statements of a pass do not grow with the queue (a test pins it).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery, Sum
from django.utils import timezone

from billing.choices import PriceTier
from instances import scheduler
from instances.bulk import ids_reserve, pk_in, rows_insert, rows_update
from instances.choices import HOLDS_CAPACITY, InstanceStatus, NodeState
from instances.models import GpuQuota, Instance, JobAttempt, Node, TrainingJob
from instances.preemption import preemptions_plan
from instances.reasons import Reason, reason_fields
from instances.transitions import Move, instances_transition

S = InstanceStatus
# pg_advisory_xact_lock key of the scheduling pass (any fixed bigint no other code uses): "gpu_schd".
ADVISORY_LOCK_KEY = int.from_bytes(b"gpu_schd", "big") & 0x7FFF_FFFF_FFFF_FFFF
_REBUILD_AFTER = 500  # instances changed since the last pass above which the index is rebuilt instead


@dataclass
class _Inventory:
    """The capacity index and what it was built from: ``fingerprint`` of the node table, and per instance
    holding capacity its ``updated_at`` and the ``(node, gpus)`` taken for it in the index. ``exact`` is
    False once the database held more GPUs on a node than it has (then the next pass rebuilds)."""

    index: scheduler.CapacityIndex
    fingerprint: str
    holders: dict[int, tuple[datetime, list[tuple[str, int]]]] = field(default_factory=dict)
    exact: bool = True
    interruptible: set[int] = field(default_factory=set)  # holders of the interruptible tier

    def hold(self, pk: int, updated_at: datetime, placement: Iterable[Any], tier: str = "") -> None:
        if tier == PriceTier.INTERRUPTIBLE:
            self.interruptible.add(pk)
        taken: list[tuple[str, int]] = []
        for name, gpus in placement or []:
            free = self.index.free_gpus(name)
            if free is None:  # a node that is not ready holds nothing in the index
                continue
            got = min(free, int(gpus))
            if got < int(gpus):
                self.exact = False
            if got > 0:
                self.index.take(name, got)
                taken.append((name, got))
        self.holders[pk] = (updated_at, taken)

    def unhold(self, pk: int) -> None:
        self.interruptible.discard(pk)
        _, taken = self.holders.pop(pk)
        for name, gpus in taken:
            self.index.release(name, gpus)


_cache: _Inventory | None = None
_cache_lock = threading.Lock()


def _cache_take() -> _Inventory | None:
    global _cache
    with _cache_lock:
        inv, _cache = _cache, None
    return inv


def _cache_put(inv: _Inventory) -> None:
    global _cache
    with _cache_lock:
        _cache = inv


def inventory_cache_clear() -> None:
    """Forget the index kept between passes (the next pass rebuilds it from the database)."""
    _cache_take()


def _node_fingerprint() -> str:
    """A digest of every scheduling-relevant column of every node, computed in the database."""
    table = Node._meta.db_table
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT count(*), md5(coalesce(string_agg(concat_ws(',', id, name, gpu_type_id, gpus, block, "  # noqa: S608
                f"state), ';' ORDER BY id), '')) FROM {table}"
            )
            count, digest = cur.fetchone()
        return f"{count}:{digest}"
    rows = Node.objects.order_by("pk").values_list("pk", "name", "gpu_type_id", "gpus", "block", "state")
    return hashlib.sha256(repr(list(rows)).encode()).hexdigest()


def _inventory_build(fingerprint: str) -> _Inventory:
    nodes = [
        scheduler.NodeView(name, code, gpus, gpus, block, state)  # type: ignore[arg-type]
        for name, code, gpus, block, state in Node.objects.values_list(
            "name", "gpu_type__code", "gpus", "block", "state"
        )
    ]
    inv = _Inventory(scheduler.CapacityIndex(nodes), fingerprint)
    for pk, updated_at, placement, tier in Instance.objects.filter(status__in=HOLDS_CAPACITY).values_list(
        "pk", "updated_at", "placement", "tier"
    ):
        inv.hold(pk, updated_at, placement, tier)
    return inv


def _inventory_current(cached: _Inventory | None) -> _Inventory:
    """The index brought up to date with the database (at most three queries)."""
    fingerprint = _node_fingerprint()
    if cached is None or not cached.exact or cached.fingerprint != fingerprint:
        return _inventory_build(fingerprint)
    current = dict(Instance.objects.filter(status__in=HOLDS_CAPACITY).values_list("pk", "updated_at"))
    for pk in [pk for pk in cached.holders if pk not in current]:
        cached.unhold(pk)
    changed = [pk for pk, ts in current.items() if pk not in cached.holders or cached.holders[pk][0] != ts]
    if len(changed) > _REBUILD_AFTER:
        return _inventory_build(fingerprint)
    if changed:
        for pk, updated_at, placement, tier in Instance.objects.filter(pk__in=changed).values_list(
            "pk", "updated_at", "placement", "tier"
        ):
            if pk in cached.holders:
                cached.unhold(pk)
            cached.hold(pk, updated_at, placement, tier)
    return cached


def _serialize_passes() -> None:
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])


def _nodes_lock(names: list[str]) -> set[str]:
    """Lock the rows of the nodes ``names`` (pk order, so two lockers never deadlock) and return those
    still ready. One statement; on PostgreSQL the names travel as one array."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(
                f'SELECT name FROM "{Node._meta.db_table}" WHERE name = ANY(%s::text[]) AND state = %s '  # noqa: S608
                "ORDER BY id FOR UPDATE",
                [names, NodeState.READY],
            )
            return {row[0] for row in cur.fetchall()}
    return set(
        Node.objects.select_for_update()
        .filter(name__in=names, state=NodeState.READY)
        .order_by("pk")
        .values_list("name", flat=True)
    )


def _quotas_and_usage(org_ids: set[int]) -> tuple[dict[str, int | None], dict[str, int]]:
    default = getattr(settings, "INSTANCES_DEFAULT_GPU_QUOTA", None)
    quotas: dict[str, int | None] = {str(o): default for o in org_ids}
    for org, gpus in GpuQuota.objects.filter(organization_id__in=org_ids).values_list("organization_id", "gpus"):
        quotas[str(org)] = gpus
    usage = {
        str(row["organization_id"]): int(row["s"] or 0)
        for row in Instance.objects.filter(status__in=HOLDS_CAPACITY, organization_id__in=org_ids)
        .values("organization_id")
        .annotate(s=Sum("gpu_count"))
        .order_by()
    }
    return quotas, usage


def _write_waiting(rows: list[tuple[int, int, str]]) -> None:
    """Set ``(pk, queue_position, status_reason)`` of instances still scheduling, with the reason's code and
    parameters (``instances.reasons``): one statement."""
    fields = [reason_fields(r[2]) for r in rows]
    rows_update(
        Instance,
        [r[0] for r in rows],
        {
            "queue_position": [r[1] for r in rows],
            "status_reason": [r[2][:300] for r in rows],
            "status_reason_code": [f[0] for f in fields],
            "status_reason_params": [f[1] for f in fields],
        },
        where={"status": S.SCHEDULING},
    )


def _instances_of(pks: list[int]) -> list[Instance]:
    """The instances to move, in one query: the columns a move and a new attempt read (the others load on
    access), the training job (reverse one-to-one) and the number of the last attempt."""
    if not pks:
        return []
    last = JobAttempt.objects.filter(instance=OuterRef("pk")).order_by("-number").values("number")[:1]
    return list(
        Instance.objects.filter(pk__in=pk_in(pks))
        .select_related("job")
        .only("id", "status", "organization_id", "name", "kind", "job__id", "job__resume_step")
        .annotate(last_attempt=Subquery(last))
        .order_by()
    )


class _AttemptKey(NamedTuple):
    """What ``attempt_token`` reads of an attempt, before the row exists."""

    pk: int
    instance_id: int
    number: int


def _attempts_create(placed: list[tuple[Instance, list[list[Any]]]], backend: str) -> list[int]:
    """One attempt per placed instance (numbered after its last one) with its token hash, and the job's
    one-shot resume step consumed (an attempt resumes from it once), in a constant number of statements.
    ``placed``: instances from :func:`_instances_of`. Returns the attempts' ids in the order of ``placed``."""
    from instances.services import attempt_token

    ids = [inst.pk for inst, _ in placed]
    last = {inst.pk: inst.last_attempt for inst, _ in placed}  # type: ignore[attr-defined]
    jobs = {
        inst.pk: (inst.job.pk, inst.job.resume_step) for inst, _ in placed if getattr(inst, "job", None) is not None
    }
    n = len(placed)
    numbers = [(last.get(i) or 0) + 1 for i in ids]
    columns: dict[str, list[Any]] = {
        "instance_id": ids,
        "job_id": [jobs[i][0] if i in jobs else None for i in ids],
        "number": numbers,
        "backend": [backend] * n,
        "resume_from_step": [jobs[i][1] if i in jobs else -1 for i in ids],
        "placement": [placement for _, placement in placed],
        "created_at": [timezone.now()] * n,
    }

    def tokens(pks: list[int]) -> list[str]:
        return [
            hashlib.sha256(attempt_token(_AttemptKey(pk, i, num)).encode()).hexdigest()  # type: ignore[arg-type]
            for pk, i, num in zip(pks, ids, numbers, strict=True)
        ]

    pks = ids_reserve(JobAttempt, n)
    if pks is not None:  # ids known first: the token hash goes in with the row
        rows_insert(JobAttempt, n, {"id": pks, "token_sha256": tokens(pks), **columns})
    else:
        pks = rows_insert(JobAttempt, n, {"token_sha256": [""] * n, **columns})
        rows_update(JobAttempt, pks, {"token_sha256": tokens(pks)})
    resumed = [pk for pk, step in jobs.values() if step >= 0]
    if resumed:
        TrainingJob.objects.filter(pk__in=resumed).update(resume_step=-1)
    return pks


def schedule_pass(
    *,
    now: datetime | None = None,
    backend: str = "local",
    on_attempt: Callable[[int], None] | None = None,
    on_preempt: Callable[[int], None] | None = None,
) -> list[Instance]:
    """One pass of the gang scheduler over the instances in ``scheduling`` (see the module docstring).

    Placed instances move to ``provisioning`` with their placement and a new attempt on ``backend``;
    ``on_attempt(attempt_pk)`` is called after commit for each (the launch task is enqueued there). Waiting
    ones get their 1-based queue position per GPU type and the reason; permanently unplaceable ones move
    to ``failed``. The first on-demand request of a GPU type that lacks capacity gives interruptible
    instances the preemption notice (``instances.preemption``); ``on_preempt(instance_pk)`` is called after
    commit for each (the preemption task is enqueued there). Returns the instances placed, in placement
    order. Raises nothing for a bad request (it fails with its reason); database errors propagate and
    nothing is written.
    """
    now = now or timezone.now()
    with transaction.atomic():
        _serialize_passes()
        queue = list(
            Instance.objects.filter(status=S.SCHEDULING).values_list(
                "pk",
                "organization_id",
                "gpu_type__code",
                "gpu_count",
                "mode",
                "submitted_at",
                "queue_position",
                "status_reason",
                "tier",
            )
        )
        if not queue:
            return []
        inv = _inventory_current(_cache_take())
        quotas, usage = _quotas_and_usage({row[1] for row in queue})
        requests = [
            scheduler.PlacementRequest(
                str(pk),
                str(org),
                code,
                gpus,
                mode,  # type: ignore[arg-type]  # a RentalMode value read from the database
                submitted,
                int(tier == PriceTier.INTERRUPTIBLE),
            )
            for pk, org, code, gpus, mode, submitted, _, _, tier in queue
        ]
        result = scheduler.schedule_queue(requests, inv.index, quotas, usage)
        tiers = {row[0]: row[8] for row in queue}
        # schedule_queue committed its placements into the index; undo those that are not written.
        pending = {int(p.request_id): p for p in result.placements}

        def drop(pk: int) -> None:
            for name, gpus in pending.pop(pk).assignments:
                inv.index.release(name, gpus)

        chosen = sorted({name for p in result.placements for name in p.node_names})
        if chosen:  # lock only the chosen nodes; one cordoned or drained meanwhile is not used
            ready = _nodes_lock(chosen)
            for pk in [pk for pk, p in pending.items() if not ready.issuperset(p.node_names)]:
                drop(pk)
                inv.exact = False  # the node table changed under us: rebuild next time
        failed = [w for w in result.waiting if w.position is None]
        objects = {
            inst.pk: inst
            for inst in _instances_of([*pending, *(int(w.request.request_id) for w in failed)])
            if inst.status == S.SCHEDULING
        }
        moves = [
            Move(
                objects[pk],
                S.PROVISIONING,
                Reason("placed", {"nodes": ", ".join(p.node_names)}),
                {"placement": [[n, g] for n, g in p.assignments], "queue_position": None},
            )
            for pk, p in pending.items()
            if pk in objects
        ]
        moves += [
            Move(objects[int(w.request.request_id)], S.FAILED, w.reason)
            for w in failed
            if int(w.request.request_id) in objects
        ]
        applied = instances_transition(moves=moves, now=now)
        placed_moves = [m for m in applied if m.to == S.PROVISIONING]
        for pk in set(pending) - {m.instance.pk for m in placed_moves}:
            drop(pk)  # its status changed under us (e.g. stopped): it is not placed
        for m in placed_moves:
            inv.holders[m.instance.pk] = (now, list(pending[m.instance.pk].assignments))
            if tiers[m.instance.pk] == PriceTier.INTERRUPTIBLE:
                inv.interruptible.add(m.instance.pk)
        attempts = (
            _attempts_create([(m.instance, m.fields["placement"]) for m in placed_moves], backend)
            if placed_moves
            else []
        )
        if on_attempt is not None:
            for attempt_pk in attempts:
                transaction.on_commit(functools.partial(on_attempt, attempt_pk))
        preempting = (
            preemptions_plan(  # only when interruptible work holds capacity: no statement otherwise
                waiting=result.waiting,
                capacity=inv.index,
                tiers=tiers,
                now=now,
                on_preempt=lambda pk: transaction.on_commit(functools.partial(on_preempt, pk)) if on_preempt else None,
            )
            if inv.interruptible
            else {}
        )
        before = {pk: (pos, reason) for pk, _, _, _, _, _, pos, reason, _ in queue}
        _write_waiting(
            [
                (pk, w.position, preempting.get(pk, w.reason))
                for w in result.waiting
                if w.position is not None
                for pk in (int(w.request.request_id),)
                if before[pk] != (w.position, preempting.get(pk, w.reason)[:300])
            ]
        )
        transaction.on_commit(functools.partial(_cache_put, inv))
    return [m.instance for m in placed_moves]


__all__ = ["ADVISORY_LOCK_KEY", "inventory_cache_clear", "schedule_pass"]
