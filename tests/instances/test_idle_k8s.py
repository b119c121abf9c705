"""Idle autostop on the Kubernetes backend (issue 24): an interactive instance whose pod computes is not stopped —
its CPU use comes from the cluster's metrics API (``metrics.k8s.io`` PodMetrics, as metrics-server serves them),
here the cluster stand-in's (tests/instances/k8s_standin.py: a real cluster's kubelet and metrics-server measure
the containers; the stand-in reports the usage the test sets). Times are explicit (``now=``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from instances_support import fund
from k8s_standin import StandinCluster

from instances.backends.kubernetes import KubernetesBackend

NS = "train"
S30 = timedelta(seconds=30)


@pytest.fixture
def cluster() -> Iterator[StandinCluster]:
    with StandinCluster() as c:
        c.add_node("a100-0", gpus=8, product="NVIDIA-A100-SXM4-80GB")
        yield c


@pytest.fixture
def running(
    cluster: StandinCluster,
    catalog: None,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    alice: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
) -> Any:
    """An interactive instance of alice's organization (idle autostop after 1 minute, warnings 10 minutes
    ahead: the lead is 30 s) running in a pod of the stand-in. Returns ``(instance, pod name, start)``."""
    from django.utils import timezone

    from instances import services
    from instances.services import LaunchSpec, instance_launch, instances_reconcile

    settings.INSTANCES_BACKEND = "kubernetes"
    settings.INSTANCES_IDLE_WARNING_MINUTES = 10
    settings.INSTANCES_UTILIZATION_EVERY_S = 0  # a sample whenever the sampler is called
    backend = KubernetesBackend(namespace=NS, api_client=cluster.api_client())
    monkeypatch.setattr(services.backend, "compute_backend", lambda: backend)
    services.nodes_sync(backend=backend)
    fund(alice_org, 1000)
    alice_org.idle_autostop_minutes = 1
    alice_org.save(update_fields=["idle_autostop_minutes"])
    start = timezone.now().replace(microsecond=0)
    with django_capture_on_commit_callbacks(execute=True):
        inst = instance_launch(
            organization=alice_org,
            user=alice,
            spec=LaunchSpec(
                name="box", kind="interactive", gpu_type="A100-80G-SXM", gpu_count=1, command=["python", "train.py"]
            ),
        )
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=start, backend=backend)
    inst.refresh_from_db()
    assert inst.status == "running", inst.status_reason
    pods = cluster.pods(NS)
    assert len(pods) == 1 and pods[0]["status"]["phase"] == "Running"
    return inst, pods[0], start


def _step(at: Any, capture: Any) -> dict[str, int]:
    from instances.interactive.idle import idle_autostop_tick
    from instances.interactive.utilization import utilization_sample_due

    utilization_sample_due(now=at)  # what the reconcile tick does before the idle pass
    with capture(execute=True):
        return idle_autostop_tick(now=at)


def test_a_pod_computing_is_not_autostopped_and_is_stopped_once_it_rests(
    running: Any, cluster: StandinCluster, django_capture_on_commit_callbacks: Any, mailoutbox: list[Any]
) -> None:
    from instances.models import Instance, UtilizationSample

    cap = django_capture_on_commit_callbacks
    inst, pod, start = running
    main = pod["spec"]["containers"][0]["name"]
    cluster.pod_usage[(NS, pod["metadata"]["name"])] = {main: {"cpu": "950m", "memory": "2Gi"}}
    mailoutbox.clear()

    for k in range(1, 7):  # 3 minutes: 3× the limit
        assert _step(start + k * S30, cap) == {"warned": 0, "stopped": 0}, k
    assert UtilizationSample.objects.filter(instance=inst).count() == 7  # the launch's reconcile took the first
    newest = UtilizationSample.objects.filter(instance=inst).order_by("-sampled_at").first()
    assert newest is not None
    containers = len(pod["spec"]["containers"])
    assert (newest.processes, newest.cpu_percent, newest.memory_bytes, newest.gpus, newest.gpu_absent) == (
        containers,
        95.0,
        2 * 2**30,
        [],
        "not_sampled",
    )
    # integrated from the rate since the reconcile's first sample at start (the pod then at rest)
    assert newest.cpu_seconds == pytest.approx(0.95 * 180)
    assert Instance.objects.get(pk=inst.pk).last_activity_at == start + 6 * S30
    assert mailoutbox == []

    # the work ends: the pod rests (3 millicores); warned once, then stopped
    cluster.pod_usage[(NS, pod["metadata"]["name"])] = {main: {"cpu": "3m", "memory": "2Gi"}}
    ended = start + 6 * S30
    assert _step(ended + timedelta(seconds=20), cap) == {"warned": 0, "stopped": 0}
    assert _step(ended + S30, cap) == {"warned": 1, "stopped": 0}
    assert _step(ended + 2 * S30, cap) == {"warned": 0, "stopped": 1}
    assert [m.subject for m in mailoutbox] == ["gpu-portal: box will be stopped in 1 minute (idle)"]
    assert Instance.objects.get(pk=inst.pk).status in ("stopping", "stopped")


def test_without_the_metrics_api_nothing_is_sampled_and_the_api_says_why(
    running: Any, cluster: StandinCluster, alice: Any
) -> None:
    from rest_framework.test import APIClient

    from instances.interactive.utilization import utilization_sample_due

    inst, _, start = running
    inst.utilization_samples.all().delete()  # the launch's reconcile took one
    cluster.metrics_api = False  # no metrics-server in this cluster: 404
    assert utilization_sample_due(now=start + S30) == 0  # logged; the reconcile tick goes on
    api = APIClient()
    api.force_authenticate(alice)
    got = api.get(f"/api/v1/instances/{inst.pk}/utilization").json()
    assert (got["samples"], got["absent"]) == (
        [],
        ["No samples: the cluster's metrics API (metrics-server) has not answered for this instance."],
    )
