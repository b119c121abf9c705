"""The portal on the Kubernetes backend, against the cluster stand-in (tests/instances/k8s_standin.py).

The services, reconcile, metering and callbacks run for real; the backend is ``KubernetesBackend`` through the
official client; the cluster is the stand-in, whose clock and kubelet the tests drive. Each test names the
cluster semantics it relies on. Times are explicit (``now=``), never slept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from instances_support import fund
from k8s_standin import StandinCluster

from instances.backends.kubernetes import KubernetesBackend

NS = "train"
A100 = "NVIDIA-A100-SXM4-80GB"


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        for name in ("a100-0", "a100-1", "a100-2"):
            c.add_node(name, gpus=8, product=A100, labels={"topology.gpu-portal.io/block": "rack-1"})
        yield c


@pytest.fixture
def k8s(cluster: StandinCluster, catalog: None, settings: Any, monkeypatch: pytest.MonkeyPatch) -> KubernetesBackend:
    """The portal configured for the Kubernetes backend, talking to the stand-in; the inventory synced."""
    from instances import services

    settings.INSTANCES_BACKEND = "kubernetes"
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(services.backend, "compute_backend", lambda: backend)
    services.nodes_sync(backend=backend)
    return backend


@pytest.fixture
def rich(alice_org: Any) -> Any:
    fund(alice_org, 1000)
    return alice_org


@pytest.fixture
def t0() -> Any:
    from django.utils import timezone

    from billing.metering import floor_minute

    return floor_minute(timezone.now()) + timedelta(seconds=30)


def launch(org: Any, user: Any, version: Any, capture: Any, gpus: int = 16) -> Any:
    from instances.services import LaunchSpec, instance_launch

    with capture(execute=True):
        inst = instance_launch(
            organization=org,
            user=user,
            spec=LaunchSpec(
                name="k",
                gpu_type="A100-80G-SXM",
                gpu_count=gpus,
                dataset_version_ids=[version.pk],
                hyperparameters={"seq_len": 32, "micro_batch": 2, "max_steps": 1000},
            ),
        )
    inst.refresh_from_db()
    return inst


def reconcile(backend: KubernetesBackend, capture: Any, at: Any) -> None:
    from instances.services import instances_reconcile

    with capture(execute=True):
        instances_reconcile(now=at, backend=backend)


def report(job: Any, number: int, events: list[dict[str, Any]], at: Any) -> dict[str, bool]:
    from instances.services import attempt_token, job_events_receive

    token = attempt_token(job.attempts.get(number=number))
    return job_events_receive(job_id=job.pk, token=token, body={"attempt": number, "events": events}, now=at)


def billed(instance: Any) -> tuple[int, int]:
    """(minutes, micro-CNY) charged for the instance."""
    from django.db.models import Sum

    from billing.models import UsageRecord

    rows = UsageRecord.objects.filter(instance_id=instance.pk)
    return rows.count(), int(rows.aggregate(s=Sum("amount_micros"))["s"] or 0)


def minute(at: Any) -> None:
    from billing.metering import metering_tick

    metering_tick(now=at)


def test_the_main_journey_evict_preempts_resumes_and_stop_releases_quota_and_metering(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
    time_machine: Any,
) -> None:
    """Relies on: Indexed Job -> 2 pods bound to 2 nodes; the Eviction API's DisruptionTarget and the FailJob
    rule ending the gang (the other pod gets SIGTERM and exits 85); Foreground deletion on stop. A real
    cluster adds the kubelet, image pulls, NCCL between the pods and the runtime's own callbacks.
    The portal's clock is moved to each step (reconciles at :30, metering ticks at :45)."""
    from kubernetes import client

    from instances.selectors import gpus_in_use
    from instances.services import instance_stop

    def at(minutes: int, seconds: int = 0) -> Any:
        when = t0 + timedelta(minutes=minutes, seconds=seconds)
        time_machine.move_to(when, tick=False)
        return when

    capture = django_capture_on_commit_callbacks
    at(0)
    inst = launch(rich, alice, licensed, capture)
    job = inst.job
    first = object_name_of(job, 1)
    assert inst.status == "provisioning"
    assert len(cluster.pods(NS, f"gpu-portal/job={first}")) == 2

    reconcile(k8s, capture, at(0))
    report(
        job,
        1,
        [
            {"seq": 1, "type": "started", "step": 0},
            {"seq": 2, "type": "checkpoint", "step": 10, "path": "/checkpoints/step-10", "bytes": 1},
            {"seq": 3, "type": "checkpoint", "step": 20, "path": "/checkpoints/step-20", "bytes": 1},
        ],
        at(0, 20),
    )
    for m in range(4):
        reconcile(k8s, capture, at(m))
        minute(at(m, 15))
    assert status_of(inst) == "running"

    victim = cluster.pod(NS, f"{first}-1-")["metadata"]["name"]
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod_eviction(
        victim, NS, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": victim, "namespace": NS}}
    )
    reconcile(k8s, capture, at(4))
    minute(at(4, 15))
    job.refresh_from_db()
    inst.refresh_from_db()

    assert (job.preempt_count, job.crash_count, job.outcome) == (1, 0, "")
    assert job.attempts.get(number=1).state == "preempted"
    assert job.attempts.get(number=1).message == (
        f"Preempted: pod {victim} was stopped (cluster disruption); resuming from the newest checkpoint"
    )
    assert list(inst.transitions.values_list("to_status", flat=True))[-3:] == [
        "preempted",
        "scheduling",
        "provisioning",
    ]
    second = object_name_of(job, 2)
    config = json.loads(cluster.objects[("ConfigMap", NS, second)]["data"]["job.json"])
    assert (config["attempt"], config["resume_step"]) == (2, -1)  # -1: the newest complete checkpoint (20)
    assert job.checkpoints.filter(deleted_at__isnull=True).order_by("-step").first().step == 20

    reconcile(k8s, capture, at(5))
    report(job, 2, [{"seq": 1, "type": "started", "step": 20}], at(5, 10))
    minute(at(5, 15))
    at(6)
    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    for m in range(6, 9):
        minute(at(m, 15))

    assert job.attempts.get(number=2).started_step == 20
    assert (inst.status, job.attempts.get(number=2).state) == ("stopped", "stopped")
    assert gpus_in_use(rich) == 0
    assert cluster.job(NS, second) is None and cluster.pods(NS) == []
    assert list(inst.run_segments.order_by("started_at").values_list("started_at", "ended_at")) == [
        (at(0), at(4)),
        (at(5), at(6)),
    ]
    # started minutes of use (DESIGN §4): 4 in the first segment (4 min 0 s) and 1 in the second (60 s) of
    # 16 A100 at 8.00 CNY per GPU-hour: 128 CNY/h × 5/60 h = 10.666667 CNY, rounded once
    assert billed(inst) == (5, 10_666_667)
    again = launch(rich, alice, licensed, capture)
    assert again.status == "provisioning"  # the quota and the nodes are free again


def object_name_of(job: Any, number: int) -> str:
    from instances.backends.kubernetes import object_name

    return object_name(f"job-{job.pk}", number)


def test_a_job_deleted_behind_the_portals_back_is_lost_within_two_reconciles_and_billed_to_last_seen(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
) -> None:
    """Relies on: ``kubectl delete job`` (Background propagation) removing the Job at once, 404 afterwards.
    Reconciles run at :30 of every minute, metering ticks at :45; the Job is deleted at 10:40."""
    capture = django_capture_on_commit_callbacks
    inst = launch(rich, alice, licensed, capture, gpus=8)
    job = inst.job
    name = object_name_of(job, 1)
    for m in range(11):
        reconcile(k8s, capture, t0 + timedelta(minutes=m))
        minute(t0 + timedelta(minutes=m, seconds=15))
    from kubernetes import client

    client.BatchV1Api(cluster.api_client()).delete_namespaced_job(name, NS, propagation_policy="Background")
    reconcile(k8s, capture, t0 + timedelta(minutes=11))
    inst.refresh_from_db()
    minute(t0 + timedelta(minutes=11, seconds=15))
    minute(t0 + timedelta(minutes=12, seconds=15))
    job.refresh_from_db()

    lost = job.attempts.get(number=1)
    assert (lost.state, lost.exit_code) == ("failed", None)
    assert lost.message == f"The cluster job {name} was deleted outside the portal"
    assert (job.preempt_count, job.crash_count) == (1, 0)
    assert inst.status == "provisioning" and job.attempts.count() == 2  # resumed on new capacity
    assert inst.transitions.filter(to_status="preempted").get().reason == lost.message
    segment = inst.run_segments.get()
    # just after the last reconcile that saw it running ([start, last sighting], the sighting's minute counted)
    assert segment.ended_at == t0 + timedelta(minutes=10, microseconds=1)
    # 11 started minutes (0 … 10) of 8 A100 at 8.00 CNY per GPU-hour: 64 CNY/h × 11/60 h = 11.733333 CNY
    assert billed(inst) == (11, 11_733_333)


def test_stop_on_kubernetes_reaches_stopped_and_frees_the_quota(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
    settings: Any,
) -> None:
    """Relies on: Foreground deletion keeping the Job while pods get their grace period (the runtime takes
    60 s for its final checkpoint here), then 404. Quota of 8 GPUs: the next 8-GPU launch must start."""
    from instances.models import GpuQuota
    from instances.selectors import gpus_in_use
    from instances.services import instance_stop

    capture = django_capture_on_commit_callbacks
    GpuQuota.objects.create(organization=rich, gpus=8)
    cluster.sigterm_exit = (85, 60.0)
    inst = launch(rich, alice, licensed, capture, gpus=8)
    reconcile(k8s, capture, t0)
    waiting = launch(rich, alice, licensed, capture, gpus=8)
    assert waiting.status == "scheduling"

    with capture(execute=True):
        instance_stop(instance=inst, reason="done", acting_user=alice)
    inst.refresh_from_db()
    assert inst.status == "stopping"  # pods still saving their checkpoint
    reconcile(k8s, capture, t0 + timedelta(minutes=1))
    assert status_of(inst) == "stopping"
    cluster.advance(60)
    reconcile(k8s, capture, t0 + timedelta(minutes=2))
    waiting.refresh_from_db()

    assert status_of(inst) == "stopped"
    assert inst.job.attempts.get().state == "stopped"
    assert waiting.status == "provisioning"
    assert gpus_in_use(rich) == 8


def status_of(inst: Any) -> str:
    inst.refresh_from_db()
    return str(inst.status)


@pytest.mark.parametrize("code", [64, 87])
def test_exit_64_or_87_from_a_pod_is_never_retried(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
    code: int,
) -> None:
    """Relies on: container exit codes and termination messages; the FailJob rule on 64/87. The pod's
    launcher keeps the runtime's code under torchrun (tests/instances/test_kubernetes_backend.py)."""
    capture = django_capture_on_commit_callbacks
    inst = launch(rich, alice, licensed, capture, gpus=8)
    reconcile(k8s, capture, t0)
    pod = cluster.pod(NS, f"{object_name_of(inst.job, 1)}-0-")["metadata"]["name"]
    cluster.container_exit(NS, pod, code, message=json.dumps({"exit_code": code, "ranks": [code] * 8}))
    for m in range(1, 10):
        reconcile(k8s, capture, t0 + timedelta(minutes=m))
    inst.refresh_from_db()
    inst.job.refresh_from_db()

    assert (inst.status, inst.job.outcome, inst.job.attempts.count()) == ("failed", "failed", 1)
    assert inst.job.attempts.get().exit_code == code


def test_a_node_lost_mid_run_is_a_preemption_with_its_reason(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
) -> None:
    """Relies on: a NotReady node's pods failed by the taint manager after 300 s (DisruptionTarget)."""
    capture = django_capture_on_commit_callbacks
    inst = launch(rich, alice, licensed, capture)
    reconcile(k8s, capture, t0)
    node = cluster.pod(NS, f"{object_name_of(inst.job, 1)}-1-")["spec"]["nodeName"]

    cluster.set_node_ready(node, False)
    cluster.advance(300)
    reconcile(k8s, capture, t0 + timedelta(minutes=5))
    inst.job.refresh_from_db()
    first = inst.job.attempts.get(number=1)

    assert (first.state, inst.job.preempt_count, inst.job.crash_count) == ("preempted", 1, 0)
    assert first.message.startswith("Node lost: pod ")
    from instances.models import Node
    from instances.services import nodes_sync

    nodes_sync(backend=k8s)  # the periodic inventory sync
    assert Node.objects.get(name=node).state == "cordoned"


def test_a_pod_pending_past_the_timeout_fails_with_the_reason_in_words(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
    settings: Any,
) -> None:
    """Relies on: the scheduler's FailedScheduling wording when something outside the portal holds the GPUs;
    the kubelet's ErrImagePull."""
    from kubernetes import client

    capture = django_capture_on_commit_callbacks
    settings.INSTANCES_PENDING_TIMEOUT_S = 600
    squatter = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "squatter"},
        "spec": {
            "nodeName": "a100-0",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }
    client.CoreV1Api(cluster.api_client()).create_namespaced_pod("other", squatter)
    inst = launch(rich, alice, licensed, capture, gpus=8)
    assert inst.placement == [["a100-0", 8]]  # the portal's own view thought it was free
    attempt = inst.job.attempts.get()

    reconcile(k8s, capture, attempt.submitted_at + timedelta(minutes=1))
    inst.refresh_from_db()
    waiting_reason = inst.status_reason
    reconcile(k8s, capture, attempt.submitted_at + timedelta(minutes=10))
    inst.refresh_from_db()

    assert waiting_reason == (
        "Waiting for capacity: no node with 8 free A100-80G-SXM GPUs (0/3 nodes are "
        "available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match Pod's node "
        "affinity/selector.)"
    )
    assert inst.status == "failed"
    assert inst.status_reason == f"Did not start within 10 minutes: {waiting_reason}"[:300]
    assert inst.job.outcome == "failed"
    assert cluster.job(NS, object_name_of(inst.job, 1)) is None  # given up: the cluster job is deleted


@pytest.mark.parametrize(
    ("language", "reasons"),
    [
        (
            "en",
            [
                "Waiting for capacity: no node with 8 free H100-80G-SXM GPUs (0/4 nodes are available: "
                "4 Insufficient nvidia.com/gpu.)",
                "The container image reg/x:1 cannot be pulled (Failed to pull image)",
                "Out of memory: pod p-0 was killed (OOMKilled); use a smaller micro-batch or more GPUs",
                "Preempted: pod p-1 was stopped (evicted by a node drain); resuming from the newest checkpoint",
                "Node lost: pod p-1 on gpu-7 stopped answering; resuming from the newest checkpoint",
                "The cluster job gp-a1 was deleted outside the portal",
            ],
        ),
        (
            "zh-hans",
            [
                "等待算力：没有节点有 8 块空闲的 H100-80G-SXM GPU（0/4 nodes are available: "
                "4 Insufficient nvidia.com/gpu.）",
                "无法拉取容器镜像 reg/x:1（Failed to pull image）",
                "内存不足：Pod p-0 被终止（OOMKilled）；请减小 micro-batch 或使用更多 GPU",
                "已被抢占：Pod p-1 已停止（因节点排空被驱逐）；将从最新检查点恢复",
                "节点失联：gpu-7 上的 Pod p-1 已无响应；将从最新检查点恢复",
                "集群任务 gp-a1 已在门户之外被删除",
            ],
        ),
    ],
)
def test_kubernetes_reasons_read_in_english_and_chinese(language: str, reasons: list[str]) -> None:
    from django.utils import translation

    from instances.backends.base import JobStatus
    from instances.k8s_reasons import status_reason
    from instances.reason_display import reason_render
    from instances.reasons import reason_fields

    statuses = [
        JobStatus(
            "pending",
            reason="unschedulable",
            details={"gpus": 8, "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."},
        ),
        JobStatus("pending", reason="image_pull", details={"image": "reg/x:1", "message": "Failed to pull image"}),
        JobStatus("failed", 137, reason="oom_killed", details={"pod": "p-0"}),
        JobStatus("preempted", 85, reason="evicted", details={"pod": "p-1", "why": "EvictionByEvictionAPI"}),
        JobStatus("preempted", reason="node_lost", details={"pod": "p-1", "node": "gpu-7"}),
        JobStatus("failed", reason="deleted", details={"job": "gp-a1"}),
    ]
    stored = [status_reason(s, gpu_type="H100-80G-SXM") for s in statuses]  # code + params, English text
    with translation.override(language):
        shown = [reason_render(code=reason_fields(r)[0], params=reason_fields(r)[1], fallback=r) for r in stored]
    assert shown == reasons


def test_a_node_that_disappears_from_the_inventory_mid_run_preempts_and_resumes_elsewhere(
    rich: Any,
    alice: Any,
    licensed: Any,
    k8s: KubernetesBackend,
    cluster: StandinCluster,
    django_capture_on_commit_callbacks: Any,
    t0: Any,
) -> None:
    """Relies on: pod GC failing the pods of a deleted Node object (DisruptionTarget, DeletionByPodGC)."""
    from instances.models import Node
    from instances.services import nodes_sync

    capture = django_capture_on_commit_callbacks
    inst = launch(rich, alice, licensed, capture)
    reconcile(k8s, capture, t0)
    gone = cluster.pod(NS, f"{object_name_of(inst.job, 1)}-1-")["spec"]["nodeName"]

    cluster.remove_node(gone)
    nodes_sync(backend=k8s)
    reconcile(k8s, capture, t0 + timedelta(minutes=1))
    inst.refresh_from_db()
    inst.job.refresh_from_db()

    assert (inst.job.attempts.get(number=1).state, inst.job.preempt_count, inst.job.crash_count) == ("preempted", 1, 0)
    assert (Node.objects.get(name=gone).gpus, inst.status) == (0, "provisioning")
    assert gone not in [name for name, _ in inst.placement] and len(inst.placement) == 2
    reconcile(k8s, capture, t0 + timedelta(minutes=2))
    assert status_of(inst) == "running"
