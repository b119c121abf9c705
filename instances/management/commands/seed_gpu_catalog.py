"""``manage.py seed_gpu_catalog``: GPU types, images and a price for the local backend's CPU slots.

Idempotent: rows that exist are left as they are (edit them in the back office).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from billing.choices import RentalMode
from billing.models import GpuPrice
from billing.pricing import gpu_price_set
from instances.models import GpuType, Image

GPU_TYPES = [
    # code, name, memory GiB, interconnect, GPUs per node
    ("A100-80G-SXM", "NVIDIA A100 80GB SXM4", 80, "NVLink 600 GB/s + InfiniBand HDR 200 Gb/s", 8),
    ("H100-80G-SXM", "NVIDIA H100 80GB SXM5", 80, "NVLink 900 GB/s + InfiniBand NDR 400 Gb/s", 8),
    ("L40S-48G", "NVIDIA L40S 48GB", 48, "PCIe Gen4 + 100 GbE RoCE", 8),
    ("RTX-4090-24G", "NVIDIA GeForce RTX 4090 24GB", 24, "PCIe Gen4", 8),
    ("cpu-local", "CPU slot (local backend)", 0, "loopback (gloo)", 2),
]
IMAGES = [
    # name, reference, pytorch, cuda, deepspeed, megatron, default
    (
        "PyTorch 2.13 + CUDA 12.8 + DeepSpeed 0.19",
        "gpu-portal/runtime:torch2.13-cu128",
        "2.13",
        "12.8",
        "0.19",
        "",
        True,
    ),
    (
        "PyTorch 2.1 + CUDA 12.1 + DeepSpeed 0.12.3",
        "gpu-portal/runtime:torch2.1-cu121",
        "2.1",
        "12.1",
        "0.12.3",
        "",
        False,
    ),
    (
        "PyTorch 2.4 + CUDA 12.4 + Megatron-Core 0.8",
        "gpu-portal/megatron:torch2.4-cu124",
        "2.4",
        "12.4",
        "",
        "0.8.0",
        False,
    ),
]
CPU_LOCAL_PRICES = {RentalMode.CONTAINER: "0.60", RentalMode.BARE_METAL: "0.60"}  # CNY per slot-hour


class Command(BaseCommand):
    help = "Insert the default GPU types, images and the cpu-local price that do not exist yet."

    def handle(self, *args: Any, **options: Any) -> None:
        types = images = prices = 0
        for code, name, mem, link, per_node in GPU_TYPES:
            _, created = GpuType.objects.get_or_create(
                code=code, defaults={"name": name, "memory_gib": mem, "interconnect": link, "gpus_per_node": per_node}
            )
            types += created
        for name, ref, pt, cuda, ds, mg, default in IMAGES:
            _, created = Image.objects.get_or_create(
                name=name,
                defaults={
                    "reference": ref,
                    "pytorch_version": pt,
                    "cuda_version": cuda,
                    "deepspeed_version": ds,
                    "megatron_version": mg,
                    "is_default": default,
                },
            )
            images += created
        for mode, price in CPU_LOCAL_PRICES.items():
            if not GpuPrice.objects.filter(gpu_type="cpu-local", mode=mode).exists():
                gpu_price_set(gpu_type="cpu-local", mode=mode, price=price)
                prices += 1
        self.stdout.write(f"GPU catalog: {types} GPU types, {images} images, {prices} prices added")
