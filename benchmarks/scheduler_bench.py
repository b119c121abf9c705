"""Scheduler benchmark: prints figures, asserts nothing about time.

Run: ``.venv/bin/python benchmarks/scheduler_bench.py`` (no Django needed).

1. Time to place a 1024-GPU bare-metal gang on 2,000 eight-GPU nodes in 16 blocks (index build included,
   and the placement alone on a prebuilt index is not separable through the public API, so both are shown:
   ``place`` builds the index each call; ``schedule_queue`` with one request likewise).
2. Placements per second on a mixed queue of 10,000 requests (1-8 GPU containers, 16-256 GPU gangs,
   bare-metal nodes; 50 organizations with quotas) over the same inventory, a third of it partly used.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from instances.scheduler import NodeView, Placement, PlacementRequest, place, schedule_queue

GPU = "H100-80G-SXM"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def inventory(
    nodes: int = 2000, blocks: int = 16, *, partly_used: float = 0.0, seed: int = 1
) -> list[NodeView]:
    rng = random.Random(seed)
    out = []
    for i in range(nodes):
        free = 8 if rng.random() >= partly_used else rng.randint(0, 7)
        state = "cordoned" if rng.random() < 0.01 else "ready"
        out.append(NodeView(f"node-{i:05d}", GPU, 8, free, f"block-{i % blocks:02d}", state))  # type: ignore[arg-type]
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
                f"req-{i}", f"org-{rng.randrange(50)}", GPU, gpus, mode, T0 + timedelta(seconds=i)
            )  # type: ignore[arg-type]
        )
    return out


def main() -> None:
    nodes = inventory()
    gang = PlacementRequest("gang", "org", GPU, 1024, "bare_metal", T0)
    times = []
    result = None
    for _ in range(20):
        t = time.perf_counter()
        result = place(gang, nodes)
        times.append(time.perf_counter() - t)
    assert isinstance(result, Placement) and len(result.assignments) == 128
    print(
        f"1024-GPU gang on {len(nodes)} nodes: median {statistics.median(times) * 1e3:.2f} ms, "
        f"min {min(times) * 1e3:.2f} ms (20 runs, index build included); block={result.block}"
    )

    nodes = inventory(partly_used=0.33)
    queue = mixed_queue()
    quotas: dict[str, int | None] = {f"org-{i}": (512 if i % 5 else None) for i in range(50)}
    times = []
    res = None
    for _ in range(5):
        t = time.perf_counter()
        res = schedule_queue(queue, nodes, quotas, {})
        times.append(time.perf_counter() - t)
    assert res is not None
    best = statistics.median(times)
    print(
        f"mixed queue of {len(queue)} requests on {len(nodes)} nodes: {best * 1e3:.1f} ms per pass (median of 5), "
        f"{len(res.placements)} placed, {len(res.waiting)} waiting -> "
        f"{len(queue) / best:,.0f} requests/s considered, {len(res.placements) / best:,.0f} placements/s"
    )

    # a queue where everything fits: 10,000 1-GPU requests on 2,000 free nodes (16,000 GPUs)
    small = [
        PlacementRequest(f"s{i}", "org", GPU, 1, "container", T0 + timedelta(seconds=i))
        for i in range(10_000)
    ]
    nodes = inventory()
    t = time.perf_counter()
    res = schedule_queue(small, nodes, {}, {})
    dt = time.perf_counter() - t
    print(
        f"10,000 one-GPU requests, all placeable: {dt * 1e3:.1f} ms, {len(res.placements) / dt:,.0f} placements/s"
    )


if __name__ == "__main__":
    main()
