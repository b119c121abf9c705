"""Decoder-only models: Llama-architecture presets built offline with Hugging Face ``transformers``.

Nothing is downloaded: ``HF_HUB_OFFLINE=1`` is set before ``transformers`` is imported, presets are
built from a ``LlamaConfig`` with random weights (seeded by the caller), and a base model to
fine-tune is read from a local folder in Hugging Face format (``config.json`` + safetensors).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch

from instances.runtime.sizing import PRESETS


def build_model(name_or_path: str, *, vocab_size: int, seq_len: int, seed: int, attention: str = "sdpa") -> Any:
    """Build a ``LlamaForCausalLM`` on CPU in float32.

    ``name_or_path``: a key of ``PRESETS`` (random init from ``seed``, vocabulary ``vocab_size``,
    context at least ``seq_len``) or a local Hugging Face model folder (its vocabulary must hold
    ``vocab_size`` ids). Raises ``ValueError`` for an unknown preset, a missing folder or a
    vocabulary that is too small. ``attention``: the Hugging Face attention implementation (``sdpa`` =
    ``torch.nn.functional.scaled_dot_product_attention``, which picks flash / memory-efficient kernels on GPU).
    """
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    if name_or_path in PRESETS:
        # LlamaConfig passes attn_implementation on to PretrainedConfig through **kwargs (not in its stubs)
        config_kwargs: dict[str, Any] = {"attn_implementation": attention, **PRESETS[name_or_path]}
        cfg = LlamaConfig(
            vocab_size=vocab_size,
            max_position_embeddings=max(seq_len, 2048),
            tie_word_embeddings=False,
            attention_dropout=0.0,
            use_cache=False,
            **config_kwargs,
        )
        torch.manual_seed(seed)
        model: Any = LlamaForCausalLM(cfg)  # a PreTrainedModel; its stubs type config attributes as Tensor
    else:
        folder = Path(name_or_path)
        if not (folder / "config.json").is_file():
            raise ValueError(f"model folder {folder} has no config.json (not a Hugging Face model folder)")
        model = AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, torch_dtype=torch.float32, attn_implementation=attention
        )
        if model.config.vocab_size < vocab_size:
            raise ValueError(f"model {folder} has a vocabulary of {model.config.vocab_size}, data needs {vocab_size}")
    model.config.use_cache = False
    return model


def materialize(model: torch.nn.Module, *, device: torch.device, seed: int) -> None:
    """Give a model built on the ``meta`` device (and already sharded by FSDP2, so each rank allocates only
    its shard: a 7B model does not need 28 GB of host RAM per rank) real storage on ``device`` and
    initialise it the way Hugging Face does (normal(0, initializer_range) for matrices, ones for norms),
    seeded by ``seed``; the rotary embedding's non-persistent ``inv_freq`` buffers are recomputed."""
    model.to_empty(device=device)
    for module in model.modules():  # built on meta, the modules were marked initialised: undo that
        if hasattr(module, "_is_hf_initialized"):
            hf_module: Any = module  # nn.Module's stubs type attributes as Tensor | Module
            hf_module._is_hf_initialized = False
    torch.manual_seed(seed)
    with torch.no_grad():
        model.init_weights()  # type: ignore[operator]
        for module in model.modules():
            if type(module).__name__.endswith("RotaryEmbedding"):
                fresh = type(module)(module.config)  # type: ignore[call-arg]
                for name, buf in fresh.named_buffers():
                    getattr(module, name).copy_(buf.to(device))


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks (the FSDP2 wrapping unit)."""
    return list(model.model.layers)  # type: ignore[union-attr, arg-type]


def parameter_count(model: torch.nn.Module) -> int:
    """Number of parameters (elements), counted before sharding."""
    return sum(p.numel() for p in model.parameters())
