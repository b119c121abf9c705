"""Node inventory: sync ``Node`` rows from the backend; cordon, drain or make ready a node."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from instances.backends.base import ComputeBackend
from instances.choices import NodeState
from instances.models import GpuType, Node
from instances.services import backend as boundary
from portal.audit import audit_log
from portal.models import User

log = logging.getLogger(__name__)


def nodes_sync(*, backend: ComputeBackend | None = None, now: datetime | None = None) -> int:
    """Upsert ``Node`` rows from the backend's inventory (name, GPU type, GPUs, block, free GPUs). A node the
    backend reports as draining / cordoned is marked so; the portal's own cordon is never undone here. Nodes
    of GPU types not in the catalog are skipped. Returns the number of nodes seen."""
    backend = backend or boundary.compute_backend()
    now = now or timezone.now()
    types = {t.code: t for t in GpuType.objects.all()}
    seen = 0
    inventory = backend.inventory()
    with transaction.atomic():
        if inventory:  # a node gone from the inventory offers no GPUs until it is seen again
            Node.objects.exclude(name__in=[v.name for v in inventory]).exclude(gpus=0).update(
                gpus=0, backend_free_gpus=0
            )
        for view in inventory:
            gpu_type = types.get(view.gpu_type)
            if gpu_type is None:
                log.warning("inventory: node %s has GPU type %s, not in the catalog", view.name, view.gpu_type)
                continue
            node, created = Node.objects.get_or_create(
                name=view.name,
                defaults={
                    "gpu_type": gpu_type,
                    "gpus": view.gpus_total,
                    "block": view.block,
                    "state": view.state,
                    "backend_free_gpus": view.gpus_free,
                    "last_seen_at": now,
                },
            )
            if not created:
                node.gpu_type, node.gpus, node.block = gpu_type, view.gpus_total, view.block
                node.backend_free_gpus, node.last_seen_at = view.gpus_free, now
                if view.state != NodeState.READY:
                    node.state = view.state
                node.save()
            seen += 1
    return seen


def node_set_state(*, node: Node, state: str, acting_user: User | None = None) -> Node:
    """Cordon (no new work), drain (no new work; running work is left to finish) or make ready a node."""
    if state not in NodeState.values:
        raise ValueError(f"unknown node state {state!r}")
    with transaction.atomic():
        old = node.state
        Node.objects.filter(pk=node.pk).update(state=state)
        audit_log(
            action=f"instances.node.{state}", actor=acting_user, obj=node, staff=True, extra={"from": old, "to": state}
        )
    node.refresh_from_db()
    return node
