"""Model FLOPs utilisation (MFU): achieved model FLOP/s divided by the device's dense bf16 peak.

FLOPs per token for a decoder-only transformer trained with a backward pass (forward + backward = 3x the
forward's 2 FLOPs per multiply-add), after Kaplan et al. 2020 and PaLM (Chowdhery et al. 2022, appendix B):

    flops_per_token = 6 * N  +  12 * n_layers * hidden_size * seq_len

``N`` counts the parameters that take part in matrix multiplies: every parameter except the input
embedding table (a lookup, not a matmul); the output head counts. The second term is the attention
score and value products (QK^T and AV), counted for the full sequence as PaLM and nanoGPT do. Activation
recomputation (activation checkpointing) is *not* counted: MFU measures useful model FLOPs only.

``mfu = tokens_per_s_all_ranks * flops_per_token / (peak_flops_per_device * devices)``.

Peaks are the vendors' data-sheet **dense** (no sparsity) bf16 tensor-core figures, in TFLOP/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

# device-name fragment -> dense bf16 peak TFLOP/s (first match wins: more specific names first)
PEAK_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("GH200", 989.4),  # Grace Hopper superchip, H100/H200-class GPU
    ("H200", 989.4),  # H200 SXM (NVL: 835)
    ("H100 PCIE", 756.5),
    ("H100 NVL", 835.0),
    ("H100", 989.4),  # H100 SXM5
    ("H800", 989.4),
    ("H20", 148.0),
    ("B200", 2250.0),
    ("A100", 312.0),
    ("A800", 312.0),
    ("L40S", 362.1),
    ("L40", 181.0),
    ("L4", 121.0),
    ("A10G", 70.0),  # AWS A10G
    ("A10", 125.0),
    ("RTX 4090", 165.2),  # with FP32 accumulate (Ada whitepaper)
    ("RTX 6000 ADA", 364.2),
)


# Why MFU is unavailable, as a code the portal translates (``mfu_note_code`` in progress events; the
# English ``note`` stays for people reading the runtime's own log).
NOTE_CPU = "cpu"  # no GPU: a CPU's peak is not tabulated
NOTE_UNKNOWN_DEVICE = "unknown_device"  # a GPU whose name is not in PEAK_BF16_TFLOPS


@dataclass(frozen=True)
class MfuBasis:
    """What MFU is computed from: ``flops_per_token``, ``peak_flops`` (per device, FLOP/s, ``None`` when
    unknown), ``devices``, ``device_name``, ``note`` (why MFU is unavailable, else a description) and
    ``note_code`` (``NOTE_CPU`` | ``NOTE_UNKNOWN_DEVICE`` when unavailable, ``""`` when available)."""

    flops_per_token: float
    peak_flops: float | None
    devices: int
    device_name: str
    note: str
    note_code: str = ""

    def mfu(self, tokens_per_s: float) -> float | None:
        """Fraction of the peak (0..1, rounded to 4 places), or ``None`` when the peak is unknown."""
        if not self.peak_flops or tokens_per_s <= 0:
            return None
        return round(tokens_per_s * self.flops_per_token / (self.peak_flops * self.devices), 4)


def flops_per_token(model: torch.nn.Module, seq_len: int) -> tuple[float, int]:
    """``(flops_per_token, matmul_params)`` for a Hugging Face decoder model (see module docstring)."""
    hf: Any = model  # a transformers PreTrainedModel: nn.Module's stubs type its attributes as Tensor | Module
    cfg = hf.config
    total = sum(p.numel() for p in model.parameters())
    embed = hf.get_input_embeddings()
    n = total - (embed.weight.numel() if embed is not None else 0)
    attention = 12 * cfg.num_hidden_layers * cfg.hidden_size * seq_len
    return float(6 * n + attention), n


def peak_bf16_flops(device_name: str) -> float | None:
    """Dense bf16 peak of ``device_name`` in FLOP/s, or ``None`` when it is not in the table."""
    name = device_name.upper()
    for fragment, tflops in PEAK_BF16_TFLOPS:
        if fragment in name:
            return tflops * 1e12
    return None


def mfu_basis(model: torch.nn.Module, *, seq_len: int, devices: int, device: torch.device) -> MfuBasis:
    """The basis for this run: FLOPs per token from the model's config, the peak from the device's name."""
    fpt, n = flops_per_token(model, seq_len)
    if device.type != "cuda":
        return MfuBasis(fpt, None, devices, "cpu", "no GPU: the peak FLOP/s of a CPU is not tabulated", NOTE_CPU)
    name = torch.cuda.get_device_name(device)
    peak = peak_bf16_flops(name)
    if peak is None:
        note = f"peak of {name!r} unknown (not in instances/runtime/mfu.py)"
        return MfuBasis(fpt, None, devices, name, note, NOTE_UNKNOWN_DEVICE)
    note = (f"{fpt / 1e9:.3f} GFLOP/token (6 x {n / 1e6:.1f}M matmul params + attention) against "
            f"{peak / 1e12:.1f} TFLOP/s dense bf16 per {name} x {devices}")  # fmt: skip
    return MfuBasis(fpt, peak, devices, name, note)
