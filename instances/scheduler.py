"""Gang scheduler: all-or-nothing placement of GPU requests on a node inventory.

Pure functions over plain dataclasses; no Django, no I/O. The portal's services build ``NodeView``s from the
node table (synced from a backend's ``inventory()``) and ``PlacementRequest``s from instances waiting to be
scheduled, call :func:`place` or :func:`schedule_queue`, and persist the result.

Placement rules (DESIGN.md §1 row 5, issue 5):

* **All or nothing.** A request gets every GPU it asks for in one placement, or nothing.
* **Whole nodes** when ``gpus >= node size`` (8 on the usual 8-GPU nodes) or the mode is bare metal; the
  count must then be a multiple of the node size, otherwise the request is refused (``code="not_multiple"``).
  Whole nodes are taken only from nodes with nothing else on them.
* **Best fit inside one node** otherwise: the ready node with the fewest free GPUs that still fits, so that
  small requests fill partly used nodes first and whole nodes stay whole for gangs.
* **One topology block** (rack / switch) preferred: the block with the fewest free whole nodes that still
  fits; if no single block fits, span the fewest blocks (largest blocks first, the last one best fit).
* Cordoned and draining nodes are never used.
* **Quota**: an organization's GPUs in use plus the request must not exceed its ``quota_gpus``.

Queue rule (:func:`schedule_queue`): requests are walked first-come first-served by ``(rank, submitted_at,
request_id)`` (``rank`` 0 = on demand, 1 = interruptible: interruptible work queues behind every on-demand
request, see ``instances.preemption``), independently per GPU type, with a **restricted backfill** that
never delays the first waiting request of that type:

* Once a *whole-node* request of a GPU type cannot be placed for lack of capacity, later requests of that
  type may still be placed, but only on nodes that are already partly used -- capacity the waiting gang can
  never use until those nodes empty anyway. Whole-node requests behind it wait.
* Once a *single-node* request of a GPU type cannot be placed, every later request of that type waits:
  any GPU we gave away could be the one it needs.
* Requests waiting on their organization's quota, and invalid requests, hold nobody up.

Why not plain backfill: without run-time estimates (training jobs have none) unrestricted backfill lets a
stream of small requests starve a 1024-GPU gang forever. Why not strict FIFO: a 1-GPU notebook would wait
behind a gang although it only uses GPUs the gang cannot take. Freed capacity is offered to the queue at
once by calling :func:`schedule_queue` again with the new inventory.

Performance: free capacity is indexed (:class:`CapacityIndex`) per GPU type by free-GPU count (best fit =
first non-empty bucket at or above the request, at most node-size buckets) and per (GPU type, block) as
sorted sets of whole free nodes, so a placement costs O(log nodes × nodes placed + blocks). Building the
index is O(nodes log nodes); a caller that runs passes repeatedly (the portal) keeps one index between
passes and updates it with each placement and release instead of rebuilding it
(see ``benchmarks/scheduler_bench.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, NamedTuple

from sortedcontainers import SortedList

from instances.reasons import Reason, reason

NodeState = Literal["ready", "cordoned", "draining"]
Mode = Literal["container", "bare_metal"]

NODE_STATES: tuple[str, ...] = ("ready", "cordoned", "draining")
MODES: tuple[str, ...] = ("container", "bare_metal")
MAX_GANG_GPUS = 1024  # product limit: a request asks for 1 … 1024 GPUs
DEFAULT_NODE_SIZE = 8  # GPUs per node when a GPU type has no nodes in the inventory yet

# Unplaceable.code values. Permanent ones will not change by waiting (the request must be changed).
CODE_INVALID = "invalid"  # malformed request (GPU count out of range, unknown mode)
CODE_NOT_MULTIPLE = "not_multiple"  # whole-node request that is not a multiple of the node size
CODE_EXCEEDS_QUOTA = "exceeds_quota"  # the request alone is larger than the organization's quota
CODE_QUOTA = "quota"  # quota would be exceeded given the GPUs the organization already uses
CODE_NO_NODES = "no_nodes"  # no ready node of this GPU type
CODE_EXCEEDS_INVENTORY = "exceeds_inventory"  # more nodes / GPUs than the whole inventory of the type has
CODE_CAPACITY = "capacity"  # not enough free capacity now
CODE_BEHIND = "behind"  # would fit, but waits behind an earlier request of the same GPU type
PERMANENT_CODES = frozenset({CODE_INVALID, CODE_NOT_MULTIPLE})


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node of the inventory as the scheduler sees it.

    ``gpus_total``: GPUs (or CPU slots on the local backend) the node has; ``gpus_free``: those not
    allocated to running work (0 ≤ free ≤ total). ``block``: topology block (rack / switch) the node sits
    in; nodes in one block talk over the fastest fabric.
    """

    name: str
    gpu_type: str
    gpus_total: int
    gpus_free: int
    block: str
    state: NodeState = "ready"


@dataclass(frozen=True, slots=True)
class PlacementRequest:
    """A request for ``gpus`` GPUs of ``gpu_type`` for one organization, in FIFO order of ``submitted_at``
    within its ``rank`` (0 = on demand, 1 = interruptible; lower ranks go first).

    ``fallback_gpus``: smaller GPU counts the request may run on instead, largest first (an elastic training
    job resuming after preemption, ``Instance.elastic_gpu_counts``); tried in its turn when ``gpus`` lack
    capacity, so it never jumps the queue."""

    request_id: str
    org_id: str
    gpu_type: str
    gpus: int
    mode: Mode
    submitted_at: datetime
    rank: int = 0
    fallback_gpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a request runs: ``assignments`` is ``((node_name, gpus), …)``; ``block`` is the single topology
    block used, or ``None`` when the placement spans blocks."""

    request_id: str
    assignments: tuple[tuple[str, int], ...]
    block: str | None

    @property
    def gpus(self) -> int:
        """Total GPUs placed."""
        return sum(g for _, g in self.assignments)

    @property
    def node_names(self) -> tuple[str, ...]:
        """Names of the nodes used, in assignment order."""
        return tuple(n for n, _ in self.assignments)


@dataclass(frozen=True, slots=True)
class Unplaceable:
    """Why a request cannot be placed now: a human ``reason`` shown to the user and a machine ``code``
    (one of the ``CODE_*`` constants)."""

    reason: str
    code: str

    @property
    def permanent(self) -> bool:
        """True when waiting cannot help: the request itself must change."""
        return self.code in PERMANENT_CODES


@dataclass(frozen=True, slots=True)
class Waiting:
    """A request left in the queue by :func:`schedule_queue`.

    ``position``: 1-based place among the waiting requests of the same GPU type (what the user sees), or
    ``None`` for a permanently refused request, which is not in the queue at all.
    """

    request: PlacementRequest
    position: int | None
    reason: str
    code: str


class QueueResult(NamedTuple):
    """Result of one pass over the queue; unpacks as ``placements, waiting``."""

    placements: list[Placement]
    waiting: list[Waiting]


def node_size_of(nodes: Iterable[NodeView], gpu_type: str) -> int:
    """GPUs per node for ``gpu_type``: the largest ``gpus_total`` among its nodes (any state), or
    ``DEFAULT_NODE_SIZE`` when there are none. Whole-node placements use only nodes of exactly this size."""
    size = 0
    for n in nodes:
        if n.gpu_type == gpu_type and n.gpus_total > size:
            size = n.gpus_total
    return size or DEFAULT_NODE_SIZE


def _free_nodes(n: int, gpu_type: str) -> Reason:
    """ "1 free X node" / "3 free X nodes" as a nested reason (``instances.reasons``)."""
    return reason("sched_free_node" if n == 1 else "sched_free_nodes", n=n, gpu_type=gpu_type)


class _TypePool:
    """Free capacity of one GPU type, kept in name order so that an index updated by :meth:`take` and
    :meth:`release` answers exactly as one rebuilt from scratch (the tie-break is the node name).

    ``partial[f]`` / ``full[f]``: sorted names of ready nodes with ``f`` > 0 free GPUs, split by whether the
    node is partly used (``f`` < its total) or entirely free; ``whole_free[block]``: sorted names of ready,
    entirely free nodes of exactly ``node_size`` GPUs. Every operation is O(log nodes) or O(node size +
    blocks), never O(nodes)."""

    __slots__ = (
        "block_by_name",
        "free_by_name",
        "full",
        "gpu_type",
        "largest_node",
        "node_size",
        "partial",
        "total_by_name",
        "whole_free",
        "whole_free_total",
        "whole_nodes_in_inventory",
    )

    def __init__(self, gpu_type: str, node_size: int) -> None:
        self.gpu_type = gpu_type
        self.node_size = node_size
        self.total_by_name: dict[str, int] = {}
        self.free_by_name: dict[str, int] = {}
        self.block_by_name: dict[str, str] = {}
        self.partial: dict[int, SortedList] = {}
        self.full: dict[int, SortedList] = {}
        self.whole_free: dict[str, SortedList] = {}
        self.whole_free_total = 0
        self.whole_nodes_in_inventory = 0  # whole-size nodes of this type in any state
        self.largest_node = 0  # largest gpus_total of a ready node

    # -- index maintenance ---------------------------------------------------------------------------------
    def _index(self, name: str, free: int, total: int, *, add: bool) -> None:
        if free <= 0:
            return
        buckets = self.full if free == total else self.partial
        if add:
            buckets.setdefault(free, SortedList()).add(name)
        else:
            buckets[free].remove(name)
        if free == total == self.node_size:
            if add:
                self.whole_free.setdefault(self.block_by_name[name], SortedList()).add(name)
                self.whole_free_total += 1
            else:
                self.whole_free[self.block_by_name[name]].remove(name)
                self.whole_free_total -= 1

    def add(self, node: NodeView) -> None:
        free = max(0, min(node.gpus_free, node.gpus_total))
        self.total_by_name[node.name] = node.gpus_total
        self.free_by_name[node.name] = free
        self.block_by_name[node.name] = node.block
        self.largest_node = max(self.largest_node, node.gpus_total)
        self._index(node.name, free, node.gpus_total, add=True)

    def take(self, name: str, gpus: int) -> None:
        free, total = self.free_by_name[name], self.total_by_name[name]
        if gpus > free:
            raise ValueError(f"{name}: cannot take {gpus} GPUs, {free} free")
        self._index(name, free, total, add=False)
        self.free_by_name[name] = free - gpus
        self._index(name, free - gpus, total, add=True)

    def release(self, name: str, gpus: int) -> None:
        free, total = self.free_by_name[name], self.total_by_name[name]
        if free + gpus > total:
            raise ValueError(f"{name}: cannot release {gpus} GPUs, {free} of {total} free")
        self._index(name, free, total, add=False)
        self.free_by_name[name] = free + gpus
        self._index(name, free + gpus, total, add=True)

    def whole_free_count(self) -> int:
        return self.whole_free_total

    def max_free_on_node(self, *, partly_used_only: bool = False) -> int:
        best = max((f for f, names in self.partial.items() if names), default=0)
        if not partly_used_only:
            best = max(best, max((f for f, names in self.full.items() if names), default=0))
        return best

    # -- finding (no mutation) -------------------------------------------------------------------------
    def find_in_node(self, gpus: int, *, partly_used_only: bool) -> str | None:
        """Best fit: a node with the fewest free GPUs ≥ ``gpus``; ties by node name."""
        for free in range(gpus, self.largest_node + 1):
            part = self.partial.get(free)
            best = part[0] if part else None
            if not partly_used_only:
                whole = self.full.get(free)
                if whole and (best is None or whole[0] < best):
                    best = whole[0]
            if best is not None:
                return best
        return None

    def find_whole_nodes(self, count: int) -> tuple[list[str], str | None] | None:
        """``count`` whole free nodes, in one block if possible (the fullest block that fits), else across
        the fewest blocks. Returns (names, block or None) or None when fewer are free."""
        if self.whole_free_total < count:
            return None
        sizes = [(len(names), block) for block, names in self.whole_free.items() if names]
        fitting = [(s, b) for s, b in sizes if s >= count]
        if fitting:
            _, block = min(fitting)
            return list(self.whole_free[block].islice(0, count)), block
        sizes.sort(key=lambda sb: (-sb[0], sb[1]))
        chosen: list[str] = []
        remaining = count
        k = 0
        while sum(s for s, _ in sizes[: k + 1]) < count:
            k += 1
        # the k largest blocks whole, then the smallest block that covers what is left (best fit)
        for _, block in sizes[:k]:
            chosen.extend(self.whole_free[block])
            remaining -= len(self.whole_free[block])
        last = min((s, b) for s, b in sizes[k:] if s >= remaining)[1]
        chosen.extend(self.whole_free[last].islice(0, remaining))
        return chosen, None


class CapacityIndex:
    """Index of free capacity over an inventory, per GPU type, that can be kept between passes.

    Build it once from the inventory (O(nodes log nodes)), then keep it current with :meth:`take` /
    :meth:`release` (O(log nodes) per node) as placements are made and freed; :func:`schedule_queue` accepts
    it instead of a node list and commits its placements into it. An index kept this way answers exactly as
    a fresh ``CapacityIndex(nodes)`` over the same free counts (``tests/instances/test_scheduler.py``).
    A node whose state, size or block changes needs a rebuild. Not thread-safe: one pass at a time.
    """

    def __init__(self, nodes: Iterable[NodeView]) -> None:
        nodes = list(nodes)
        sizes: dict[str, int] = {}
        for n in nodes:
            sizes[n.gpu_type] = max(sizes.get(n.gpu_type, 0), n.gpus_total)
        self.pools: dict[str, _TypePool] = {t: _TypePool(t, s) for t, s in sizes.items()}
        self._type_of: dict[str, str] = {}
        for n in nodes:
            pool = self.pools[n.gpu_type]
            if n.gpus_total == pool.node_size:
                pool.whole_nodes_in_inventory += 1
            if n.state == "ready" and n.gpus_total > 0:
                pool.add(n)
                self._type_of[n.name] = n.gpu_type

    def pool(self, gpu_type: str) -> _TypePool:
        return self.pools.get(gpu_type) or _TypePool(gpu_type, DEFAULT_NODE_SIZE)

    def free_gpus(self, name: str) -> int | None:
        """Free GPUs of ready node ``name``, or ``None`` when the index has no such ready node."""
        gpu_type = self._type_of.get(name)
        return None if gpu_type is None else self.pools[gpu_type].free_by_name[name]

    def take(self, name: str, gpus: int) -> None:
        """Mark ``gpus`` GPUs of ready node ``name`` used. Raises ``KeyError`` for a node the index does not
        hold (not ready, unknown) and ``ValueError`` when fewer are free."""
        self.pools[self._type_of[name]].take(name, gpus)

    def release(self, name: str, gpus: int) -> None:
        """Mark ``gpus`` GPUs of ready node ``name`` free again (errors as :meth:`take`)."""
        self.pools[self._type_of[name]].release(name, gpus)

    def has(self, name: str) -> bool:
        """Whether ``name`` is a ready node of the index."""
        return name in self._type_of


def _validate(req: PlacementRequest, node_size: int) -> Unplaceable | None:
    if req.mode not in MODES:
        return Unplaceable(reason("sched_invalid_mode", mode=repr(req.mode)), CODE_INVALID)
    if not 1 <= req.gpus <= MAX_GANG_GPUS:
        return Unplaceable(reason("sched_invalid_count", max=MAX_GANG_GPUS, gpus=req.gpus), CODE_INVALID)
    if _whole_nodes(req, node_size) and req.gpus % node_size:
        lower = req.gpus // node_size * node_size
        hint = reason("sched_hint_or", lower=lower, upper=lower + node_size) if lower else str(node_size)
        why = reason("sched_bare_metal") if req.mode == "bare_metal" else reason("sched_large", size=node_size)
        return Unplaceable(
            reason("sched_not_multiple", why=why, size=node_size, gpu_type=req.gpu_type, hint=hint, gpus=req.gpus),
            CODE_NOT_MULTIPLE,
        )
    return None


def needs_whole_nodes(gpus: int, mode: str, node_size: int) -> bool:
    """Whether a request of ``gpus`` GPUs in ``mode`` takes whole nodes of ``node_size`` GPUs (bare metal, or at
    least a node's worth): such a request must then be a multiple of ``node_size`` (the one shape rule, used at
    launch and for an elastic job's smaller counts too)."""
    return mode == "bare_metal" or gpus >= node_size


def _whole_nodes(req: PlacementRequest, node_size: int) -> bool:
    return needs_whole_nodes(req.gpus, req.mode, node_size)


def _check_quota(req: PlacementRequest, quota_gpus: int | None, used_gpus: int) -> Unplaceable | None:
    if quota_gpus is None:
        return None
    if req.gpus > quota_gpus:
        return Unplaceable(reason("sched_exceeds_quota", gpus=req.gpus, quota=quota_gpus), CODE_EXCEEDS_QUOTA)
    if used_gpus + req.gpus > quota_gpus:
        more = used_gpus + req.gpus - quota_gpus
        return Unplaceable(
            reason("sched_quota", quota=quota_gpus, used=used_gpus, gpus=req.gpus, more=more), CODE_QUOTA
        )
    return None


def _try_place(req: PlacementRequest, pool: _TypePool, *, partly_used_only: bool) -> Placement | Unplaceable:
    """Find a placement for a validated, quota-checked request without committing it."""
    t = req.gpu_type
    if not pool.free_by_name:
        return Unplaceable(reason("sched_no_nodes", gpu_type=t), CODE_NO_NODES)
    size = pool.node_size
    if _whole_nodes(req, size):
        need = req.gpus // size
        if partly_used_only:
            return Unplaceable(
                reason("sched_behind_nodes", nodes=_free_nodes(need, t), free=pool.whole_free_count()), CODE_BEHIND
            )
        found = pool.find_whole_nodes(need)
        if found is None:
            free = pool.whole_free_count()
            if need > pool.whole_nodes_in_inventory:
                return Unplaceable(
                    reason(
                        "sched_exceeds_inventory_nodes",
                        nodes=_free_nodes(need, t),
                        have=pool.whole_nodes_in_inventory,
                        free=free,
                    ),
                    CODE_EXCEEDS_INVENTORY,
                )
            return Unplaceable(reason("sched_capacity_nodes", nodes=_free_nodes(need, t), free=free), CODE_CAPACITY)
        names, block = found
        return Placement(req.request_id, tuple((n, size) for n in names), block)
    name = pool.find_in_node(req.gpus, partly_used_only=partly_used_only)
    if name is None:
        if req.gpus > pool.largest_node:
            return Unplaceable(
                reason("sched_exceeds_inventory_gpus", gpus=req.gpus, gpu_type=t, largest=pool.largest_node),
                CODE_EXCEEDS_INVENTORY,
            )
        most = pool.max_free_on_node(partly_used_only=partly_used_only)
        if partly_used_only and pool.find_in_node(req.gpus, partly_used_only=False) is not None:
            return Unplaceable(reason("sched_behind_gpus", gpus=req.gpus, gpu_type=t), CODE_BEHIND)
        return Unplaceable(reason("sched_capacity_gpus", gpus=req.gpus, gpu_type=t, most=most), CODE_CAPACITY)
    return Placement(req.request_id, ((name, req.gpus),), pool.block_by_name[name])


def _try_fallbacks(
    req: PlacementRequest,
    pool: _TypePool,
    refusal: Unplaceable,
    quota_gpus: int | None,
    used_gpus: int,
    *,
    partly_used_only: bool,
) -> Placement | Unplaceable:
    """The first of ``req.fallback_gpus`` (largest first) that is a valid shape, within quota and placeable
    now, or ``refusal`` (the full-size answer, what the user is shown) when none is."""
    for gpus in req.fallback_gpus:
        smaller = dataclasses.replace(req, gpus=gpus, fallback_gpus=())
        if _validate(smaller, pool.node_size) or _check_quota(smaller, quota_gpus, used_gpus):
            continue
        found = _try_place(smaller, pool, partly_used_only=partly_used_only)
        if isinstance(found, Placement):
            return found
    return refusal


def _commit(pool: _TypePool, placement: Placement) -> None:
    for name, gpus in placement.assignments:
        pool.take(name, gpus)


def place(
    request: PlacementRequest,
    nodes: Sequence[NodeView],
    *,
    quota_gpus: int | None = None,
    used_gpus: int = 0,
) -> Placement | Unplaceable:
    """Place one request on ``nodes`` (all or nothing), ignoring any queue.

    ``quota_gpus``: the organization's GPU quota (``None`` = unlimited); ``used_gpus``: GPUs it holds now.
    Returns a :class:`Placement`, or an :class:`Unplaceable` with the reason. Raises nothing for bad input:
    malformed requests come back as ``Unplaceable(code="invalid" | "not_multiple")``.
    """
    pool = CapacityIndex(nodes).pool(request.gpu_type)
    refused = _validate(request, pool.node_size) or _check_quota(request, quota_gpus, used_gpus)
    if refused:
        return refused
    return _try_place(request, pool, partly_used_only=False)


def schedule_queue(
    requests: Iterable[PlacementRequest],
    nodes: Sequence[NodeView] | CapacityIndex,
    quotas: Mapping[str, int | None],
    usage: Mapping[str, int],
) -> QueueResult:
    """Place as many queued requests as the rules allow, in FIFO order with restricted backfill.

    ``requests``: the waiting requests (any order; sorted here by ``(rank, submitted_at, request_id)``).
    ``nodes``: the inventory with current free GPUs (not modified; an index of it is built here), or a
    :class:`CapacityIndex` kept by the caller, into which the placements of this pass are committed (the
    caller releases them again if it does not keep them).
    ``quotas``: org id -> GPU quota (missing or ``None`` = unlimited). ``usage``: org id -> GPUs in use now.

    Returns ``QueueResult(placements, waiting)``: placements in the order made (to be committed by the
    caller) and the rest with their position per GPU type and reason. See the module docstring for the
    queue rule and why.
    """
    capacity = nodes if isinstance(nodes, CapacityIndex) else CapacityIndex(nodes)
    used = dict(usage)
    placements: list[Placement] = []
    waiting: list[Waiting] = []
    # per GPU type: None = open; "partial" = a whole-node gang waits; "closed" = a single-node request waits
    gate: dict[str, str] = {}
    positions: dict[str, int] = {}
    closed_answers: dict[tuple[str, int, str], Unplaceable] = {}
    partial_refusals: dict[tuple[str, int, str], Unplaceable] = {}

    def wait(req: PlacementRequest, refusal: Unplaceable) -> None:
        if refusal.permanent:
            waiting.append(Waiting(req, None, refusal.reason, refusal.code))
            return
        positions[req.gpu_type] = positions.get(req.gpu_type, 0) + 1
        waiting.append(Waiting(req, positions[req.gpu_type], refusal.reason, refusal.code))

    for req in sorted(requests, key=lambda r: (r.rank, r.submitted_at, r.request_id)):
        pool = capacity.pool(req.gpu_type)
        refused = _validate(req, pool.node_size) or _check_quota(req, quotas.get(req.org_id), used.get(req.org_id, 0))
        if refused:
            wait(req, refused)
            continue
        state = gate.get(req.gpu_type)
        if state == "closed":
            # Nothing of this type is placed any more in this pass, so the answer depends only on the shape.
            key = (req.gpu_type, req.gpus, req.mode)
            probe = closed_answers.get(key)
            if probe is None:
                found = _try_place(req, pool, partly_used_only=False)
                probe = closed_answers[key] = (
                    Unplaceable(reason("sched_behind", gpus=req.gpus, gpu_type=req.gpu_type), CODE_BEHIND)
                    if isinstance(found, Placement)
                    else found
                )
            wait(req, probe)
            continue
        key = (req.gpu_type, req.gpus, req.mode)
        if state == "partial" and key in partial_refusals:
            # While a gang waits only partly used nodes are taken, so their free GPUs only shrink and the
            # whole free nodes stay as they are: a shape refused once is refused again, for the same reason.
            wait(req, partial_refusals[key])
            continue
        result = _try_place(req, pool, partly_used_only=state == "partial")
        if state == "partial" and isinstance(result, Unplaceable):
            partial_refusals[key] = result
        if (
            isinstance(result, Unplaceable)
            and req.fallback_gpus
            and result.code in (CODE_CAPACITY, CODE_BEHIND, CODE_EXCEEDS_INVENTORY)
        ):
            result = _try_fallbacks(
                req, pool, result, quotas.get(req.org_id), used.get(req.org_id, 0), partly_used_only=state == "partial"
            )
        if isinstance(result, Placement):
            _commit(pool, result)
            used[req.org_id] = used.get(req.org_id, 0) + result.gpus
            placements.append(result)
            continue
        wait(req, result)
        # Only a request that lacks capacity *now* holds later ones back; one larger than the inventory or
        # one for a type with no ready node would otherwise block its GPU type forever.
        if result.code == CODE_CAPACITY:
            gate[req.gpu_type] = "partial" if _whole_nodes(req, pool.node_size) else "closed"
    return QueueResult(placements, waiting)


def apply_placements(nodes: Sequence[NodeView], placements: Iterable[Placement]) -> list[NodeView]:
    """Return ``nodes`` with the GPUs of ``placements`` subtracted from ``gpus_free`` (for callers and tests
    that simulate a run). Raises ``ValueError`` if a placement takes more than a node has free."""
    free = {n.name: n.gpus_free for n in nodes}
    for p in placements:
        for name, gpus in p.assignments:
            if free[name] < gpus:
                raise ValueError(f"placement {p.request_id} takes {gpus} GPUs of {name}, {free[name]} free")
            free[name] -= gpus
    return [dataclasses.replace(n, gpus_free=free[n.name]) for n in nodes]
