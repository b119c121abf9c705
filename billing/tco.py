"""Renting vs buying GPUs: the total cost of ownership calculator of the pricing page.

Buying: cards and server share up front (``card_price`` × GPUs × (1 + ``server_overhead``)), plus each
month the electricity (``gpu_power_kw`` × GPUs × 730 h × ``pue`` × ``power_price``) and staff
(``staff_monthly``); the hardware is written off over ``months`` (no resale value assumed). Renting:
GPU-hours actually used (730 h × ``utilization``) × GPUs × the price book's price. Everything in Decimal.

Default inputs and where they come from (checked 2025-2026; rough public figures, edit them):
- A100-80G-SXM card ≈ 85,000 CNY (Chinese resellers' quotes for SXM4 80 GB); H100 ≈ 230,000 CNY.
- server overhead 35 %: chassis, CPUs, memory, NICs, storage for an 8-GPU HGX server (vendor BOMs).
- 0.40 kW per A100 SXM (NVIDIA A100 datasheet: 400 W TDP), 0.70 kW per H100 SXM (H100 datasheet).
- PUE 1.5: typical Chinese data centre (MIIT targets ≤ 1.5 for new large data centres).
- power price 0.80 CNY/kWh: Chinese commercial electricity tariffs, 2024-2025.
- staff 20,000 CNY/month: one operations engineer's loaded cost in a tier-1 city.
- utilization 60 %, over 36 months: common planning assumptions for a training cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

HOURS_PER_MONTH = Decimal(730)

CARD_PRICE_CNY = {"A100-80G-SXM": "85000", "H100-80G-SXM": "230000", "L40S-48G": "60000", "RTX-4090-24G": "18000"}
#: Where the default inputs come from (label, address), listed with links under the calculator.
TCO_SOURCES: tuple[tuple[str | Promise, str], ...] = (
    ("NVIDIA A100 (400 W TDP, SXM)", "https://www.nvidia.com/en-us/data-center/a100/"),
    ("NVIDIA H100 (700 W TDP, SXM)", "https://www.nvidia.com/en-us/data-center/h100/"),
    ("NVIDIA L40S", "https://www.nvidia.com/en-us/data-center/l40s/"),
    ("GeForce RTX 4090", "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4090/"),
    (_("MIIT: data centre PUE targets"), "https://www.miit.gov.cn/"),
)
GPU_POWER_KW = {"A100-80G-SXM": "0.40", "H100-80G-SXM": "0.70", "L40S-48G": "0.35", "RTX-4090-24G": "0.45"}


@dataclass(frozen=True)
class TcoInputs:
    gpu_type: str
    gpus: int
    months: int
    utilization: Decimal  # 0..1
    card_price: Decimal  # CNY per GPU
    server_overhead: Decimal  # fraction of card price
    gpu_power_kw: Decimal
    pue: Decimal
    power_price: Decimal  # CNY per kWh
    staff_monthly: Decimal  # CNY
    rent_price_per_gpu_hour: Decimal  # CNY, from the price book


@dataclass(frozen=True)
class TcoResult:
    buy_total: Decimal
    rent_total: Decimal
    saving_percent: Decimal | None  # of buying, positive when renting is cheaper; None when buying costs 0
    buy_curve: list[tuple[int, Decimal]]  # cumulative cost at month m
    rent_curve: list[tuple[int, Decimal]]


def tco_compare(i: TcoInputs) -> TcoResult:
    """Cumulative cost of buying and of renting month by month. Raises ValueError for impossible inputs."""
    if i.gpus < 1 or i.months < 1 or not Decimal(0) < i.utilization <= 1:
        raise ValueError("GPUs and months must be at least 1 and utilization in (0, 1]")
    upfront = i.card_price * i.gpus * (1 + i.server_overhead)
    monthly_buy = i.gpu_power_kw * i.gpus * HOURS_PER_MONTH * i.pue * i.power_price + i.staff_monthly
    monthly_rent = HOURS_PER_MONTH * i.utilization * i.gpus * i.rent_price_per_gpu_hour
    buy = [(m, (upfront + monthly_buy * m).quantize(Decimal("0.01"))) for m in range(i.months + 1)]
    rent = [(m, (monthly_rent * m).quantize(Decimal("0.01"))) for m in range(i.months + 1)]
    buy_total, rent_total = buy[-1][1], rent[-1][1]
    saving = ((buy_total - rent_total) / buy_total * 100).quantize(Decimal("0.1")) if buy_total else None
    return TcoResult(buy_total, rent_total, saving, buy, rent)
