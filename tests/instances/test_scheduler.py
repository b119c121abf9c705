"""Gang scheduler rules (instances/scheduler.py): all-or-nothing, whole nodes, best fit, blocks, quota, queue."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from instances.scheduler import (
    CODE_BEHIND,
    CODE_CAPACITY,
    CODE_EXCEEDS_INVENTORY,
    CODE_EXCEEDS_QUOTA,
    CODE_INVALID,
    CODE_NO_NODES,
    CODE_NOT_MULTIPLE,
    CODE_QUOTA,
    CapacityIndex,
    NodeView,
    Placement,
    PlacementRequest,
    Unplaceable,
    apply_placements,
    place,
    schedule_queue,
)

H100 = "H100-80G-SXM"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cluster(per_block: dict[str, int], *, gpu_type: str = H100, size: int = 8, prefix: str = "n") -> list[NodeView]:
    """Whole free nodes: ``{"b0": 50, …}`` -> 50 nodes named ``n-b0-000`` … in block b0."""
    return [
        NodeView(f"{prefix}-{block}-{i:03d}", gpu_type, size, size, block)
        for block, count in per_block.items()
        for i in range(count)
    ]


def req(
    rid: str, gpus: int, *, mode: str = "container", org: str = "acme", gpu_type: str = H100, t: int = 0
) -> PlacementRequest:
    return PlacementRequest(rid, org, gpu_type, gpus, mode, T0 + timedelta(seconds=t))  # type: ignore[arg-type]


NOT_MULTIPLE_12 = (
    "requests of 8 or more GPUs take whole 8-GPU H100-80G-SXM nodes: ask for a multiple of 8 GPUs (8 or 16), not 12"
)
FOUR_BLOCKS = {"b0": 50, "b1": 50, "b2": 50, "b3": 50}


# --- the 1024-GPU gang ----------------------------------------------------------------------------------


def test_a_1024_gpu_bare_metal_gang_takes_exactly_128_whole_nodes() -> None:
    nodes = cluster(FOUR_BLOCKS)  # 200 nodes x 8 GPUs

    result = place(req("big", 1024, mode="bare_metal"), nodes)

    assert isinstance(result, Placement)
    assert len(result.assignments) == 128
    assert len(set(result.node_names)) == 128
    assert {g for _, g in result.assignments} == {8}
    assert result.gpus == 1024
    assert result.block is None  # no block has 128 nodes: it spans blocks
    blocks = Counter(n.split("-")[1] for n in result.node_names)
    assert len(blocks) == 3  # fewest blocks: 50 + 50 + 28
    assert sorted(blocks.values()) == [28, 50, 50]


def test_a_1024_gpu_gang_with_127_free_nodes_gets_nothing_and_a_reason() -> None:
    nodes = cluster(FOUR_BLOCKS)
    # 73 nodes busy (one GPU in use each is enough to make them not whole): 127 whole free nodes left
    nodes = [n if i >= 73 else NodeView(n.name, n.gpu_type, 8, 7, n.block) for i, n in enumerate(nodes)]

    result = place(req("big", 1024, mode="bare_metal"), nodes)

    assert result == Unplaceable("needs 128 free H100-80G-SXM nodes, 127 free", CODE_CAPACITY)


def test_a_gang_larger_than_the_inventory_says_so() -> None:
    result = place(req("huge", 1024, mode="bare_metal"), cluster({"b0": 100}))

    assert result == Unplaceable(
        "needs 128 free H100-80G-SXM nodes, the inventory has 100 (100 free)", CODE_EXCEEDS_INVENTORY
    )


# --- whole nodes and refusals -------------------------------------------------------------------------------


def test_requests_of_eight_or_more_take_whole_nodes() -> None:
    nodes = cluster({"b0": 4})

    result = place(req("r", 16), nodes)

    assert isinstance(result, Placement)
    assert result.assignments == (("n-b0-000", 8), ("n-b0-001", 8))
    assert result.block == "b0"


@pytest.mark.parametrize(
    ("gpus", "mode", "reason"),
    [
        (
            12,
            "container",
            NOT_MULTIPLE_12,
        ),
        (
            4,
            "bare_metal",
            "bare metal take whole 8-GPU H100-80G-SXM nodes: ask for a multiple of 8 GPUs (8), not 4",
        ),
    ],
)
def test_whole_node_requests_that_are_not_a_multiple_are_refused(gpus: int, mode: str, reason: str) -> None:
    result = place(req("r", gpus, mode=mode), cluster({"b0": 4}))

    assert result == Unplaceable(reason, CODE_NOT_MULTIPLE)
    assert result.permanent


@pytest.mark.parametrize("gpus", [0, -1, 1025])
def test_gpu_counts_outside_1_to_1024_are_invalid(gpus: int) -> None:
    result = place(req("r", gpus), cluster({"b0": 200}))

    assert result == Unplaceable(f"a request asks for 1 to 1024 GPUs, not {gpus}", CODE_INVALID)


def test_an_unknown_gpu_type_has_no_nodes() -> None:
    result = place(req("r", 1, gpu_type="B200"), cluster({"b0": 2}))

    assert result == Unplaceable("no ready B200 nodes", CODE_NO_NODES)


# --- best fit and fragmentation -------------------------------------------------------------------------------


def test_a_small_request_goes_to_the_fullest_node_that_still_fits() -> None:
    nodes = [
        NodeView("a", H100, 8, 8, "b0"),
        NodeView("b", H100, 8, 3, "b0"),
        NodeView("c", H100, 8, 2, "b0"),
        NodeView("d", H100, 8, 5, "b0"),
    ]

    assert place(req("r", 3), nodes) == Placement("r", (("b", 3),), "b0")
    assert place(req("r", 2), nodes) == Placement("r", (("c", 2),), "b0")
    assert place(req("r", 4), nodes) == Placement("r", (("d", 4),), "b0")
    assert place(req("r", 6), nodes) == Placement("r", (("a", 6),), "b0")


def test_small_requests_do_not_break_whole_nodes_needed_by_a_gang() -> None:
    # 2 whole nodes and one with 4 free: two 2-GPU requests share the partly used node, the gang still fits
    nodes = [*cluster({"b0": 2}), NodeView("p", H100, 8, 4, "b0")]

    result = schedule_queue([req("s1", 2, t=0), req("s2", 2, t=1), req("gang", 16, t=2)], nodes, quotas={}, usage={})

    assert [(p.request_id, p.assignments) for p in result.placements] == [
        ("s1", (("p", 2),)),
        ("s2", (("p", 2),)),
        ("gang", (("n-b0-000", 8), ("n-b0-001", 8))),
    ]
    assert result.waiting == []


def test_enough_free_gpus_scattered_over_nodes_is_not_enough_for_one_node() -> None:
    nodes = [NodeView(f"f{i}", H100, 8, 3, "b0") for i in range(10)]  # 30 free GPUs, at most 3 per node

    assert place(req("r", 4), nodes) == Unplaceable(
        "needs 4 free H100-80G-SXM GPUs on one node, the most free on any node is 3", CODE_CAPACITY
    )
    assert place(req("r", 8), nodes) == Unplaceable("needs 1 free H100-80G-SXM node, 0 free", CODE_CAPACITY)


# --- node states ---------------------------------------------------------------------------------------------


def test_cordoned_and_draining_nodes_are_never_used() -> None:
    nodes = [
        NodeView("cordoned", H100, 8, 8, "b0", "cordoned"),
        NodeView("draining", H100, 8, 8, "b0", "draining"),
        NodeView("ready", H100, 8, 8, "b1"),
    ]

    assert place(req("one", 8), nodes) == Placement("one", (("ready", 8),), "b1")
    assert place(req("two", 16), nodes) == Unplaceable("needs 2 free H100-80G-SXM nodes, 1 free", CODE_CAPACITY)
    assert place(req("small", 1), nodes) == Placement("small", (("ready", 1),), "b1")
    everything = schedule_queue([req(f"r{i}", 1, t=i) for i in range(20)], nodes, {}, {})
    assert {n for p in everything.placements for n in p.node_names} == {"ready"}
    assert len(everything.placements) == 8


def test_only_cordoned_nodes_means_no_ready_nodes() -> None:
    nodes = [NodeView("c", H100, 8, 8, "b0", "cordoned")]

    assert place(req("r", 1), nodes) == Unplaceable("no ready H100-80G-SXM nodes", CODE_NO_NODES)


# --- topology blocks ---------------------------------------------------------------------------------------------


def test_a_gang_prefers_the_fullest_single_block_that_fits() -> None:
    nodes = cluster({"big": 40, "mid": 20, "small": 10})

    result = place(req("r", 128), nodes)  # 16 nodes: fits in "mid" and "big"; "mid" is the tighter fit

    assert isinstance(result, Placement)
    assert result.block == "mid"
    assert {n.split("-")[1] for n in result.node_names} == {"mid"}
    assert len(result.node_names) == 16


def test_a_gang_spans_the_fewest_blocks_when_no_block_fits() -> None:
    nodes = cluster({"a": 10, "b": 10, "c": 6, "d": 3})

    result = place(req("r", 8 * 14, mode="bare_metal"), nodes)  # 14 nodes: 10 + the smallest block ≥ 4

    assert isinstance(result, Placement)
    assert result.block is None
    assert Counter(n.split("-")[1] for n in result.node_names) == {"a": 10, "c": 4}


# --- quota -----------------------------------------------------------------------------------------------


def test_a_request_over_the_remaining_quota_is_refused_naming_the_quota() -> None:
    result = place(req("r", 32), cluster({"b0": 10}), quota_gpus=64, used_gpus=48)

    assert result == Unplaceable(
        "the organization's GPU quota is 64 GPUs and 48 are in use; this request needs 32 "
        "(waits until 16 more are released)",
        CODE_QUOTA,
    )


def test_a_request_larger_than_the_quota_itself_is_refused_naming_the_quota() -> None:
    result = place(req("r", 128), cluster({"b0": 20}), quota_gpus=64)

    assert result == Unplaceable(
        "needs 128 GPUs but the organization's GPU quota is 64 GPUs; ask support to raise the quota",
        CODE_EXCEEDS_QUOTA,
    )


def test_the_queue_counts_gpus_placed_earlier_in_the_pass_against_the_quota() -> None:
    requests = [req("a", 8, org="acme", t=0), req("b", 8, org="acme", t=1), req("c", 8, org="other", t=2)]

    result = schedule_queue(requests, cluster({"b0": 4}), quotas={"acme": 12}, usage={"acme": 0})

    assert [p.request_id for p in result.placements] == ["a", "c"]
    assert [(w.request.request_id, w.position, w.code) for w in result.waiting] == [("b", 1, CODE_QUOTA)]


# --- the queue ---------------------------------------------------------------------------------------------


def test_waiting_requests_get_positions_per_gpu_type_and_reasons() -> None:
    nodes = cluster({"b0": 12}) + cluster({"b0": 1}, gpu_type="L40S-48G", prefix="l")
    requests = [
        req("gang1", 64, t=0),  # placed: 8 of 12 nodes
        req("gang2", 64, t=1),  # 4 free: waits, first in line
        req("gang3", 32, t=2),  # would fit in the 4 free nodes but waits behind gang2
        req("l1", 8, gpu_type="L40S-48G", t=3),  # another GPU type: not held up
        req("l2", 4, gpu_type="L40S-48G", t=4),
        req("bad", 12, t=5),  # permanent refusal: no position
    ]

    result = schedule_queue(requests, nodes, {}, {})

    assert [p.request_id for p in result.placements] == ["gang1", "l1"]
    assert [(w.request.request_id, w.position, w.code, w.reason) for w in result.waiting] == [
        ("gang2", 1, CODE_CAPACITY, "needs 8 free H100-80G-SXM nodes, 4 free"),
        (
            "gang3",
            2,
            CODE_BEHIND,
            "needs 4 free H100-80G-SXM nodes (4 free); waits behind an earlier request",
        ),
        ("l2", 1, CODE_CAPACITY, "needs 4 free L40S-48G GPUs on one node, the most free on any node is 0"),
        (
            "bad",
            None,
            CODE_NOT_MULTIPLE,
            NOT_MULTIPLE_12,
        ),
    ]


def test_small_requests_backfill_only_onto_partly_used_nodes_while_a_gang_waits() -> None:
    nodes = [*cluster({"b0": 3}), NodeView("p", H100, 8, 2, "b0")]
    requests = [
        req("gang", 32, t=0),  # needs 4 whole nodes, 3 free: waits
        req("fits-partial", 2, t=1),  # fits on the partly used node: allowed, the gang could not use it
        req("needs-whole", 4, t=2),  # would need a whole node the gang is waiting for: waits
    ]

    result = schedule_queue(requests, nodes, {}, {})

    assert [(p.request_id, p.assignments) for p in result.placements] == [("fits-partial", (("p", 2),))]
    assert [(w.request.request_id, w.position, w.code) for w in result.waiting] == [
        ("gang", 1, CODE_CAPACITY),
        ("needs-whole", 2, CODE_BEHIND),
    ]


def test_a_waiting_single_node_request_holds_back_every_later_request_of_its_type() -> None:
    nodes = [NodeView("a", H100, 8, 3, "b0"), NodeView("b", H100, 8, 1, "b0")]

    result = schedule_queue([req("four", 4, t=0), req("one", 1, t=1)], nodes, {}, {})

    assert result.placements == []
    assert [(w.request.request_id, w.position, w.code) for w in result.waiting] == [
        ("four", 1, CODE_CAPACITY),
        ("one", 2, CODE_BEHIND),
    ]


def test_requests_are_taken_in_submission_order_not_list_order() -> None:
    nodes = cluster({"b0": 1})

    result = schedule_queue([req("late", 8, t=5), req("early", 8, t=1)], nodes, {}, {})

    assert [p.request_id for p in result.placements] == ["early"]
    assert [w.request.request_id for w in result.waiting] == ["late"]


def test_capacity_freed_by_a_stop_is_offered_at_once_on_the_next_pass() -> None:
    nodes = cluster({"b0": 16})
    first = schedule_queue([req("running", 96, t=0), req("queued", 64, t=1)], nodes, {}, {})
    assert [p.request_id for p in first.placements] == ["running"]
    busy = apply_placements(nodes, first.placements)

    # "running" stops: its nodes are free again; the queue is simply scheduled again
    second = schedule_queue([w.request for w in first.waiting], nodes, {}, {})
    still_busy = schedule_queue([w.request for w in first.waiting], busy, {}, {})

    assert [p.request_id for p in second.placements] == ["queued"]
    assert len(second.placements[0].assignments) == 8
    assert still_busy.placements == []


def test_a_request_larger_than_the_inventory_does_not_block_its_gpu_type() -> None:
    result = schedule_queue([req("huge", 1024, t=0), req("small", 8, t=1)], cluster({"b0": 10}), {}, {})

    assert [p.request_id for p in result.placements] == ["small"]
    assert [(w.request.request_id, w.position, w.code) for w in result.waiting] == [("huge", 1, CODE_EXCEEDS_INVENTORY)]


def test_a_pass_never_gives_a_gpu_twice() -> None:
    nodes = cluster({"b0": 30, "b1": 30}) + [NodeView(f"p{i}", H100, 8, i % 8, "b2") for i in range(40)]
    sizes = [1, 2, 3, 4, 8, 16, 64, 5, 7, 24]
    requests = [req(f"r{i}", sizes[i % len(sizes)], t=i) for i in range(200)]

    result = schedule_queue(requests, nodes, {}, {})

    after = apply_placements(nodes, result.placements)  # raises if any node is over-committed
    assert all(n.gpus_free >= 0 for n in after)
    assert len(result.placements) + len(result.waiting) == 200


# --- the index kept between passes --------------------------------------------------------------------------
def _answers(index: CapacityIndex, gpu_types: list[str]) -> list[object]:
    """Every question a pass asks the index, for each GPU type."""
    out: list[object] = []
    for t in gpu_types:
        pool = index.pool(t)
        out.append((pool.whole_free_count(), pool.max_free_on_node(), pool.max_free_on_node(partly_used_only=True)))
        out += [pool.find_in_node(g, partly_used_only=p) for g in range(1, 9) for p in (False, True)]
        out += [pool.find_whole_nodes(k) for k in range(1, pool.whole_free_count() + 2)]
    return out


@st.composite
def inventories_and_ops(draw: st.DrawFn) -> tuple[list[NodeView], list[tuple[int, int, bool]]]:
    count = draw(st.integers(1, 24))
    nodes = [
        NodeView(
            f"n{draw(st.integers(0, 999)):03d}-{i}",
            draw(st.sampled_from([H100, "A100"])),
            total := draw(st.sampled_from([8, 8, 8, 4])),
            draw(st.integers(0, total)),
            draw(st.sampled_from(["b0", "b1", "b2"])),
            draw(st.sampled_from(["ready", "ready", "cordoned"])),
        )
        for i in range(count)
    ]
    ops = draw(st.lists(st.tuples(st.integers(0, count - 1), st.integers(1, 8), st.booleans()), max_size=40))
    return nodes, ops


@settings(max_examples=150, deadline=None)
@given(inventories_and_ops())
def test_an_index_updated_by_placements_and_releases_answers_like_a_fresh_rebuild(
    case: tuple[list[NodeView], list[tuple[int, int, bool]]],
) -> None:
    nodes, ops = case
    kept = CapacityIndex(nodes)
    free = {n.name: n.gpus_free for n in nodes}
    types = sorted({n.gpu_type for n in nodes})
    for i, gpus, is_take in ops:
        node = nodes[i]
        if node.state != "ready":
            continue
        if is_take:
            gpus = min(gpus, free[node.name])
            if gpus:
                kept.take(node.name, gpus)
                free[node.name] -= gpus
        else:
            gpus = min(gpus, node.gpus_total - free[node.name])
            if gpus:
                kept.release(node.name, gpus)
                free[node.name] += gpus
        fresh = CapacityIndex([dataclasses.replace(n, gpus_free=free[n.name]) for n in nodes])
        assert _answers(kept, types) == _answers(fresh, types)
    queue = [
        req(f"q{j}", g, t=j, gpu_type=t)
        for j, (g, t) in enumerate([(1, H100), (8, H100), (2, "A100"), (16, H100), (4, "A100"), (3, H100)])
    ]
    fresh = CapacityIndex([dataclasses.replace(n, gpus_free=free[n.name]) for n in nodes])
    assert schedule_queue(queue, kept, {}, {}) == schedule_queue(queue, fresh, {}, {})


def test_a_pass_on_a_kept_index_commits_its_placements_into_it() -> None:
    nodes = cluster({"b0": 2})
    index = CapacityIndex(nodes)
    first = schedule_queue([req("a", 8, t=0), req("b", 3, t=1)], index, {}, {})
    assert [p.assignments for p in first.placements] == [(("n-b0-000", 8),), (("n-b0-001", 3),)]
    assert (index.free_gpus("n-b0-000"), index.free_gpus("n-b0-001")) == (0, 5)
    second = schedule_queue([req("c", 8, t=2)], index, {}, {})
    assert second.placements == [] and second.waiting[0].code == CODE_CAPACITY
    index.release("n-b0-000", 8)
    third = schedule_queue([req("c", 8, t=2)], index, {}, {})
    assert third.placements[0].assignments == (("n-b0-000", 8),)


def test_taking_more_than_a_node_has_free_is_refused() -> None:
    index = CapacityIndex(cluster({"b0": 1}))
    index.take("n-b0-000", 6)
    with pytest.raises(ValueError, match="cannot take 3 GPUs, 2 free"):
        index.take("n-b0-000", 3)
    with pytest.raises(ValueError, match="cannot release 7 GPUs, 2 of 8 free"):
        index.release("n-b0-000", 7)
    with pytest.raises(KeyError):
        index.take("no-such-node", 1)
    assert index.free_gpus("n-b0-000") == 2
