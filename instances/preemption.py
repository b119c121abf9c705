"""The interruptible tier: which interruptible instances the scheduler preempts for an on-demand request.

Interruptible capacity is sold at the price book's discount (``billing.TierDiscount``) on one condition: an
on-demand request that lacks capacity may take it back. The rules (issue 14, item 4):

* **Who may preempt.** Only the first waiting on-demand request of a GPU type whose refusal is "not enough
  free capacity now" (``scheduler.CODE_CAPACITY``), once per scheduling pass. Interruptible requests never
  preempt, and they queue behind every on-demand request (``PlacementRequest.rank``), so the capacity freed
  goes to the request it was freed for. A request waiting on its quota preempts nothing.
* **Who is preempted (deterministic).** Interruptible instances of that GPU type holding capacity. All
  interruptible work has the same priority, so victims are chosen by the fewest GPUs freed that make the
  request fit (least work interrupted), then the newest first (``submitted_at`` latest, then the higher id:
  the work that has run least loses least), then the node name. A single-node request looks at each node
  (the smallest set of that node's interruptible instances that frees enough, subsets tried in that order);
  a whole-node request takes the nodes whose every user is interruptible, cheapest first. Victims already
  being preempted (or stopping) count as capacity on its way: nothing more is preempted while they suffice.
* **How.** The same path as a lost node's preemption: the victim gets a notice (``preempt_requested_at``, its
  reason shown, ``preempt_for`` the request it is for; acted on again by a later pass if its preemption has
  not ended within the stop grace + 60 s), its attempt is stopped with SIGTERM (the runtime saves a
  checkpoint at the current step),
  the instance becomes ``preempted`` (not a crash: the crash budget is untouched) and a training job resumes
  from that checkpoint when capacity returns; an interactive instance is queued again (its disk is kept,
  its processes are not).

* **Withdrawn when its reason is gone.** Until the preemption task begins stopping the victim
  (``preempt_started_at``, set under the victim's row lock), a notice whose request no longer waits (stopped,
  placed elsewhere, failed) is withdrawn (:func:`notices_withdraw`): by the task itself before it acts, by
  the request's own stop, and by the next scheduling pass. The victim keeps running, nothing is counted as a
  preemption, and its reason says the notice was withdrawn. Once the stop has begun it is not withdrawn
  (SIGTERM has been sent).

:func:`victims_choose` is a pure function over the scheduler's capacity index; :func:`preemptions_plan`
reads the holders and writes the notices inside the scheduling pass's transaction.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from billing.choices import PriceTier
from instances import scheduler
from instances.choices import HOLDS_CAPACITY, InstanceStatus
from instances.models import Instance
from instances.reasons import Reason
from portal.models import AuditEvent

SUBSET_LIMIT = 12  # candidates on one node above which the smallest subset is found greedily (2^12 subsets)
WAITING = frozenset({InstanceStatus.PENDING, InstanceStatus.SCHEDULING})  # a request that still waits


@dataclass(frozen=True, slots=True)
class Holder:
    """An interruptible instance holding capacity: ``placement`` ``((node, gpus), …)``; ``freeing`` when its
    preemption (or stop) is already under way."""

    pk: int
    submitted_at: datetime
    gpus: int
    placement: tuple[tuple[str, int], ...]
    freeing: bool = False

    def on(self, node: str) -> int:
        return sum(g for n, g in self.placement if n == node)


def _newest_first(h: Holder) -> tuple[float, int]:
    return (-h.submitted_at.timestamp(), -h.pk)


def _smallest_subset(candidates: list[Holder], node: str, missing: int) -> list[Holder] | None:
    """The subset of ``candidates`` (sorted newest first) freeing ≥ ``missing`` GPUs on ``node`` with the
    fewest GPUs in all, ties to the newest; None when even all of them do not free enough."""
    if sum(h.on(node) for h in candidates) < missing:
        return None
    if len(candidates) > SUBSET_LIMIT:  # greedy, newest first
        chosen, freed = [], 0
        for h in candidates:
            chosen.append(h)
            freed += h.on(node)
            if freed >= missing:
                return chosen
        return None
    best: tuple[int, tuple[int, ...]] | None = None
    for r in range(1, len(candidates) + 1):
        for idx in itertools.combinations(range(len(candidates)), r):
            if sum(candidates[i].on(node) for i in idx) >= missing:
                key = (sum(candidates[i].gpus for i in idx), idx)
                if best is None or key < best:
                    best = key
    return None if best is None else [candidates[i] for i in best[1]]


def victims_choose(
    request: scheduler.PlacementRequest, pool: scheduler._TypePool, holders: Sequence[Holder]
) -> list[Holder] | None:
    """The interruptible instances to preempt so that ``request`` fits (see the module docstring).

    ``pool``: free capacity of the request's GPU type after this pass's placements; ``holders``: the
    interruptible instances holding capacity of that type. Returns the victims (``[]`` when those already
    being freed suffice), or None when preempting every interruptible instance would not make it fit.
    """
    free = pool.free_by_name
    coming = {n: free[n] + sum(h.on(n) for h in holders if h.freeing) for n in free}
    candidates = sorted((h for h in holders if not h.freeing), key=_newest_first)
    size = pool.node_size
    if request.mode == "bare_metal" or request.gpus >= size:
        need = request.gpus // size
        used_interruptible = {n: sum(h.on(n) for h in holders) for n in free}
        options = []  # (GPUs to preempt, node): nodes every user of which is interruptible
        for n in free:
            if pool.total_by_name[n] != size or pool.total_by_name[n] - free[n] != used_interruptible[n]:
                continue
            options.append((sum(h.on(n) for h in candidates), n))
        if len(options) < need:
            return None
        chosen = sorted(options)[:need]
        if all(cost == 0 for cost, _ in chosen):
            return []
        nodes = {n for _, n in chosen}
        return [h for h in candidates if any(n in nodes for n, _ in h.placement)]
    if any(c >= request.gpus for c in coming.values()):
        return []
    best: tuple[int, list[tuple[float, int]], str, list[Holder]] | None = None
    for n in sorted(free):
        on_node = [h for h in candidates if h.on(n)]
        subset = _smallest_subset(on_node, n, request.gpus - coming[n])
        if subset is None:
            continue
        key = (sum(h.gpus for h in subset), [_newest_first(h) for h in subset], n, subset)
        if best is None or key[:3] < best[:3]:
            best = key
    return None if best is None else best[3]


def preemptions_plan(
    *,
    waiting: Sequence[scheduler.Waiting],
    capacity: scheduler.CapacityIndex,
    tiers: dict[int, str],
    now: datetime,
    on_preempt: Callable[[int], None],
) -> dict[int, str]:
    """Give the preemption notice to the victims of each GPU type's first on-demand request waiting for
    capacity (in the caller's transaction). ``tiers``: instance pk -> tier of the waiting requests;
    ``on_preempt(pk)`` is called for each new victim (the caller enqueues the stop after commit).
    Returns the waiting reason to show per request pk that preempted (or waits for preemptions)."""
    heads: dict[str, scheduler.Waiting] = {}
    for w in waiting:
        if w.code == scheduler.CODE_CAPACITY and w.request.gpu_type not in heads:
            heads[w.request.gpu_type] = w
    heads = {t: w for t, w in heads.items() if tiers.get(int(w.request.request_id)) == PriceTier.ON_DEMAND}
    if not heads:
        return {}
    rows = list(
        Instance.objects.filter(
            status__in=HOLDS_CAPACITY, tier=PriceTier.INTERRUPTIBLE, gpu_type__code__in=list(heads)
        ).values_list(
            "pk",
            "gpu_type__code",
            "gpu_count",
            "submitted_at",
            "placement",
            "preempt_requested_at",
            "status",
            "preempt_for_id",
            "preempt_started_at",
        )
    )
    still_waiting = {int(w.request.request_id) for w in waiting}
    gone = [  # notices not yet acted on whose request was placed, failed or stopped meanwhile
        r[0] for r in rows if r[5] is not None and r[8] is None and r[7] is not None and r[7] not in still_waiting
    ]
    withdrawn = set(notices_withdraw(pks=gone, now=now)) if gone else set()
    by_type: dict[str, list[Holder]] = {}
    # a notice whose preemption has not finished within the stop grace (a lost task) is acted on again
    stale = now - timedelta(seconds=float(getattr(settings, "INSTANCES_STOP_GRACE_S", 120)) + 60)
    for pk, code, gpus, submitted, placement, requested, status, _for, _started in rows:
        if pk in withdrawn:
            requested = None
        freeing = requested is not None or status == InstanceStatus.STOPPING
        if requested is not None and requested < stale and status != InstanceStatus.STOPPING:
            on_preempt(pk)
        by_type.setdefault(code, []).append(
            Holder(pk, submitted, gpus, tuple((str(n), int(g)) for n, g in placement or []), freeing)
        )
    reasons: dict[int, str] = {}
    for code, w in heads.items():
        holders = by_type.get(code, [])
        victims = victims_choose(w.request, capacity.pool(code), holders) if holders else None
        if victims is None:
            continue
        pk = int(w.request.request_id)
        if victims:
            _notices_give(victims, for_pk=pk, now=now, on_preempt=on_preempt)
        count = len(victims) + sum(1 for h in holders if h.freeing)
        reasons[pk] = Reason("waiting_for_preemption", {"n": count})
    return reasons


def _notices_give(victims: list[Holder], *, for_pk: int, now: datetime, on_preempt: Callable[[int], None]) -> None:
    notice = Reason("preemption_notice")
    pks = [h.pk for h in victims]
    claimed = list(
        Instance.objects.filter(pk__in=pks, status__in=HOLDS_CAPACITY, preempt_requested_at__isnull=True)
        .exclude(status=InstanceStatus.STOPPING)
        .values_list("pk", "organization_id")
    )
    Instance.objects.filter(pk__in=[pk for pk, _org in claimed]).update(
        preempt_requested_at=now,
        preempt_for_id=for_pk,
        preempt_started_at=None,
        status_reason=notice,
        status_reason_code=notice.code,
        status_reason_params={},
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(
            action="instances.instance.preempt_notice",
            organization_id=org,
            object_type=Instance._meta.label_lower,
            object_id=str(pk),
            extra={"for_instance": for_pk, "reason": notice},
            created_at=now,
        )
        for pk, org in claimed
    )
    for pk, _org in claimed:
        on_preempt(pk)


def notices_withdraw(
    *, pks: Sequence[int] | None = None, for_pks: Sequence[int] | None = None, now: datetime
) -> list[int]:
    """Withdraw the preemption notices not yet acted on (``preempt_started_at`` unset) of the instances
    ``pks``, or given for the requests ``for_pks``, whose request no longer waits (not pending or scheduling:
    stopped, placed, failed). Inside the caller's transaction, under the victims' row locks (``SELECT … FOR
    UPDATE``, the lock the preemption task takes before it acts, so a notice is either withdrawn or acted on,
    never both). The victim keeps its capacity and its attempt; its reason says why; one audit row each
    (``instances.instance.preempt_withdrawn``). A notice without a request (given before requests were
    recorded) is never withdrawn. Returns the pks withdrawn."""
    rows = (
        Instance.objects.select_for_update(of=("self",))
        .filter(preempt_requested_at__isnull=False, preempt_started_at__isnull=True, preempt_for__isnull=False)
        .exclude(preempt_for__status__in=WAITING)
    )
    if pks is not None:
        rows = rows.filter(pk__in=list(pks))
    if for_pks is not None:
        rows = rows.filter(preempt_for_id__in=list(for_pks))
    found = list(rows.order_by("pk").values_list("pk", "organization_id", "preempt_for_id"))
    if not found:
        return []
    why = Reason("preemption_withdrawn")
    Instance.objects.filter(pk__in=[pk for pk, _org, _for in found]).update(
        preempt_requested_at=None,
        preempt_for=None,
        status_reason=why,
        status_reason_code=why.code,
        status_reason_params={},
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(
            action="instances.instance.preempt_withdrawn",
            organization_id=org,
            object_type=Instance._meta.label_lower,
            object_id=str(pk),
            extra={"for_instance": for_pk, "reason": why},
            created_at=now,
        )
        for pk, org, for_pk in found
    )
    return [pk for pk, _org, _for in found]
