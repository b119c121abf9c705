"""Model preset shapes and how much device memory training one needs: torch-free, so the portal checks a
launch (``instances.services.launch``) with the same numbers the runtime builds its models from.

The rule (``training_bytes_per_device``): AdamW training keeps 16 bytes per parameter — float32 weights (4),
gradients (4) and the two moment estimates (8), as in ZeRO (Rajbhandari et al. 2020, section 3.1, "16Ψ"
for mixed-precision Adam; FSDP2 keeps float32 master weights too). FSDP shards all of it over the
data-parallel degree; DDP keeps a full copy on every device. Activations come on top and depend on the
batch, so a job whose model state alone does not fit is certainly refused, one that fits may still need a
smaller micro-batch.
"""

from __future__ import annotations

from typing import Any

# Shapes follow published models: gpt2-small = GPT-2 124M's width/depth, 1b = Llama 3.2 1B,
# 7b = Llama 2 7B. ``tiny`` is for CPU tests (~2.1M parameters with a 2k vocabulary).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {
        "hidden_size": 192,
        "intermediate_size": 512,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
    },
    "gpt2-small": {
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "num_key_value_heads": 12,
    },
    "1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
    "7b": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
    },
}

BYTES_PER_PARAMETER = 16  # float32 weight + gradient + AdamW m and v (ZeRO's 16Ψ)
DEFAULT_VOCAB = 32_000  # Llama 2's vocabulary: the launch check's stand-in before the shards are read


def preset_parameters(preset: str, *, vocab_size: int = DEFAULT_VOCAB) -> int:
    """Parameters of a Llama-architecture ``preset`` (embedding and untied LM head of ``vocab_size`` rows,
    per layer q/k/v/o projections with grouped key-value heads, a SwiGLU MLP and two RMSNorm weights, and the
    final norm). Raises ``KeyError`` for an unknown preset."""
    p = PRESETS[preset]
    h, inter, layers = p["hidden_size"], p["intermediate_size"], p["num_hidden_layers"]
    kv = h // p["num_attention_heads"] * p["num_key_value_heads"]
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * inter + 2 * h
    return 2 * vocab_size * h + layers * per_layer + h


def training_bytes_per_device(preset: str, *, engine: str, dp_degree: int, vocab_size: int = DEFAULT_VOCAB) -> int:
    """Bytes of model and optimizer state each device holds while training ``preset`` on ``dp_degree``
    devices with ``engine`` (``fsdp``/``deepspeed``: sharded over the degree; ``ddp``: a full copy each)."""
    total = BYTES_PER_PARAMETER * preset_parameters(preset, vocab_size=vocab_size)
    return total if engine == "ddp" else -(-total // dp_degree)
