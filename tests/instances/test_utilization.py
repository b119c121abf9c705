"""Utilization samples of an instance: exact CPU %, memory and per-card GPU values, a bounded window, the
reason shown when a metric is absent, and the page / API closed to outsiders."""

from __future__ import annotations

import sys
import types
from datetime import timedelta
from typing import Any

import pytest


@pytest.fixture
def running(alice: Any, funded: Any, nodes: Any, fake_backend: Any) -> Any:
    """An interactive instance of alice's organization, running on the fake backend."""
    from instances.models import Instance
    from instances.services import LaunchSpec, instance_launch

    inst = instance_launch(
        organization=funded,
        user=alice,
        spec=LaunchSpec(name="box", kind="interactive", gpu_type="cpu-local", gpu_count=1, command=["sleep", "600"]),
    )
    Instance.objects.filter(pk=inst.pk).update(status="running")
    inst.refresh_from_db()
    return inst


def _card(index: int, util: int, used_mib: int) -> dict[str, Any]:
    return {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "utilization_percent": util,
        "memory_used_bytes": used_mib * 2**20,
        "memory_total_bytes": 81559 * 2**20,
    }


def test_samples_record_exact_values_and_keep_a_bounded_window(running: Any, settings: Any) -> None:
    from django.utils import timezone

    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import utilization_record
    from instances.models import UtilizationSample

    settings.INSTANCES_UTILIZATION_KEEP = 3
    t0 = timezone.now().replace(microsecond=0)
    gpu = GpuReading(cards=[_card(0, 87, 40_000), _card(1, 12, 1_024)])
    first = utilization_record(instance=running, totals=ProcessTotals(3, 10.0, 200 * 2**20), gpu=gpu, now=t0)
    second = utilization_record(
        instance=running, totals=ProcessTotals(3, 13.0, 300 * 2**20), gpu=gpu, now=t0 + timedelta(seconds=30)
    )
    assert (first.cpu_percent, second.cpu_percent) == (None, 10.0)  # 3 CPU-seconds in 30 s
    assert (second.processes, second.memory_bytes, second.gpus, second.gpu_absent) == (
        3,
        300 * 2**20,
        [_card(0, 87, 40_000), _card(1, 12, 1_024)],
        "",
    )
    # a process ended: the CPU time went down; the share is 0, never negative
    third = utilization_record(
        instance=running, totals=ProcessTotals(2, 5.0, 100), gpu=GpuReading(), now=t0 + timedelta(seconds=60)
    )
    assert third.cpu_percent == 0.0
    utilization_record(instance=running, totals=ProcessTotals(2, 6.5, 100), gpu=gpu, now=t0 + timedelta(seconds=90))
    kept = list(UtilizationSample.objects.filter(instance=running).values_list("sampled_at", "cpu_percent"))
    assert kept == [
        (t0 + timedelta(seconds=30), 10.0),
        (t0 + timedelta(seconds=60), 0.0),
        (t0 + timedelta(seconds=90), 5.0),
    ]


def test_nvml_cards_are_read_per_card(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NVML path on a stand-in ``pynvml`` (this machine has no NVIDIA GPU)."""
    from instances.interactive.metrics import gpu_reading

    class NVMLError(Exception):
        value = 0

    calls: list[str] = []
    fake = types.SimpleNamespace(
        NVMLError=NVMLError,
        NVML_ERROR_LIBRARY_NOT_FOUND=12,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=[87, 12][h], memory=0),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=[40_000, 1_024][h] * 2**20, total=81559 * 2**20),
        nvmlDeviceGetName=lambda h: "NVIDIA H100 80GB HBM3",
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    reading = gpu_reading()
    assert (reading.cards, reading.absent, calls) == (
        [_card(0, 87, 40_000), _card(1, 12, 1_024)],
        "",
        ["init", "shutdown"],
    )


def test_without_nvidia_gpus_the_page_says_why_and_outsiders_get_404(
    client: Any, alice: Any, charlie: Any, running: Any, settings: Any
) -> None:
    from django.utils import timezone
    from django.utils.translation import override
    from rest_framework.test import APIClient

    from instances.interactive.metrics import NO_NVML, ProcessTotals, gpu_reading
    from instances.interactive.utilization import GPU_ABSENT, utilization_record

    reading = gpu_reading()
    if reading.cards:
        pytest.skip("this machine has NVIDIA GPUs")
    assert reading.absent == NO_NVML
    now = timezone.now()
    utilization_record(instance=running, totals=ProcessTotals(2, 1.0, 5 * 2**20), gpu=reading, now=now)
    utilization_record(
        instance=running, totals=ProcessTotals(2, 4.0, 6 * 2**20), gpu=reading, now=now + timedelta(seconds=60)
    )

    client.force_login(alice)
    org = running.organization.slug
    page = client.get(f"/o/{org}/instances/{running.pk}/").content.decode()
    assert "No NVIDIA GPU on this node (the NVIDIA driver&#x27;s NVML library is not installed)." in page
    assert 'aria-label="CPU (%)"' in page and 'aria-label="Memory (MiB)"' in page
    assert "The SSH server is starting." in page  # running on the fake backend: no local SSH server
    with override("zh-hans"):
        assert str(GPU_ABSENT[NO_NVML]) == "此节点没有 NVIDIA GPU（未安装 NVIDIA 驱动的 NVML 库）。"
    api = APIClient()
    api.force_authenticate(alice)
    ssh = api.get(f"/api/v1/instances/{running.pk}").json()["ssh"]
    assert (ssh["command"], ssh["port"], ssh["reason"]) == ("", None, "The SSH server is starting.")
    assert ssh["host_key_fingerprint"].startswith("SHA256:")

    client.force_login(charlie)
    assert client.get(f"/o/{org}/instances/{running.pk}/").status_code == 404
    assert client.get(f"/o/{org}/instances/{running.pk}/access/").status_code == 404
    api.force_authenticate(charlie)
    assert api.get(f"/api/v1/instances/{running.pk}").status_code == 404
