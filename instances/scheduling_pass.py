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
* **Set-based writes**: the moves go through :func:`instances.transitions.instances_transition`. On
  PostgreSQL one statement does every write a placement needs (:func:`_attempts_tail`): the compare-and-set
  UPDATE of every placed and failed instance, the INSERTs of their transition and audit rows and of the
  placed ones' attempts (ids from the sequence, numbers after the last, the job's one-shot resume step,
  which it consumes; an attempt's token comes from a random salt,
  ``instances.services.runtime_config.attempt_tokens_new``, so its hash goes in with the row and nothing is
  read first). Elsewhere the instances to move are read in one query, the attempts inserted in one more
  and the resume steps consumed in a third. The queue positions and reasons of waiting
  instances that changed are written in one UPDATE (``instances.bulk.rows_update``), quotas and usage are
  two grouped queries. The statements of a pass do not grow with the queue (a test pins them: 15 on
  PostgreSQL, 20 on SQLite).
* **No model objects on the hot path**: the queue is read as plain rows (times as text, parsed only for
  requests not seen in the last pass: the ``PlacementRequest`` of a request that waits is kept between
  passes), the instances to move as plain values (:class:`instances.transitions.InstanceRow`), and the
  ``Instance`` objects returned are built only when the caller reads them (the reconcile loop counts them).
* **Fewer indexes to write**: every placement writes an instance row (not a HOT update: ``status`` is
  indexed), a transition, an audit row and an attempt; no index among them is covered by another or
  serves a LIKE that no query makes (``instances`` and ``portal`` migrations 0007 / 0011).
"""

from __future__ import annotations

import functools
import hashlib
import json
import operator
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, cast, overload

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from billing.choices import PriceTier
from instances import scheduler
from instances.bulk import insert_select, pk_in, rows_insert, rows_update, text_array
from instances.choices import HOLDS_CAPACITY, InstanceStatus, NodeState
from instances.models import GpuQuota, GpuType, Instance, JobAttempt, Node, TrainingJob
from instances.preemption import preemptions_plan
from instances.reasons import Reason, reason_fields
from instances.transitions import InstanceRow, Move, MovesTail, instances_transition
from portal.db import set_based_paths

S = InstanceStatus
# pg_advisory_xact_lock key of the scheduling pass (any fixed bigint no other code uses): "gpu_schd".
ADVISORY_LOCK_KEY = int.from_bytes(b"gpu_schd", "big") & 0x7FFF_FFFF_FFFF_FFFF
_REBUILD_AFTER = 500  # holders gone or changed since the last pass (or nodes, if more) above which to rebuild


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
    nodes: int = 0  # node rows the index was built from

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
    inv = _Inventory(scheduler.CapacityIndex(nodes), fingerprint, nodes=len(nodes))
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
    current = _holders_current()
    gone = [pk for pk in cached.holders if pk not in current]
    changed = [pk for pk, ts in current.items() if pk not in cached.holders or cached.holders[pk][0] != ts]
    if len(gone) + len(changed) > max(_REBUILD_AFTER, cached.nodes):  # a rebuild costs about a replay per node
        return _inventory_build(fingerprint)
    for pk in gone:
        cached.unhold(pk)
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
    still ready. One statement; on PostgreSQL the names travel as one array literal (``bulk.text_array``).
    Not an array unpacked from JSON in the query: the planner cannot size that one and, on a table without
    fresh statistics, joined 20,000 nodes against it row by row (1 s)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute(
                f'SELECT name FROM "{Node._meta.db_table}" WHERE name = ANY(%s::text[]) AND state = %s '  # noqa: S608
                "ORDER BY id FOR UPDATE",
                [text_array(names), NodeState.READY],
            )
            return {row[0] for row in cur.fetchall()}
    return set(
        Node.objects.select_for_update()
        .filter(name__in=names, state=NodeState.READY)
        .order_by("pk")
        .values_list("name", flat=True)
    )


def _queue_read() -> list[tuple[Any, ...]]:
    """``(pk, organization_id, GPU type code, gpu_count, mode, submitted_at, tier, queue_position,
    status_reason, elastic_gpu_counts, resuming)`` of every instance in ``scheduling``, in no order; ``resuming``:
    the instance is elastic and has run before (only then may it resume on fewer GPUs). On PostgreSQL one
    plain query whose ``submitted_at`` travels as ISO 8601 text (Django's time-zone-aware loader costs ~5 µs a
    row; the text is parsed only for a request not seen in the last pass, :func:`_requests_of`)."""
    if connection.vendor != "postgresql":
        return list(
            Instance.objects.filter(status=S.SCHEDULING)
            .annotate(resuming=Exists(JobAttempt.objects.filter(instance=OuterRef("pk"))))
            .order_by()
            .values_list(
                "pk",
                "organization_id",
                "gpu_type__code",
                "gpu_count",
                "mode",
                "submitted_at",
                "tier",
                "queue_position",
                "status_reason",
                "elastic_gpu_counts",
                "resuming",
            )
        )
    sql = (
        "SELECT i.id, i.organization_id, g.code, i.gpu_count, i.mode, i.submitted_at::text, i.tier, "  # noqa: S608
        "i.queue_position, i.status_reason, i.elastic_gpu_counts, (i.elastic_gpu_counts <> '[]'::jsonb AND EXISTS "
        f'(SELECT 1 FROM "{JobAttempt._meta.db_table}" a WHERE a.instance_id = i.id)) '
        f'FROM "{Instance._meta.db_table}" i JOIN "{GpuType._meta.db_table}" g '
        "ON g.id = i.gpu_type_id WHERE i.status = %s"
    )
    with connection.cursor() as cur:
        cur.execute(sql, [S.SCHEDULING])
        return cur.fetchall()


_requests: dict[tuple[Any, ...], scheduler.PlacementRequest] = {}


def _requests_of(queue: list[tuple[Any, ...]]) -> list[scheduler.PlacementRequest]:
    """The scheduler's requests for the rows of :func:`_queue_read`. A request waits through many passes, so
    the requests of the last pass are kept, keyed by every column they are made of (a changed row makes a
    new one): building 10,000 frozen dataclasses cost more than the pass's placements."""
    global _requests
    old, new = _requests, {}
    for row in queue:
        counts = row[9] if row[10] else ()
        fallback = tuple(int(g) for g in (json.loads(counts) if isinstance(counts, str) else counts or ()))
        key = (*row[:7], fallback)
        req = old.get(key)
        if req is None:
            pk, org, code, gpus, mode, submitted, tier, _ = key
            req = scheduler.PlacementRequest(
                str(pk),
                str(org),
                code,
                gpus,
                mode,  # a RentalMode value read from the database
                datetime.fromisoformat(submitted) if isinstance(submitted, str) else submitted,
                int(tier == PriceTier.INTERRUPTIBLE),
                fallback,
            )
        new[key] = req
    _requests = new
    return list(new.values())


def _holders_current() -> dict[int, datetime]:
    """``pk -> updated_at`` of the instances holding capacity (times as text on PostgreSQL, see
    :func:`_queue_read`)."""
    if connection.vendor != "postgresql":
        return dict(Instance.objects.filter(status__in=HOLDS_CAPACITY).order_by().values_list("pk", "updated_at"))
    with connection.cursor() as cur:
        cur.execute(
            f'SELECT id, updated_at::text FROM "{Instance._meta.db_table}" WHERE status = ANY(%s::text[])',  # noqa: S608
            [sorted(HOLDS_CAPACITY)],
        )
        parse = datetime.fromisoformat
        return {pk: parse(ts) for pk, ts in cur.fetchall()}


def _quotas_and_usage(org_ids: set[int]) -> tuple[dict[str, int | None], dict[str, int]]:
    default = getattr(settings, "INSTANCES_DEFAULT_GPU_QUOTA", None)
    quotas: dict[str, int | None] = {str(o): default for o in org_ids}
    for org, gpus in GpuQuota.objects.filter(organization_id__in=org_ids).values_list("organization_id", "gpus"):
        quotas[str(org)] = gpus
    usage = {  # grouped over the instances holding capacity (the status index), then cut to ``org_ids``
        str(org): int(gpus or 0)
        for org, gpus in Instance.objects.filter(status__in=HOLDS_CAPACITY)
        .values("organization_id")
        .annotate(s=Sum("gpu_count"))
        .order_by()
        .values_list("organization_id", "s")
        if org in org_ids
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


class _Target(NamedTuple):
    """An instance the pass moves: what the move reads (``row``), its training job's id and one-shot resume
    step (``None`` / -1 for an interactive instance) and the number of its last attempt (``None``: none)."""

    row: InstanceRow
    job_id: int | None
    resume_step: int
    last_attempt: int | None


def _targets_of(pks: list[int]) -> dict[int, _Target]:
    """The instances ``pks`` still in ``scheduling``, in one query of plain values (no model objects). Not
    used on PostgreSQL, where the statement that moves them reads the same (:func:`_attempts_tail`)."""
    if not pks:
        return {}
    last = JobAttempt.objects.filter(instance=OuterRef("pk")).order_by("-number").values("number")[:1]
    rows = (
        Instance.objects.filter(pk__in=pk_in(pks), status=S.SCHEDULING)
        .annotate(last_attempt=Subquery(last))
        .order_by()
        .values_list("pk", "status", "organization_id", "name", "job__id", "job__resume_step", "last_attempt")
    )
    return {
        pk: _Target(InstanceRow(pk, status, org, name), job, -1 if step is None else step, number)
        for pk, status, org, name, job, step, number in rows
    }


def _attempts_create(placed: list[tuple[_Target, list[list[Any]]]], backend: str, now: datetime) -> list[int]:
    """One attempt per placed instance (numbered after its last one) with its token's salt and hash, and the
    job's one-shot resume step consumed (an attempt resumes from it once), in a constant number of
    statements. Returns the attempts' ids in the order of ``placed``. Where PostgreSQL is not available
    (there :func:`_attempts_tail` does this in the statement that places them)."""
    from instances.services.runtime_config import attempt_tokens_new

    n = len(placed)
    salts, hashes = zip(*attempt_tokens_new(n), strict=True)
    pks = rows_insert(
        JobAttempt,
        n,
        {
            "instance_id": [t.row.pk for t, _ in placed],
            "job_id": [t.job_id for t, _ in placed],
            "number": [(t.last_attempt or 0) + 1 for t, _ in placed],
            "backend": [backend] * n,
            "token_salt": list(salts),
            "token_sha256": list(hashes),
            "resume_from_step": [t.resume_step if t.job_id is not None else -1 for t, _ in placed],
            "placement": [placement for _, placement in placed],
            "created_at": [now] * n,
        },
    )
    # as on PostgreSQL: only where the job still holds the step its attempt took (one asked for meanwhile stays)
    resumed = [
        Q(pk=t.job_id, resume_step=t.resume_step) for t, _ in placed if t.job_id is not None and t.resume_step >= 0
    ]
    if resumed:
        TrainingJob.objects.filter(functools.reduce(operator.or_, resumed)).update(resume_step=-1)
    return pks


def _attempts_tail(backend: str, now: datetime) -> MovesTail:
    """On PostgreSQL, the attempts of the instances a pass places, written by the statement that moves them
    (``instances.transitions.MovesTail``): for each move to ``provisioning`` applied, an attempt numbered after
    the instance's last one, on ``backend``, with the instance's new placement, its job's one-shot resume step
    (then consumed: set to -1) and the token salt and hash of the move's ``payload`` (``{"salt": …, "sha": …}``,
    ``instances.services.runtime_config.attempt_tokens_new``). The attempt's id is taken from its sequence as
    the instance is moved, so each applied move returns it (``None`` for a move to ``failed``) without joining
    the CTEs. One statement instead of three (the instances to move, the attempts, the resume steps): the pass's
    largest cost per placement."""
    att, job = JobAttempt._meta.db_table, TrainingJob._meta.db_table
    head, params = insert_select(
        JobAttempt,
        {
            "id": "m.aid",
            "instance_id": "m.id",
            "job_id": "j.id",
            "number": f'coalesce((SELECT max(a.number) FROM "{att}" a WHERE a.instance_id = m.id), 0) + 1',  # noqa: S608
            "token_salt": "m.x->>'salt'",
            "token_sha256": "m.x->>'sha'",
            "resume_from_step": "coalesce(j.resume_step, -1)",
            "placement": "m.place",
        },
        {"backend": backend, "created_at": now},
    )
    ctes = (
        f', att AS ({head} FROM moved m LEFT JOIN "{job}" j ON j.instance_id = m.id WHERE m.aid IS NOT NULL '  # noqa: S608
        "ORDER BY m.n RETURNING job_id, resume_from_step), "
        f'rs AS (UPDATE "{job}" AS j SET resume_step = -1 FROM att WHERE j.id = att.job_id '
        "AND att.resume_from_step >= 0 AND j.resume_step = att.resume_from_step)"  # one asked for meanwhile stays
    )
    # the sequence's name looked up once (an InitPlan), not per row
    aid = ", CASE WHEN v.st = %s THEN nextval((SELECT pg_get_serial_sequence(%s, %s))::regclass) END AS aid"
    return MovesTail(aid, [S.PROVISIONING, att, JobAttempt._meta.pk.column], ctes, params, ["aid"])


class _Placed(Sequence[Instance]):
    """The instances a pass placed, in placement order, built as ``Instance`` objects (the columns the pass
    wrote loaded, the others on access) only when read: the reconcile loop only counts them."""

    # the columns the pass wrote, in the order of the model's fields (the order Model.from_db takes)
    _FIELDS = [
        f.attname
        for f in Instance._meta.concrete_fields
        if f.attname
        in ("id", "organization_id", "name", "status", "status_reason", "queue_position", "placement", "updated_at")
    ]

    def __init__(self, moves: list[Move], db: str) -> None:
        self._moves, self._db = moves, db

    def __len__(self) -> int:
        return len(self._moves)

    def _build(self, m: Move) -> Instance:
        r = m.instance
        values = {
            "id": r.pk,
            "organization_id": r.organization_id,
            "name": r.name,
            "status": r.status,
            "status_reason": r.status_reason,
            "queue_position": None,
            "placement": m.fields["placement"],
            "updated_at": r.updated_at,
        }
        return Instance.from_db(self._db, self._FIELDS, [values[f] for f in self._FIELDS])

    @overload
    def __getitem__(self, i: int) -> Instance: ...
    @overload
    def __getitem__(self, i: slice) -> list[Instance]: ...
    def __getitem__(self, i: int | slice) -> Instance | list[Instance]:
        if isinstance(i, slice):
            return [self._build(m) for m in self._moves[i]]
        return self._build(self._moves[i])

    def __repr__(self) -> str:
        return f"<placed {[m.instance.pk for m in self._moves]}>"


def schedule_pass(
    *,
    now: datetime | None = None,
    backend: str = "local",
    on_attempt: Callable[[int], None] | None = None,
    on_preempt: Callable[[int], None] | None = None,
) -> Sequence[Instance]:
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
    from instances.services.runtime_config import attempt_tokens_new  # services import this module

    now = now or timezone.now()
    with transaction.atomic():
        _serialize_passes()
        queue = _queue_read()
        if not queue:
            return []
        inv = _inventory_current(_cache_take())
        quotas, usage = _quotas_and_usage({row[1] for row in queue})
        requests = _requests_of(queue)
        result = scheduler.schedule_queue(requests, inv.index, quotas, usage)
        queued = {row[0]: row for row in queue}
        tiers = {pk: row[6] for pk, row in queued.items()}
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
        moving = [*pending, *(int(w.request.request_id) for w in failed)]
        pg = set_based_paths()
        if pg:  # the statement that moves them reads what it needs and skips those no longer scheduling
            rows: dict[int, InstanceRow] = {pk: InstanceRow(pk, S.SCHEDULING, queued[pk][1], "") for pk in moving}
            targets: dict[int, _Target] = {}
        else:
            targets = _targets_of(moving)
            rows = {pk: t.row for pk, t in targets.items()}
        tokens = iter(attempt_tokens_new(len(pending)) if pg else [])
        moves = [
            Move(
                rows[pk],
                S.PROVISIONING,
                Reason("placed", {"nodes": ", ".join([n for n, _ in p.assignments])}),
                {"placement": [[n, g] for n, g in p.assignments], "queue_position": None},
                payload=dict(zip(("salt", "sha"), next(tokens), strict=True)) if pg else None,
            )
            for pk, p in pending.items()
            if pk in rows
        ]
        moves += [
            Move(rows[int(w.request.request_id)], S.FAILED, w.reason)
            for w in failed
            if int(w.request.request_id) in rows
        ]
        applied = instances_transition(moves=moves, now=now, tail=_attempts_tail(backend, now) if pg else None)
        placed_moves = [m for m in applied if m.to == S.PROVISIONING]
        for pk in set(pending) - {m.instance.pk for m in placed_moves}:
            drop(pk)  # its status changed under us (e.g. stopped): it is not placed
        for m in placed_moves:
            inv.holders[m.instance.pk] = (now, list(pending[m.instance.pk].assignments))
            if tiers[m.instance.pk] == PriceTier.INTERRUPTIBLE:
                inv.interruptible.add(m.instance.pk)
        if pg:
            attempts = [cast(int, m.returned[0]) for m in placed_moves]
        else:
            placed = [(targets[m.instance.pk], m.fields["placement"]) for m in placed_moves]
            attempts = _attempts_create(placed, backend, now) if placed else []
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
        changed = []
        for w in result.waiting:
            if w.position is not None:
                pk = int(w.request.request_id)
                why = preempting.get(pk, w.reason) if preempting else w.reason  # a Reason: keep its code
                if queued[pk][7:9] != (w.position, why[:300]):
                    changed.append((pk, w.position, why))
        _write_waiting(changed)
        transaction.on_commit(functools.partial(_cache_put, inv))
    return _Placed(placed_moves, connection.alias)


__all__ = ["ADVISORY_LOCK_KEY", "inventory_cache_clear", "schedule_pass"]
