"""MFU basis: FLOPs per token from the model config, the dense bf16 peak from the device name."""

from __future__ import annotations

import pytest
import torch

from instances.runtime.mfu import NOTE_CPU, NOTE_UNKNOWN_DEVICE, MfuBasis, flops_per_token, mfu_basis, peak_bf16_flops
from instances.runtime.model import build_model


def test_flops_per_token_is_six_n_without_the_input_embedding_plus_the_attention_term() -> None:
    model = build_model("tiny", vocab_size=1024, seq_len=32, seed=0)
    total = sum(p.numel() for p in model.parameters())
    n = total - 1024 * 192  # the input embedding table is a lookup, not a matmul
    assert flops_per_token(model, 32) == (6 * n + 12 * 3 * 192 * 32, n)


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H200", 989.4),
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.1),
        ("NVIDIA GeForce RTX 4090", 165.2),
        ("Some Future GPU", None),
    ],
)
def test_the_peak_comes_from_the_device_name(name: str, tflops: float | None) -> None:
    assert peak_bf16_flops(name) == (tflops * 1e12 if tflops else None)


def test_mfu_is_achieved_flops_over_peak_times_devices_and_null_on_cpu() -> None:
    basis = MfuBasis(flops_per_token=1e9, peak_flops=1e15, devices=2, device_name="NVIDIA H200", note="")
    assert basis.mfu(800_000.0) == 0.4  # 8e14 FLOP/s over 2 x 1e15
    model = build_model("tiny", vocab_size=1024, seq_len=32, seed=0)
    cpu = mfu_basis(model, seq_len=32, devices=1, device=torch.device("cpu"))
    assert (cpu.peak_flops, cpu.mfu(1000.0), cpu.note, cpu.note_code) == (
        None,
        None,
        "no GPU: the peak FLOP/s of a CPU is not tabulated",
        NOTE_CPU,
    )


def test_a_gpu_missing_from_the_table_gets_no_mfu_and_the_unknown_device_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """No CUDA here: only the device's name is asked of CUDA, so that call is replaced."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Acme X9")
    model = build_model("tiny", vocab_size=1024, seq_len=32, seed=0)
    basis = mfu_basis(model, seq_len=32, devices=8, device=torch.device("cuda", 0))
    assert (basis.peak_flops, basis.mfu(1000.0), basis.device_name, basis.note_code) == (
        None,
        None,
        "Acme X9",
        NOTE_UNKNOWN_DEVICE,
    )
    assert basis.note == "peak of 'Acme X9' unknown (not in instances/runtime/mfu.py)"
