"""Whether a GPU type can ever take a request: the capacity the launch page shows and the launch service checks.

"Busy" and "without capacity" differ. A request that fits the inventory waits in the queue until work ends;
one that would not fit even on an entirely free inventory (no ready node of the type at all, or fewer GPUs
on its ready nodes than the request's shape needs) would wait for ever. Such a GPU type is shown as
unavailable, with the reason, and a launch on it is refused before anything is written.

The test is the scheduler's own (``instances.scheduler.place``) on the ready nodes with every GPU free, so
the launch page, the launch service and the scheduling pass never disagree on what fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from instances import scheduler
from instances.choices import NodeState
from instances.models import GpuType, Node

#: Scheduler refusals that waiting cannot cure (the inventory of the type is too small or absent).
NO_CAPACITY_CODES = frozenset({scheduler.CODE_NO_NODES, scheduler.CODE_EXCEEDS_INVENTORY})


@dataclass(frozen=True)
class TypeCapacity:
    """Ready capacity of one GPU type: ``ready_nodes`` nodes holding ``gpus`` GPUs (CPU slots on the local
    backend) in all, the largest with ``largest_node``. ``reason`` says why the type is unavailable ("" when
    it has a ready node)."""

    code: str
    ready_nodes: int
    gpus: int
    largest_node: int

    @property
    def available(self) -> bool:
        return self.ready_nodes > 0

    @property
    def reason(self) -> str:
        return "" if self.available else _("no node of this type is ready")


def _ready_views(gpu_type: str | None = None) -> list[scheduler.NodeView]:
    qs = Node.objects.filter(state=NodeState.READY).select_related("gpu_type")
    if gpu_type is not None:
        qs = qs.filter(gpu_type__code=gpu_type)
    return [scheduler.NodeView(n.name, n.gpu_type.code, n.gpus, n.gpus, n.block) for n in qs]


def capacity_by_type() -> dict[str, TypeCapacity]:
    """Ready capacity of every active GPU type, by code (two queries)."""
    out = {
        code: TypeCapacity(code, 0, 0, 0) for code in GpuType.objects.filter(active=True).values_list("code", flat=True)
    }
    for view in _ready_views():
        c = out.get(view.gpu_type)
        if c is not None:
            out[view.gpu_type] = TypeCapacity(
                c.code, c.ready_nodes + 1, c.gpus + view.gpus_total, max(c.largest_node, view.gpus_total)
            )
    return out


def capacity_refusal(*, gpu_type: str, gpu_count: int, mode: str) -> str | None:
    """Why ``gpu_count`` GPUs of ``gpu_type`` in ``mode`` can never be placed on the ready inventory (a sentence
    for the user), or None when they would fit on it entirely free. Read-only; ignores quota and queue."""
    views = _ready_views(gpu_type)
    request = scheduler.PlacementRequest("capacity", "-", gpu_type, gpu_count, mode, timezone.now())  # type: ignore[arg-type]
    result = scheduler.place(request, views)
    if not isinstance(result, scheduler.Unplaceable) or result.code not in NO_CAPACITY_CODES:
        return None
    if not views:
        return _("%(code)s has no capacity now: no node of this type is ready. Choose another GPU type.") % {
            "code": gpu_type
        }
    gpus = sum(v.gpus_total for v in views)
    return ngettext(
        "%(code)s cannot take %(n)d GPUs: its %(nodes)d ready node has %(gpus)d. Ask for fewer GPUs or choose "
        "another GPU type.",
        "%(code)s cannot take %(n)d GPUs: its %(nodes)d ready nodes have %(gpus)d in all (at most %(largest)d "
        "on one node). Ask for fewer GPUs or choose another GPU type.",
        len(views),
    ) % {
        "code": gpu_type,
        "n": gpu_count,
        "nodes": len(views),
        "gpus": gpus,
        "largest": max(v.gpus_total for v in views),
    }
