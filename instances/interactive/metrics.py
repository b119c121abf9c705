"""Reading an instance's utilization on this machine (no Django): CPU time and memory of its processes
(psutil) and the NVIDIA cards (NVML, through ``pynvml`` from the ``nvidia-ml-py`` package).

Used by :mod:`instances.interactive.utilization`, which records samples; kept free of the portal so that an
agent inside a pod could run it too.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import psutil

# Why GPU metrics are absent (codes; the portal shows a translated sentence for each).
NO_NVML = "no_nvml"  # the NVIDIA driver's NVML library is not on this machine: no NVIDIA GPU here
NO_GPU = "no_gpu"  # NVML answers but sees no card
NVML_ERROR = "nvml_error"  # NVML failed (driver not loaded, no permission, …); the detail is kept
NOT_SAMPLED = "not_sampled"  # a pod on Kubernetes: the cluster's metrics API reports CPU and memory only


@dataclass(frozen=True, slots=True)
class ProcessTotals:
    """``processes`` alive, their cumulative CPU time in seconds (user + system) and resident memory in bytes;
    ``pids``: the processes counted (to find them on the GPUs)."""

    processes: int
    cpu_seconds: float
    memory_bytes: int
    pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuReading:
    """The cards NVML sees (dicts of ``index``, ``name``, ``utilization_percent`` (0–100, over NVML's last
    sample period), ``memory_used_bytes``, ``memory_total_bytes``), or none and ``absent`` (a code above)
    with ``detail`` (NVML's message). ``processes``: per card index, the GPU memory in bytes (0 where NVML
    does not tell) of each process (pid) with a compute context on it; a card whose process list NVML could
    not give is missing from it (then nobody knows whose work it carries)."""

    cards: list[dict[str, Any]] = field(default_factory=list)
    absent: str = ""
    detail: str = ""
    processes: dict[int, dict[int, int]] = field(default_factory=dict)


def process_totals(pids: list[int]) -> ProcessTotals:
    """Totals over ``pids``; processes that vanished or cannot be read are left out."""
    count, cpu, rss = 0, 0.0, 0
    alive: list[int] = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            with proc.oneshot():
                times = proc.cpu_times()
                mem = proc.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        count += 1
        cpu += times.user + times.system
        rss += mem
        alive.append(pid)
    return ProcessTotals(count, round(cpu, 2), rss, tuple(alive))


def gpu_reading() -> GpuReading:
    """Utilization and memory of every NVIDIA card of this machine through NVML (never raises)."""
    try:
        import pynvml
    except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency
        return GpuReading(absent=NO_NVML, detail="pynvml is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        code = NO_NVML if getattr(exc, "value", None) == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND else NVML_ERROR
        return GpuReading(absent=code, detail=str(exc))
    try:
        count = pynvml.nvmlDeviceGetCount()
        cards = []
        processes: dict[int, dict[int, int]] = {}
        for index in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            util = pynvml.nvmlDeviceGetUtilizationRates(handle)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            cards.append(
                {
                    "index": index,
                    "name": name.decode() if isinstance(name, bytes) else str(name),
                    "utilization_percent": int(util.gpu),
                    "memory_used_bytes": int(mem.used),
                    "memory_total_bytes": int(mem.total),
                }
            )
            with contextlib.suppress(pynvml.NVMLError):  # not on every driver or card (MIG): left unknown
                processes[index] = {
                    int(p.pid): int(p.usedGpuMemory or 0) for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
                }
    except pynvml.NVMLError as exc:
        return GpuReading(absent=NVML_ERROR, detail=str(exc))
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    if not cards:
        return GpuReading(absent=NO_GPU, detail="NVML sees no device")
    return GpuReading(cards=cards, processes=processes)
