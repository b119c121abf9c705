"""Utilization samples of an instance: exact CPU %, memory and per-card GPU values, a bounded window, the
reason shown when a metric is absent, and the page / API closed to outsiders."""

from __future__ import annotations

import sys
import types
from datetime import datetime, timedelta
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


def _card(index: int, util: int, used_mib: int, **mine: Any) -> dict[str, Any]:
    """A card as NVML reads it; ``mine``: the instance's share as a sample stores it."""
    return {
        "index": index,
        "name": "NVIDIA H100 80GB HBM3",
        "utilization_percent": util,
        "memory_used_bytes": used_mib * 2**20,
        "memory_total_bytes": 81559 * 2**20,
        **mine,
    }


def test_samples_record_exact_values_and_keep_a_bounded_window(running: Any, settings: Any) -> None:
    from django.utils import timezone

    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import utilization_record
    from instances.models import UtilizationSample

    settings.INSTANCES_UTILIZATION_KEEP = 3
    t0 = timezone.now().replace(microsecond=0)
    # card 0 carries one of the instance's processes (pid 102) and another instance's (pid 999); card 1 none
    # of its processes; card 2's process list NVML did not give
    gpu = GpuReading(
        cards=[_card(0, 87, 40_000), _card(1, 12, 1_024), _card(2, 0, 0)],
        processes={0: {102: 30_000 * 2**20, 999: 10_000 * 2**20}, 1: {999: 1_024 * 2**20}},
    )
    pids = (101, 102, 103)
    first = utilization_record(instance=running, totals=ProcessTotals(3, 10.0, 200 * 2**20, pids), gpu=gpu, now=t0)
    second = utilization_record(
        instance=running, totals=ProcessTotals(3, 13.0, 300 * 2**20, pids), gpu=gpu, now=t0 + timedelta(seconds=30)
    )
    assert (first.cpu_percent, second.cpu_percent) == (None, 10.0)  # 3 CPU-seconds in 30 s
    assert (second.processes, second.memory_bytes, second.gpus, second.gpu_absent) == (
        3,
        300 * 2**20,
        [
            _card(0, 87, 40_000, instance_processes=1, instance_memory_bytes=30_000 * 2**20),
            _card(1, 12, 1_024, instance_processes=0, instance_memory_bytes=0),
            _card(2, 0, 0, instance_processes=None, instance_memory_bytes=None),
        ],
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
        nvmlDeviceGetComputeRunningProcesses=lambda h: (
            [
                types.SimpleNamespace(pid=4242, usedGpuMemory=39_000 * 2**20),
                types.SimpleNamespace(pid=7, usedGpuMemory=None),
            ]
            if h == 0
            else _raise(NVMLError("Not Supported"))
        ),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    reading = gpu_reading()
    assert (reading.cards, reading.absent, reading.processes, calls) == (
        [_card(0, 87, 40_000), _card(1, 12, 1_024)],
        "",
        {0: {4242: 39_000 * 2**20, 7: 0}},  # card 1's list is unknown (NVML: not supported)
        ["init", "shutdown"],
    )


def _raise(exc: Exception) -> Any:
    raise exc


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


def test_the_api_gives_the_samples_with_their_units_and_outsiders_get_404(
    alice: Any, charlie: Any, running: Any, settings: Any
) -> None:
    from django.utils import timezone
    from rest_framework.test import APIClient

    from instances.interactive.metrics import GpuReading, ProcessTotals
    from instances.interactive.utilization import utilization_record

    settings.INSTANCES_IDLE_CPU_PERCENT = 20
    t0 = timezone.now().replace(microsecond=0)
    gpu = GpuReading(cards=[_card(0, 87, 40_000)], processes={0: {102: 30_000 * 2**20}})
    utilization_record(instance=running, totals=ProcessTotals(3, 10.0, 200 * 2**20, (101, 102)), gpu=gpu, now=t0)
    utilization_record(
        instance=running,
        totals=ProcessTotals(2, 13.0, 300 * 2**20, (101,)),  # pid 102 ended: the card is another's work now
        gpu=gpu,
        now=t0 + timedelta(seconds=30),
    )
    api = APIClient()
    api.force_authenticate(alice)
    got = api.get(f"/api/v1/instances/{running.pk}/utilization")
    assert got.status_code == 200, got.content
    data = got.json()
    taken = [datetime.fromisoformat(sample.pop("sampled_at")) for sample in data["samples"]]
    assert taken == [t0, t0 + timedelta(seconds=30)]
    assert data == {
        "instance": running.pk,
        "every_s": 30,
        "keep": 120,
        "cpu_busy_percent": 20.0,
        "gpu_busy_percent": 10.0,
        "absent": [],
        "samples": [
            {
                "processes": 3,
                "cpu_seconds": 10.0,
                "cpu_percent": None,
                "memory_bytes": 200 * 2**20,
                "gpus": [_card(0, 87, 40_000, instance_processes=1, instance_memory_bytes=30_000 * 2**20)],
                "gpu_absent": "",
                "busy": True,  # its process on a card at 87 %
            },
            {
                "processes": 2,
                "cpu_seconds": 13.0,
                "cpu_percent": 10.0,  # below the 20 % set here
                "memory_bytes": 300 * 2**20,
                "gpus": [_card(0, 87, 40_000, instance_processes=0, instance_memory_bytes=0)],
                "gpu_absent": "",
                "busy": False,
            },
        ],
    }
    # the schema states the units
    schema = api.get("/api/v1/schema", {"format": "json"}).json()["components"]["schemas"]
    sample = schema["UtilizationSample"]["properties"]
    assert "percent of one core" in sample["cpu_percent"]["description"]
    assert "in seconds" in sample["cpu_seconds"]["description"]
    assert "in bytes" in sample["memory_bytes"]["description"]
    assert "percent" in schema["UtilizationCard"]["properties"]["utilization_percent"]["description"]
    assert "bytes" in schema["UtilizationCard"]["properties"]["memory_used_bytes"]["description"]

    # without samples it says why (here: the stand-in backend is not the local one); an outsider gets the same
    # 404 as for any foreign instance
    running.utilization_samples.all().delete()
    assert api.get(f"/api/v1/instances/{running.pk}/utilization").json()["absent"] == [
        "Utilization is sampled for instances on the local or Kubernetes backend; this one runs elsewhere."
    ]
    api.force_authenticate(charlie)
    refused = api.get(f"/api/v1/instances/{running.pk}/utilization")
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "not_found")
    assert api.get("/api/v1/instances/999999/utilization").status_code == 404
