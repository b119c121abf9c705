"""The interruptible tier (issue 14, item 4): an on-demand launch that needs the capacity preempts an
interruptible training job through the lost-node path (notice → SIGTERM → checkpoint → ``preempted``, not a
crash), which resumes when capacity returns; every minute it ran is charged at the discounted price.
Against the stand-in backend, over frozen time; the victim choice is tested as a pure function."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from instances_support import FakeBackend, accept, fund
from test_launch import counts, spec

from instances.backends.base import JobStatus

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def frozen(catalog: None, alice_org: Any, alice: Any, dataset_version: Any, time_machine: Any) -> Any:
    """The catalog priced now, then time frozen at T0 (later), alice's organization funded with 10 CNY, the
    dataset's license accepted and one local node of 2 CPU slots."""
    from instances.models import GpuType, Node

    time_machine.move_to(T0, tick=False)
    fund(alice_org, 10)
    accept(alice_org, alice, dataset_version)
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    return alice_org


def test_the_price_book_discounts_the_interruptible_tier_and_the_quote_shows_both(frozen: Any) -> None:
    from billing.pricing import PriceBook, discounted_price_micros, price_quote, tier_discount_set

    assert discounted_price_micros(price_per_gpu_hour_micros=8_000_000, discount_bps=4000) == 4_800_000
    assert discounted_price_micros(price_per_gpu_hour_micros=1, discount_bps=5000) == 1  # half up, once
    book = PriceBook()
    assert book.at("cpu-local", "container", T0) == 600_000
    assert book.at("cpu-local", "container", T0, "interruptible") == 360_000
    on_demand = price_quote(organization=frozen, gpu_type="cpu-local", gpu_count=2, mode="container")
    cheap = price_quote(organization=frozen, gpu_type="cpu-local", gpu_count=2, mode="container", tier="interruptible")
    assert (on_demand.price_per_hour_micros, cheap.price_per_hour_micros) == (1_200_000, 720_000)
    for bad in (-1, 10_001, "40"):
        with pytest.raises(ValueError, match="0 to 10000 basis points"):
            tier_discount_set(tier="interruptible", discount_bps=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interruptible tier"):
        tier_discount_set(tier="on_demand", discount_bps=100)


def test_an_interruptible_training_launch_without_a_checkpoint_interval_is_refused(
    frozen: Any, alice: Any, dataset_version: Any, fake_backend: FakeBackend
) -> None:
    from instances.services import LaunchError, instance_launch

    before = counts()
    no_interval = {"checkpoint_every_minutes": 0, "checkpoint_every_steps": 0}
    for changes, code, field in [
        (no_interval, "checkpoint_required", "checkpoint_every_minutes"),
        ({**no_interval, "kind": "interactive", "command": [""]}, "invalid", "command"),
        ({"tier": "spot"}, "invalid_tier", "tier"),
    ]:
        with pytest.raises(LaunchError) as exc:
            instance_launch(
                organization=frozen,
                user=alice,
                spec=spec(dataset_version_ids=[dataset_version.pk], **{"tier": "interruptible", **changes}),
            )
        assert (exc.value.code, exc.value.field) == (code, field)
    with pytest.raises(LaunchError, match="An interruptible training job needs a checkpoint interval"):
        instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], tier="interruptible", **no_interval),
        )
    assert counts() == before  # nothing made, nothing billed
    assert fake_backend.submitted == []


def test_an_on_demand_launch_preempts_an_interruptible_job_which_resumes_and_is_charged_at_the_discount(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
) -> None:
    from billing.metering import metering_tick
    from billing.models import UsageRecord
    from instances.models import Instance
    from instances.selectors import preemption_summary
    from instances.services import instance_launch, instance_stop, instances_reconcile

    def reconcile(at: datetime) -> None:
        time_machine.move_to(at, tick=False)
        with django_capture_on_commit_callbacks(execute=True):
            instances_reconcile(now=at, backend=fake_backend)  # type: ignore[arg-type]

    with django_capture_on_commit_callbacks(execute=True):
        cheap = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], tier="interruptible", checkpoint_every_steps=5),
        )
    job = cheap.job
    assert (cheap.tier, cheap.status) == ("interruptible", "provisioning")
    reconcile(T0)
    cheap.refresh_from_db()
    assert cheap.status == "running"

    # five minutes later an on-demand instance needs one of the two slots: the job gets the notice and is
    # stopped (SIGTERM, the runtime checkpoints), recorded as preempted; the on-demand instance is placed
    time_machine.move_to(T0 + 5 * MIN, tick=False)
    with django_capture_on_commit_callbacks(execute=True):
        urgent = instance_launch(
            organization=frozen, user=alice, spec=spec(kind="interactive", command=["sleep", "600"], gpu_count=1)
        )
    cheap.refresh_from_db()
    job.refresh_from_db()
    urgent.refresh_from_db()
    assert fake_backend.stopped == [job.attempts.get(number=1).handle]
    assert (urgent.tier, urgent.status) == ("on_demand", "provisioning")
    assert cheap.status == "scheduling"  # resumed at once, queued behind on-demand work until capacity returns
    assert cheap.preempt_requested_at is None
    assert (job.preempt_count, job.crash_count) == (1, 0)
    assert job.attempts.get(number=1).state == "preempted"
    preempted = cheap.transitions.get(to_status="preempted")
    assert preempted.reason == (
        "preempted for an on-demand request (interruptible tier): checkpoint saved at the current step, resumes "
        "exactly from it when capacity returns (not a crash)"
    )
    reconcile(T0 + 6 * MIN)
    urgent.refresh_from_db()
    assert urgent.status == "running"

    # the on-demand instance stops at T0+20: capacity returns and the job resumes from its newest checkpoint
    time_machine.move_to(T0 + 20 * MIN, tick=False)
    with django_capture_on_commit_callbacks(execute=True):
        instance_stop(instance=urgent, reason="done", acting_user=alice)
    cheap.refresh_from_db()
    assert cheap.status == "provisioning"
    second = job.attempts.get(number=2)
    assert second.resume_from_step == -1  # the newest complete checkpoint: the one saved on SIGTERM
    reconcile(T0 + 21 * MIN)
    fake_backend.states[second.handle] = JobStatus("succeeded", 0, "finished")
    reconcile(T0 + 30 * MIN)
    cheap.refresh_from_db()
    assert list(cheap.transitions.values_list("to_status", flat=True)) == [
        "scheduling",
        "provisioning",
        "running",
        "preempted",
        "scheduling",
        "provisioning",
        "running",
        "stopped",
    ]

    # every minute it ran (5 + 9) at 0.36 CNY per slot-hour (0.60 less 40 %) for 2 slots: 0.012 CNY a minute
    time_machine.move_to(T0 + 31 * MIN, tick=False)
    metering_tick(now=T0 + 31 * MIN)
    rows = list(
        UsageRecord.objects.filter(instance_id=cheap.pk)
        .order_by("minute")
        .values_list("minute", "price_per_gpu_hour_micros", "amount_micros")
    )
    ran = [T0 + i * MIN for i in range(5)] + [T0 + (21 + i) * MIN for i in range(9)]
    assert rows == [(m, 360_000, 12_000) for m in ran]
    on_demand_rows = UsageRecord.objects.filter(instance_id=urgent.pk).values_list(
        "price_per_gpu_hour_micros", flat=True
    )
    assert set(on_demand_rows) == {600_000} and len(on_demand_rows) == 14
    summary = preemption_summary(Instance.objects.get(pk=cheap.pk))
    assert summary == {
        "tier": "interruptible",
        "preemptions": 1,
        "steps_rerun": 0,
        "minutes_rerun": 0,
        "minutes_billed": 14,
        "charged_micros": 168_000,
        "on_demand_micros": 280_000,
        "saved_micros": 112_000,
    }


def _holder(pk: int, minute: int, placement: list[tuple[str, int]], freeing: bool = False) -> Any:
    from instances.preemption import Holder

    return Holder(pk, T0 + minute * MIN, sum(g for _, g in placement), tuple(placement), freeing)


def _pool(free: dict[str, int]) -> Any:
    from instances.scheduler import CapacityIndex, NodeView

    return CapacityIndex([NodeView(n, "A100", 8, f, "rack-1") for n, f in sorted(free.items())]).pool("A100")


def _request(gpus: int, mode: str = "container") -> Any:
    from instances.scheduler import PlacementRequest

    return PlacementRequest("r", "o", "A100", gpus, mode, T0)  # type: ignore[arg-type]


def test_victims_are_the_fewest_gpus_that_free_enough_then_the_newest() -> None:
    from instances.preemption import victims_choose

    # node a: 1 free, interruptible 1 (4 GPUs, oldest), 2 (2 GPUs), 3 (1 GPU, newest); node b: full, 4 (8 GPUs)
    holders = [
        _holder(1, 0, [("a", 4)]),
        _holder(2, 1, [("a", 2)]),
        _holder(3, 2, [("a", 1)]),
        _holder(4, 3, [("b", 8)]),
    ]
    pool = _pool({"a": 1, "b": 0})
    pick = lambda gpus: [h.pk for h in victims_choose(_request(gpus), pool, holders) or []]  # noqa: E731
    assert pick(2) == [3]  # 1 GPU frees enough
    assert pick(3) == [2]  # 2 GPUs (not 4, not 2 + 1 = 3 GPUs)
    assert pick(4) == [3, 2]  # 3 GPUs beat 4 (victims listed newest first)
    assert pick(5) == [1]  # 4 GPUs beat 2 + 1 + … (not enough) and 8 on b
    assert pick(7) == [2, 1]  # 6 GPUs on a beat 8 on b
    # a whole-node request takes the node whose interruptible users free the fewest GPUs: a (7) before b (8)
    assert [h.pk for h in victims_choose(_request(8, "bare_metal"), pool, holders) or []] == [3, 2, 1]
    # on-demand work on a node keeps it out of whole-node choices
    assert victims_choose(_request(16, "bare_metal"), pool, holders) is not None
    assert victims_choose(_request(24, "bare_metal"), pool, holders) is None
    # victims already being preempted count as capacity on its way: nothing more is preempted
    freeing = [_holder(3, 2, [("a", 1)], freeing=True), *holders[:2], holders[3]]
    assert victims_choose(_request(2), pool, freeing) == []
    # ties between equal sets: the newest goes first
    twins = [_holder(5, 0, [("a", 2)]), _holder(6, 9, [("a", 2)])]
    assert [h.pk for h in victims_choose(_request(3), _pool({"a": 1}), twins) or []] == [6]


@pytest.mark.django_db
def test_staff_add_a_tier_discount_in_the_admin_never_backdated_nor_above_100_percent(
    client: Any, time_machine: Any
) -> None:
    from django.urls import reverse

    from billing.models import TierDiscount
    from billing.pricing import PriceBook
    from portal.models import User

    time_machine.move_to(datetime(2026, 11, 2, 12, 30, tzinfo=UTC), tick=False)
    staff = User.objects.create_superuser(email="staff@example.com", password="staff pass 12345")
    client.force_login(staff)
    url = reverse("admin:billing_tierdiscount_add")
    form = {"tier": "interruptible", "discount_bps": "5000", "effective_from_0": "2026-11-02"}
    backdated = client.post(url, {**form, "effective_from_1": "20:00:00"})  # 12:00 UTC in Asia/Shanghai
    assert "A price cannot take effect in the past" in backdated.content.decode()
    assert (
        "0 to 10000 basis points"
        in client.post(url, {**form, "discount_bps": "10001", "effective_from_1": "21:00:00"}).content.decode()
    )
    assert TierDiscount.objects.count() == 0
    assert client.post(url, {**form, "effective_from_1": "21:00:00"}).status_code == 302  # 13:00 UTC
    assert list(TierDiscount.objects.values_list("tier", "discount_bps", "effective_from", "created_by")) == [
        ("interruptible", 5000, datetime(2026, 11, 2, 13, tzinfo=UTC), staff.pk)
    ]
    book = PriceBook()
    assert book.discount_bps_at("interruptible", datetime(2026, 11, 2, 12, 59, tzinfo=UTC)) == 0
    assert book.discount_bps_at("interruptible", datetime(2026, 11, 2, 13, tzinfo=UTC)) == 5000


def test_an_interactive_victim_is_told_its_disk_is_kept_and_queues_again_interruptible_work_never_preempts(
    frozen: Any, alice: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import instance_launch, instances_reconcile

    shell = {"kind": "interactive", "command": ["sleep", "600"]}
    with django_capture_on_commit_callbacks(execute=True):
        victim = instance_launch(organization=frozen, user=alice, spec=spec(**shell, name="v", tier="interruptible"))
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=T0, backend=fake_backend)  # type: ignore[arg-type]
    # another interruptible request waits; it preempts nobody
    with django_capture_on_commit_callbacks(execute=True):
        late = instance_launch(organization=frozen, user=alice, spec=spec(**shell, name="w", tier="interruptible"))
    victim.refresh_from_db()
    assert (victim.status, victim.preempt_requested_at, late.status) == ("running", None, "scheduling")
    assert fake_backend.stopped == []
    # an on-demand request, submitted after the waiting interruptible one, goes first and preempts the victim
    with django_capture_on_commit_callbacks(execute=True):
        urgent = instance_launch(organization=frozen, user=alice, spec=spec(**shell, name="u", gpu_count=1))
    victim.refresh_from_db()
    late.refresh_from_db()
    urgent.refresh_from_db()
    assert (urgent.status, late.status, victim.status) == ("provisioning", "scheduling", "scheduling")
    assert list(victim.transitions.values_list("to_status", "reason"))[-2:] == [
        (
            "preempted",
            "preempted for an on-demand request (interruptible tier): your disk is kept (the instance's workspace "
            "folder and volumes), running processes are not; it starts again when capacity returns",
        ),
        ("scheduling", "waiting for capacity to return (preempted)"),
    ]
    assert victim.attempts.get(number=1).state == "preempted"


def test_a_victim_whose_job_is_deleted_asynchronously_as_on_kubernetes_is_preempted_not_lost(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
) -> None:
    from instances.services import instance_launch, instances_reconcile

    with django_capture_on_commit_callbacks(execute=True):
        cheap = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], tier="interruptible", checkpoint_every_steps=5),
        )
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=T0, backend=fake_backend)  # type: ignore[arg-type]
    handle = cheap.job.attempts.get(number=1).handle
    # the Kubernetes backend's stop returns while the pods still get their grace period
    fake_backend.stop = lambda h, grace_s: JobStatus("running")  # type: ignore[method-assign]
    time_machine.move_to(T0 + 2 * MIN, tick=False)
    with django_capture_on_commit_callbacks(execute=True):
        instance_launch(organization=frozen, user=alice, spec=spec(kind="interactive", command=["x"], gpu_count=1))
    cheap.refresh_from_db()
    assert (cheap.status, cheap.preempt_requested_at) == ("running", T0 + 2 * MIN)
    fake_backend.states[handle] = JobStatus("failed", None, "job not found: deleted", reason="deleted")
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=T0 + 3 * MIN, backend=fake_backend)  # type: ignore[arg-type]
    cheap.refresh_from_db()
    preempted = cheap.transitions.get(to_status="preempted")
    assert preempted.reason.startswith("preempted for an on-demand request (interruptible tier)")
    assert cheap.job.attempts.get(number=1).state == "preempted"
    assert (cheap.job.preempt_count, cheap.job.crash_count) == (1, 0)


def test_a_victim_not_yet_submitted_to_the_backend_is_preempted_at_once(
    frozen: Any, alice: Any, dataset_version: Any, fake_backend: FakeBackend, django_capture_on_commit_callbacks: Any
) -> None:
    from instances.services import instance_launch

    with django_capture_on_commit_callbacks(execute=False):  # its launch task has not run yet
        cheap = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], tier="interruptible", checkpoint_every_steps=5),
        )
    assert (cheap.status, cheap.job.attempts.get().handle) == ("provisioning", "")
    with django_capture_on_commit_callbacks(execute=True):
        urgent = instance_launch(organization=frozen, user=alice, spec=spec(kind="interactive", command=["x"]))
    cheap.refresh_from_db()
    urgent.refresh_from_db()
    first = cheap.job.attempts.get(number=1)
    assert (first.state, first.message, first.handle) == ("preempted", "preempted before start", "")
    assert (cheap.status, cheap.job.preempt_count, urgent.status) == ("scheduling", 1, "provisioning")
    assert fake_backend.stopped == []


# --- a notice withdrawn when its reason is gone (issue 24, item 7) ------------------------------------------


@pytest.fixture
def held_tasks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The preemption tasks enqueued, held back (the victims they name), so a test can act in between."""
    from instances import tasks

    held: list[int] = []
    monkeypatch.setattr(tasks.preempt_instance, "delay", held.append)
    return held


def _noticed(frozen: Any, alice: Any, dataset_version: Any, backend: FakeBackend, capture: Any, held: list[int]) -> Any:
    """A running interruptible job, then an on-demand request that gives it the notice (its task held back)."""
    from instances.services import instance_launch, instances_reconcile

    with capture(execute=True):
        cheap = instance_launch(
            organization=frozen,
            user=alice,
            spec=spec(dataset_version_ids=[dataset_version.pk], tier="interruptible", checkpoint_every_steps=5),
        )
    with capture(execute=True):
        instances_reconcile(now=T0, backend=backend)  # type: ignore[arg-type]
    with capture(execute=True):
        urgent = instance_launch(organization=frozen, user=alice, spec=spec(kind="interactive", command=["x"]))
    cheap.refresh_from_db()
    urgent.refresh_from_db()
    assert (cheap.status, cheap.preempt_requested_at, cheap.preempt_for_id) == ("running", T0, urgent.pk)
    assert cheap.status_reason_code == "preemption_notice"
    assert (urgent.status, held) == ("scheduling", [cheap.pk])
    return cheap, urgent


WITHDRAWN = (
    "preemption notice withdrawn: the on-demand request it was given for no longer waits, so this instance keeps "
    "its capacity"
)


def _kept_running(cheap: Any, backend: FakeBackend, urgent: Any) -> None:
    from instances.models import Instance
    from portal.models import AuditEvent

    cheap = Instance.objects.get(pk=cheap.pk)
    assert (cheap.status, cheap.preempt_requested_at, cheap.preempt_for_id, cheap.preempt_started_at) == (
        "running",
        None,
        None,
        None,
    )
    assert (cheap.status_reason, cheap.status_reason_code) == (WITHDRAWN, "preemption_withdrawn")
    assert backend.stopped == []
    assert cheap.job.attempts.get().state == "running"
    assert (cheap.job.preempt_count, cheap.job.crash_count, cheap.job.next_resume_at) == (0, 0, None)
    assert not cheap.transitions.filter(to_status="preempted").exists()
    assert cheap.run_segments.count() == 1 and cheap.run_segments.get().ended_at is None
    (event,) = AuditEvent.objects.filter(action="instances.instance.preempt_withdrawn")
    assert (event.object_id, event.extra) == (str(cheap.pk), {"for_instance": urgent.pk, "reason": WITHDRAWN})


def test_a_notice_is_withdrawn_when_its_request_is_stopped_and_the_victim_keeps_running_unbilled_as_preempted(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    held_tasks: list[int],
) -> None:
    from billing.metering import metering_tick
    from billing.models import UsageRecord
    from instances.models import Instance
    from instances.selectors import preemption_summary
    from instances.services import instance_preempt_backend, instance_stop, instances_reconcile

    capture = django_capture_on_commit_callbacks
    cheap, urgent = _noticed(frozen, alice, dataset_version, fake_backend, capture, held_tasks)
    time_machine.move_to(T0 + MIN, tick=False)
    with capture(execute=True):
        instance_stop(instance=urgent, reason="changed my mind", acting_user=alice)
    _kept_running(cheap, fake_backend, urgent)
    instance_preempt_backend(instance_id=cheap.pk)  # the held task runs late: nothing left to act on
    _kept_running(cheap, fake_backend, urgent)
    # ten minutes run without a break, all at the interruptible price, none counted as a preemption (a
    # reconcile sees it running before the tick, as beat schedules them: metering charges up to a sighting)
    time_machine.move_to(T0 + 10 * MIN - timedelta(seconds=1), tick=False)
    with capture(execute=True):
        instances_reconcile(now=T0 + 10 * MIN - timedelta(seconds=1), backend=fake_backend)  # type: ignore[arg-type]
    metering_tick(now=T0 + 10 * MIN - timedelta(seconds=1))
    minutes = list(UsageRecord.objects.filter(instance_id=cheap.pk).order_by("minute").values_list("minute", flat=True))
    assert minutes == [T0 + i * MIN for i in range(10)]
    summary = preemption_summary(Instance.objects.get(pk=cheap.pk))
    assert (summary["preemptions"], summary["minutes_billed"], summary["charged_micros"]) == (0, 10, 120_000)


@pytest.mark.parametrize("gone", ["placed_elsewhere", "failed"])
def test_the_preemption_task_withdraws_a_notice_whose_request_no_longer_waits(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    held_tasks: list[int],
    gone: str,
) -> None:
    from instances.models import GpuType, Instance, Node
    from instances.services import instance_preempt_backend, instance_transition, instances_schedule

    capture = django_capture_on_commit_callbacks
    cheap, urgent = _noticed(frozen, alice, dataset_version, fake_backend, capture, held_tasks)
    if gone == "placed_elsewhere":  # capacity appears elsewhere before the task runs
        Node.objects.create(name="local-2", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
        with capture(execute=True):
            instances_schedule(now=T0)
        assert Instance.objects.get(pk=urgent.pk).placement == [["local-2", 2]]
    else:
        instance_transition(instance=urgent, to="failed", reason="launch failed: image gone")
    instance_preempt_backend(instance_id=cheap.pk)
    _kept_running(cheap, fake_backend, urgent)


def test_a_notice_being_acted_on_is_not_withdrawn(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    held_tasks: list[int],
) -> None:
    """Once the task has begun stopping the victim (SIGTERM sent; on Kubernetes the pods get their grace
    period) the preemption goes through, even if its request stops meanwhile."""
    from instances.models import Instance
    from instances.services import instance_preempt_backend, instance_stop, instances_reconcile
    from portal.models import AuditEvent

    capture = django_capture_on_commit_callbacks
    cheap, urgent = _noticed(frozen, alice, dataset_version, fake_backend, capture, held_tasks)
    handle = cheap.job.attempts.get().handle
    fake_backend.stop = lambda h, grace_s: JobStatus("running")  # type: ignore[method-assign]
    time_machine.move_to(T0 + MIN, tick=False)
    with capture(execute=True):
        instance_preempt_backend(instance_id=cheap.pk)
    assert Instance.objects.get(pk=cheap.pk).preempt_started_at == T0 + MIN
    with capture(execute=True):
        instance_stop(instance=urgent, reason="changed my mind", acting_user=alice)
    cheap.refresh_from_db()
    assert (cheap.status, cheap.preempt_requested_at, cheap.status_reason_code) == ("running", T0, "preemption_notice")
    assert not AuditEvent.objects.filter(action="instances.instance.preempt_withdrawn").exists()
    fake_backend.states[handle] = JobStatus("stopped", 85, "stopped, checkpoint saved")
    with capture(execute=True):
        instances_reconcile(now=T0 + 2 * MIN, backend=fake_backend)  # type: ignore[arg-type]
    cheap.refresh_from_db()
    assert cheap.transitions.filter(to_status="preempted").count() == 1
    assert (cheap.preempt_requested_at, cheap.preempt_for_id, cheap.preempt_started_at) == (None, None, None)
    assert cheap.job.preempt_count == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres_only
@pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks and pg_sleep")
def test_the_preemption_task_racing_the_requests_stop_leaves_the_victim_running(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    held_tasks: list[int],
) -> None:
    """The request's stop withdraws the notice and sits 1.5 s in its commit (a deferred trigger on the
    transition row it writes), holding the victim's row lock; the preemption task, run meanwhile, waits for
    that lock and then finds no notice: the victim is never stopped."""
    import threading
    import time

    from django.db import connections

    from instances.services import instance_preempt_backend, instance_stop

    capture = django_capture_on_commit_callbacks
    cheap, urgent = _noticed(frozen, alice, dataset_version, fake_backend, capture, held_tasks)
    with connection.cursor() as cur:
        cur.execute(
            "CREATE OR REPLACE FUNCTION test_slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN PERFORM pg_sleep(1.5); RETURN NULL; END $$"
        )
        cur.execute(
            "CREATE CONSTRAINT TRIGGER test_slow_commit AFTER INSERT ON instances_instancetransition DEFERRABLE"
            " INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_slow_commit()"
        )

    def stop() -> None:
        try:
            instance_stop(instance=urgent, reason="changed my mind", acting_user=alice)
        finally:
            connections.close_all()

    try:
        thread = threading.Thread(target=stop)
        thread.start()
        with connection.cursor() as cur:
            for _ in range(600):
                cur.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE wait_event = 'PgSleep' AND datname = current_database()"
                )
                if cur.fetchone()[0]:
                    break
                time.sleep(0.01)
            else:
                raise AssertionError("the stop never reached its commit")
        instance_preempt_backend(instance_id=cheap.pk)
        thread.join(30)
    finally:
        with connection.cursor() as cur:
            cur.execute("DROP TRIGGER IF EXISTS test_slow_commit ON instances_instancetransition")
    _kept_running(cheap, fake_backend, urgent)


def test_the_next_pass_withdraws_a_notice_whose_request_was_placed_and_gives_it_for_the_next_request(
    frozen: Any,
    alice: Any,
    dataset_version: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    held_tasks: list[int],
) -> None:
    from instances.models import GpuType, Instance, Node
    from instances.services import instance_launch
    from portal.models import AuditEvent

    capture = django_capture_on_commit_callbacks
    cheap, urgent = _noticed(frozen, alice, dataset_version, fake_backend, capture, held_tasks)
    Node.objects.create(name="local-2", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    with capture(execute=True):  # its pass places the first request on the new node; the second one waits
        second = instance_launch(organization=frozen, user=alice, spec=spec(kind="interactive", command=["y"]))
    urgent.refresh_from_db()
    second.refresh_from_db()
    assert (urgent.status, urgent.placement, second.status) == ("provisioning", [["local-2", 2]], "scheduling")
    cheap = Instance.objects.get(pk=cheap.pk)
    assert (cheap.preempt_for_id, cheap.status_reason_code, held_tasks) == (
        second.pk,
        "preemption_notice",
        [cheap.pk, cheap.pk],
    )
    (event,) = AuditEvent.objects.filter(action="instances.instance.preempt_withdrawn")
    assert event.extra == {"for_instance": urgent.pk, "reason": WITHDRAWN}
    assert fake_backend.stopped == []
