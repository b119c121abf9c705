"""The instance transition table, the audit trail, run segments and the metering interface."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from instances.choices import INSTANCE_TRANSITIONS, IllegalTransition, InstanceStatus

S = InstanceStatus
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def catalog(db: Any) -> None:
    from django.core.management import call_command

    call_command("seed_catalog", verbosity=0)


@pytest.fixture
def instance(alice: Any, alice_org: Any, catalog: None) -> Any:
    from instances.models import GpuType, Instance

    return Instance.objects.create(
        organization=alice_org,
        created_by=alice,
        name="i1",
        kind="interactive",
        gpu_type=GpuType.objects.get(code="A100-80G-SXM"),
        gpu_count=4,
        command=["sleep", "1"],
        submitted_at=T0,
    )


def test_seed_gpu_catalog_is_idempotent_and_prices_cpu_local(catalog: None) -> None:
    from django.core.management import call_command

    from billing.pricing import gpu_price_at
    from instances.models import GpuType, Image

    call_command("seed_gpu_catalog", verbosity=0)
    assert sorted(GpuType.objects.values_list("code", flat=True)) == [
        "A100-80G-SXM",
        "H100-80G-SXM",
        "L40S-48G",
        "RTX-4090-24G",
        "cpu-local",
    ]
    assert Image.objects.count() == 3
    assert gpu_price_at(gpu_type="cpu-local") == 600_000


def test_the_table_lists_every_status_and_no_self_loops() -> None:
    assert set(INSTANCE_TRANSITIONS) == set(S.values)
    for current, targets in INSTANCE_TRANSITIONS.items():
        assert current not in targets
        assert targets <= set(S.values)


@pytest.mark.parametrize("current", list(S.values))
@pytest.mark.parametrize("target", list(S.values))
def test_every_pair_is_allowed_exactly_when_the_table_says(instance: Any, current: str, target: str) -> None:
    from instances.models import Instance, InstanceTransition
    from instances.services import instance_transition

    Instance.objects.filter(pk=instance.pk).update(status=current)
    instance.refresh_from_db()
    if target in INSTANCE_TRANSITIONS[current]:
        instance_transition(instance=instance, to=target, reason="test", now=T0)
        assert Instance.objects.get(pk=instance.pk).status == target
        assert list(InstanceTransition.objects.values_list("from_status", "to_status")) == [(current, target)]
    else:
        with pytest.raises(IllegalTransition):
            instance_transition(instance=instance, to=target, reason="test", now=T0)
        assert Instance.objects.get(pk=instance.pk).status == current
        assert InstanceTransition.objects.count() == 0


def test_a_stale_instance_object_cannot_apply_a_transition(instance: Any) -> None:
    from instances.models import Instance
    from instances.services import instance_transition

    stale = Instance.objects.get(pk=instance.pk)
    instance_transition(instance=instance, to=S.SCHEDULING, now=T0)
    instance_transition(instance=instance, to=S.STOPPED, now=T0)
    with pytest.raises(IllegalTransition):
        instance_transition(instance=stale, to=S.SCHEDULING, now=T0)  # stale says pending; it is stopped


def test_running_opens_and_closes_one_segment_with_audit_rows(instance: Any) -> None:
    from instances.models import InstanceRunSegment
    from instances.services import instance_transition
    from portal.models import AuditEvent

    for i, to in enumerate(
        [
            S.SCHEDULING,
            S.PROVISIONING,
            S.RUNNING,
            S.PREEMPTED,
            S.SCHEDULING,
            S.PROVISIONING,
            S.RUNNING,
            S.STOPPING,
            S.STOPPED,
        ]
    ):
        instance_transition(instance=instance, to=to, now=T0 + timedelta(minutes=i))
    segments = list(InstanceRunSegment.objects.values_list("started_at", "ended_at"))
    assert segments == [
        (T0 + timedelta(minutes=2), T0 + timedelta(minutes=3)),
        (T0 + timedelta(minutes=6), T0 + timedelta(minutes=7)),
    ]
    actions = list(
        AuditEvent.objects.filter(action__startswith="instances.instance.")
        .order_by("id")
        .values_list("action", flat=True)
    )
    assert actions == [
        "instances.instance.scheduling",
        "instances.instance.provisioning",
        "instances.instance.running",
        "instances.instance.preempted",
        "instances.instance.scheduling",
        "instances.instance.provisioning",
        "instances.instance.running",
        "instances.instance.stopping",
        "instances.instance.stopped",
    ]


def test_run_segments_overlapping_returns_the_metering_fields(instance: Any, alice_org: Any) -> None:
    from instances.models import InstanceRunSegment
    from instances.selectors import run_segments_overlapping

    InstanceRunSegment.objects.create(instance=instance, started_at=T0, ended_at=T0 + timedelta(minutes=5))
    InstanceRunSegment.objects.create(
        instance=instance, started_at=T0 + timedelta(minutes=30), seen_until=T0 + timedelta(minutes=41)
    )
    rows = list(run_segments_overlapping(T0 + timedelta(minutes=4), T0 + timedelta(minutes=60)))
    assert rows == [
        {
            "instance_id": instance.pk,
            "organization_id": alice_org.pk,
            "gpu_type": "A100-80G-SXM",
            "gpu_count": 4,
            "mode": "container",
            "tier": "on_demand",
            "started_at": T0,
            "ended_at": T0 + timedelta(minutes=5),
            "seen_until": None,
        },
        {
            "instance_id": instance.pk,
            "organization_id": alice_org.pk,
            "gpu_type": "A100-80G-SXM",
            "gpu_count": 4,
            "mode": "container",
            "tier": "on_demand",
            "started_at": T0 + timedelta(minutes=30),
            "ended_at": None,
            "seen_until": T0 + timedelta(minutes=41),  # the last sighting: how far metering charges it
        },
    ]
    assert list(run_segments_overlapping(T0 + timedelta(minutes=5), T0 + timedelta(minutes=30))) == []


def test_a_second_open_segment_is_refused_by_the_database(instance: Any) -> None:
    from django.db import IntegrityError, transaction

    from instances.models import InstanceRunSegment

    InstanceRunSegment.objects.create(instance=instance, started_at=T0)
    with pytest.raises(IntegrityError), transaction.atomic():
        InstanceRunSegment.objects.create(instance=instance, started_at=T0 + timedelta(minutes=1))
