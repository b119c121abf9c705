"""The portal's scheduling pass (instances/scheduling_pass.py): set-based writes whose statement count does
not grow with the queue, and a capacity index kept between passes that stays equal to the database."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_kept_index() -> Any:
    from instances.scheduling_pass import inventory_cache_clear

    inventory_cache_clear()
    yield
    inventory_cache_clear()


def queued(org: Any, gpu_type: str, gpus: int, t: int, *, mode: str = "container", name: str = "") -> Any:
    from instances.models import GpuType, Instance

    return Instance.objects.create(
        organization=org,
        name=name or f"i{t}",
        kind="interactive",
        gpu_type=GpuType.objects.get(code=gpu_type),
        gpu_count=gpus,
        mode=mode,
        status="scheduling",
        submitted_at=T0 + timedelta(seconds=t),
    )


def a100_nodes(count: int, *, block: str = "rack-1") -> list[Any]:
    from instances.models import GpuType, Node

    a100 = GpuType.objects.get(code="A100-80G-SXM")
    return [Node.objects.create(name=f"a100-{i:02d}", gpu_type=a100, gpus=8, block=block) for i in range(count)]


def state(org: Any) -> list[tuple[str, str, Any, Any]]:
    from instances.models import Instance

    return [
        (i.name, i.status, i.queue_position, i.placement)
        for i in Instance.objects.filter(organization=org).order_by("submitted_at")
    ]


def pass_queries(org: Any, small: int) -> tuple[int, list[tuple[str, str, Any, Any]]]:
    """On 10 eight-GPU nodes: ``small`` 1-GPU requests, an 80-GPU gang that cannot fit (a node is partly
    used), an invalid 12-GPU request, then ``small`` more 1-GPU requests, which may only backfill partly used
    nodes; returns the statements of one pass and the state."""
    from instances.scheduling_pass import schedule_pass

    a100_nodes(10)
    for t in range(small):
        queued(org, "A100-80G-SXM", 1, t)
    queued(org, "A100-80G-SXM", 80, 1000, mode="bare_metal", name="gang")
    queued(org, "A100-80G-SXM", 12, 1001, name="bad")
    for t in range(small):
        queued(org, "A100-80G-SXM", 1, 2000 + t, name=f"late{t}")
    with CaptureQueriesContext(connection) as ctx:
        schedule_pass(now=T0)
    return len(ctx.captured_queries), state(org)


def test_a_pass_issues_the_same_statements_for_4_or_40_requests(catalog: Any, alice_org: Any) -> None:
    few, after = pass_queries(alice_org, 2)
    assert [row for row in after if row[0] in ("gang", "bad")] == [
        ("gang", "scheduling", 1, []),
        ("bad", "failed", None, []),
    ]
    assert after[0] == ("i0", "provisioning", None, [["a100-00", 1]])
    assert after[-1] == ("late1", "provisioning", None, [["a100-00", 1]])
    from instances.models import Instance, InstanceTransition, JobAttempt, Node

    Instance.objects.all().delete()
    Node.objects.all().delete()
    many, after = pass_queries(alice_org, 20)
    # PostgreSQL: + the advisory lock that serializes passes; the compare-and-set UPDATE of every move, its
    # transition and audit rows, the attempts and the resume steps they consume are one statement
    assert many == few == (15 if connection.vendor == "postgresql" else 20)
    # 20 fill a100-00, -01 and half of -02; of the 20 behind the gang, 4 backfill -02's free half
    assert sum(1 for row in after if row[1] == "provisioning") == 24
    assert [row[2] for row in after if row[1] == "scheduling"] == list(range(1, 18))
    assert JobAttempt.objects.filter(instance__status="provisioning").count() == 24
    assert set(JobAttempt.objects.values_list("number", flat=True)) == {1}
    assert not JobAttempt.objects.filter(token_sha256="").exists()
    # each attempt's token comes from its own random salt, and the stored hash is the token's
    from instances.services import attempt_token

    attempts = list(JobAttempt.objects.all())
    assert len({a.token_salt for a in attempts}) == len(attempts) == 24
    assert all(len(a.token_salt) == 32 and int(a.token_salt, 16) >= 0 for a in attempts)
    assert all(hashlib.sha256(attempt_token(a).encode()).hexdigest() == a.token_sha256 for a in attempts)
    assert InstanceTransition.objects.filter(to_status="provisioning").count() == 24
    failed = InstanceTransition.objects.filter(to_status="failed").values_list("reason", flat=True)
    assert [r[:40] for r in failed] == ["requests of 8 or more GPUs take whole 8-"]


def test_the_gang_waits_with_its_position_and_reason(catalog: Any, alice_org: Any) -> None:
    from instances.models import Instance
    from portal.models import AuditEvent

    pass_queries(alice_org, 2)
    gang = Instance.objects.get(name="gang")
    assert (gang.queue_position, gang.status_reason) == (1, "needs 10 free A100-80G-SXM nodes, 9 free")
    placed = Instance.objects.get(name="i0")
    assert AuditEvent.objects.filter(
        action="instances.instance.provisioning", object_id=str(placed.pk)
    ).get().extra == {"from": "scheduling", "to": "provisioning", "reason": "placed on a100-00"}


def test_the_kept_index_follows_releases_cordons_and_new_nodes(
    catalog: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances import scheduling_pass
    from instances.models import Instance, Node
    from instances.services import instance_transition, node_set_state

    nodes = a100_nodes(2)
    first, second, third = (queued(alice_org, "A100-80G-SXM", 8, t) for t in range(3))

    def run() -> list[str]:
        with django_capture_on_commit_callbacks(execute=True):
            placed = scheduling_pass.schedule_pass(now=T0)
        assert scheduling_pass._cache is not None  # kept for the next pass
        return [i.name for i in placed]

    assert run() == ["i0", "i1"]
    third.refresh_from_db()
    assert (third.queue_position, third.status_reason) == (1, "needs 1 free A100-80G-SXM node, 0 free")
    first.refresh_from_db()
    instance_transition(instance=first, to="stopped", reason="test", placement=[])
    node_set_state(node=nodes[0], state="cordoned")  # the node i0 freed: not usable
    assert run() == []
    third.refresh_from_db()
    assert third.status_reason == "needs 1 free A100-80G-SXM node, 0 free"
    node_set_state(node=nodes[0], state="ready")
    assert run() == ["i2"]
    assert Instance.objects.get(pk=third.pk).placement == [["a100-00", 8]]
    second.refresh_from_db()
    instance_transition(instance=second, to="stopped", reason="test", placement=[])
    fourth = queued(alice_org, "A100-80G-SXM", 16, 10, mode="bare_metal")
    assert run() == []  # one node free, two needed
    fourth.refresh_from_db()
    assert fourth.status_reason == "needs 2 free A100-80G-SXM nodes, 1 free"
    Node.objects.create(name="a100-02", gpu_type=nodes[0].gpu_type, gpus=8, block="rack-1")
    assert run() == ["i10"]  # the new node is in the index
    fourth.refresh_from_db()
    assert (fourth.status, fourth.placement) == ("provisioning", [["a100-01", 8], ["a100-02", 8]])


def test_bulk_rows_are_written_in_order_and_bad_input_writes_nothing(catalog: Any, alice_org: Any) -> None:
    from instances.bulk import rows_insert, rows_update
    from instances.models import Instance, InstanceTransition

    a, b = queued(alice_org, "A100-80G-SXM", 1, 0), queued(alice_org, "A100-80G-SXM", 2, 1)
    pks = rows_insert(
        InstanceTransition,
        2,
        {
            "instance_id": [b.pk, a.pk],
            "from_status": ["pending"] * 2,
            "to_status": ["scheduling"] * 2,
            "reason": ["x", "y"],
        },
    )
    rows = InstanceTransition.objects.filter(pk__in=pks).order_by("pk").values_list("instance_id", "reason", "actor_id")
    assert list(rows) == [(b.pk, "x", None), (a.pk, "y", None)]
    rows_update(
        Instance,
        [b.pk, a.pk],
        {"queue_position": [7, 8], "placement": [[["n", 1]], []]},
        where={"status": "scheduling"},
    )
    after = Instance.objects.order_by("pk").values_list("queue_position", "placement")
    assert list(after) == [(8, []), (7, [["n", 1]])]
    with pytest.raises(ValueError, match="one value per row"):
        rows_insert(InstanceTransition, 2, {"instance_id": [a.pk]})
    with pytest.raises(ValueError, match="one value per primary key"):
        rows_update(Instance, [a.pk, b.pk], {"queue_position": [1]})
    assert InstanceTransition.objects.count() == 2
    assert list(Instance.objects.order_by("pk").values_list("queue_position", flat=True)) == [8, 7]


def test_a_pass_moves_plain_rows_emits_state_changes_and_returns_instances(
    catalog: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """The pass moves instances without model objects (``InstanceRow``): webhooks still get each move, the
    audit and transition rows carry the same values, and the placed instances come back as ``Instance``s."""
    from instances.models import Instance, InstanceTransition, JobAttempt
    from instances.scheduling_pass import schedule_pass
    from portal.models import AuditEvent
    from portal.webhooks.models import WebhookEndpoint, WebhookEvent

    WebhookEndpoint.objects.create(
        organization=alice_org, url="https://hooks.example.com/x", event_types=["instance.state_changed"], secret="s"
    )
    a100_nodes(1)
    first, second = queued(alice_org, "A100-80G-SXM", 4, 0), queued(alice_org, "A100-80G-SXM", 4, 1)
    bad = queued(alice_org, "A100-80G-SXM", 12, 2, name="bad")
    with django_capture_on_commit_callbacks(execute=False):
        placed = schedule_pass(now=T0)
    assert len(placed) == 2
    assert [(i.pk, i.name, i.status, i.placement, i.queue_position) for i in placed] == [
        (first.pk, "i0", "provisioning", [["a100-00", 4]], None),
        (second.pk, "i1", "provisioning", [["a100-00", 4]], None),
    ]
    assert isinstance(placed[0], Instance) and placed[0].organization == alice_org  # deferred columns load
    events = WebhookEvent.objects.filter(type="instance.state_changed").order_by("pk")
    placed_event = {"from": "scheduling", "to": "provisioning", "reason": "placed on a100-00"}
    assert [e.data for e in events] == [
        {"instance_id": first.pk, "name": "i0", **placed_event},
        {"instance_id": second.pk, "name": "i1", **placed_event},
        {
            "instance_id": bad.pk,
            "name": "bad",
            "from": "scheduling",
            "to": "failed",
            "reason": InstanceTransition.objects.get(instance=bad).reason,
        },
    ]
    assert list(
        AuditEvent.objects.filter(object_type="instances.instance")
        .order_by("pk")
        .values_list("action", "organization_id", "object_id", "actor_id")
    ) == [
        ("instances.instance.provisioning", alice_org.pk, str(first.pk), None),
        ("instances.instance.provisioning", alice_org.pk, str(second.pk), None),
        ("instances.instance.failed", alice_org.pk, str(bad.pk), None),
    ]
    assert list(
        InstanceTransition.objects.order_by("pk").values_list("instance_id", "from_status", "to_status", "created_at")
    ) == [
        (first.pk, "scheduling", "provisioning", T0),
        (second.pk, "scheduling", "provisioning", T0),
        (bad.pk, "scheduling", "failed", T0),
    ]
    assert list(JobAttempt.objects.order_by("pk").values_list("instance_id", "number", "placement")) == [
        (first.pk, 1, [["a100-00", 4]]),
        (second.pk, 1, [["a100-00", 4]]),
    ]
    assert Instance.objects.get(pk=bad.pk).updated_at == T0
    # the reasons are stored as codes with parameters too (instances.reasons), on the instances and transitions
    placed_reason = ("placed", {"nodes": "a100-00"})
    assert [
        Instance.objects.values_list("status_reason_code", "status_reason_params").get(pk=i.pk) for i in (first, second)
    ] == [placed_reason, placed_reason]
    assert (placed[0].status_reason_code, placed[0].status_reason_params) == placed_reason
    assert list(InstanceTransition.objects.order_by("pk").values_list("reason_code", flat=True))[:2] == [
        "placed",
        "placed",
    ]
    gang = Instance.objects.get(pk=bad.pk)
    assert gang.status_reason_code == InstanceTransition.objects.get(instance=bad).reason_code != ""


def test_text_array_quotes_every_element(db: Any) -> None:
    """The array literal the pass locks its nodes with: quotes, backslashes, commas and empty names survive
    (read back through PostgreSQL when the tests run on it)."""
    from instances.bulk import text_array

    names = ["a", 'b"c', "d\\e", "x,y", "", "q'z", "NULL"]
    assert text_array(names) == '{"a","b\\"c","d\\\\e","x,y","","q\'z","NULL"}'
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("SELECT %s::text[]", [text_array(names)])
            assert cur.fetchone()[0] == names
