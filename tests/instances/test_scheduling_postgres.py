"""Scheduling passes racing on a real PostgreSQL server: the advisory lock serializes them, so no node is
given twice. SQLite serializes all writers, so this only means something on PostgreSQL (CI's second pass
sets ``DATABASE_URL``); on SQLite it is skipped with that reason."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, connections

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks (set DATABASE_URL)"),
]


def _race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run ``fn(i)`` in ``n`` threads released together; returns results or raised exceptions."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_four_concurrent_passes_never_place_a_node_twice(alice_org: Any) -> None:
    from instances.models import GpuType, Instance, JobAttempt, Node
    from instances.scheduling_pass import inventory_cache_clear, schedule_pass

    call_command("seed_catalog", verbosity=0)
    a100 = GpuType.objects.get(code="A100-80G-SXM")
    for i in range(6):
        Node.objects.create(name=f"a100-{i}", gpu_type=a100, gpus=8, block=f"rack-{i % 2}")
    for i in range(20):  # 6 whole nodes for 20 whole-node requests: 14 must wait
        Instance.objects.create(
            organization=alice_org,
            name=f"w{i}",
            kind="interactive",
            gpu_type=a100,
            gpu_count=8,
            mode="bare_metal",
            status="scheduling",
        )
    inventory_cache_clear()

    def one_pass(i: int) -> list[int]:
        if i % 2:
            inventory_cache_clear()  # half the passes rebuild, half use whatever index the others left
        return [inst.pk for inst in schedule_pass()]

    results = _race(4, one_pass)
    assert not [r for r in results if isinstance(r, Exception)], results
    placed = [pk for r in results for pk in r]  # type: ignore[union-attr]
    assert len(placed) == len(set(placed)) == 6
    gpus_per_node = Counter()
    for placement in Instance.objects.filter(status="provisioning").values_list("placement", flat=True):
        for name, gpus in placement:
            gpus_per_node[name] += gpus
    assert gpus_per_node == {f"a100-{i}": 8 for i in range(6)}
    assert JobAttempt.objects.count() == 6
    assert sorted(Instance.objects.filter(status="scheduling").values_list("queue_position", flat=True)) == list(
        range(1, 15)
    )
    inventory_cache_clear()
