"""Checkpoint export: a complete DCP checkpoint written by ``instances.runtime`` becomes a Hugging Face
folder the model server loads. ``python -m instances.serving.export CHECKPOINT_DIR OUT_DIR`` runs it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from instances.serving.base import EXPORT_FORMAT, EXPORT_INFO, TOKENIZER_FILE, ExportError
from instances.serving.prompting import TOKENIZER_CONFIG, tokenizer_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPETITION_PENALTY = 1.3  # CTRL's penalty (Keskar et al., 2019), as the first model server applied it


def _read_runtime_state(reader: Any) -> dict[str, Any]:
    import pickle

    import torch.distributed.checkpoint as dcp

    holder: dict[str, Any] = {"runtime": b""}
    with warnings.catch_warnings():  # "torch.distributed is ... uninitialized": single-process load on purpose
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(holder, storage_reader=reader, no_dist=True)
    return pickle.loads(holder["runtime"])  # noqa: S301 - the runtime's own checkpoint


def _tokenizer_source(config: dict[str, Any], tokenizer_file: str | None) -> tuple[Path | None, int | None]:
    """(tokenizer.json, eos id) of the training data: the explicit file, the config's, or the first shard
    set's ``index.json`` ``tokenizer`` entry (relative to the shard folder)."""
    eos: int | None = None
    found: Path | None = Path(tokenizer_file) if tokenizer_file else None
    for folder in config.get("data", []):
        index = Path(folder) / "index.json"
        if not index.is_file():
            continue
        meta = json.loads(index.read_text(encoding="utf-8"))
        eos = int(meta["eos_id"]) if eos is None and "eos_id" in meta else eos
        if found is None and meta.get("tokenizer"):
            found = Path(folder) / meta["tokenizer"]
    if found is None and config.get("tokenizer"):
        found = Path(config["tokenizer"])
    return found, eos


def export_checkpoint(
    checkpoint_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tokenizer_file: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Convert the complete DCP checkpoint in ``checkpoint_dir`` into a Hugging Face folder ``out_dir`` that
    ``transformers`` (``AutoConfig``, ``AutoTokenizer``, ``AutoModelForCausalLM``) and so vLLM load as they are:
    ``config.json`` (``LlamaForCausalLM``), ``model.safetensors``, ``generation_config.json`` (greedy, the
    repetition penalty), ``tokenizer.json`` with a ``tokenizer_config.json`` (a fast tokenizer, its
    end-of-sequence token, the chat template of ``instances.serving.prompting``) and ``export.json``.

    The model is rebuilt from the config stored in the checkpoint (preset name or base-model folder, with
    the vocabulary read from the checkpoint's own tensor shapes), its weights loaded with
    ``torch.distributed.checkpoint.load`` (no process group; FSDP/DDP shards of any world size are merged),
    then saved with ``save_pretrained(safe_serialization=True)`` in float32. ``tokenizer_file`` overrides the
    tokenizer found through the training data (see ``_tokenizer_source``). ``progress(percent)`` is called
    at 10, 40, 70, 90 and 100.

    Returns the ``export.json`` dict: ``format``, ``step``, ``source``, ``model``, ``vocab_size``,
    ``eos_id``, ``max_position_embeddings``, ``parameters``, ``bytes``. Idempotent: when ``out_dir``
    already holds an export, its ``export.json`` is returned and nothing is rewritten.
    Raises ``ExportError`` (incomplete or foreign checkpoint, no tokenizer) and ``OSError``.
    """
    src, out = Path(checkpoint_dir), Path(out_dir)
    report = progress or (lambda _p: None)
    if (out / EXPORT_INFO).is_file():
        report(100)
        return json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))
    if not (src / ".metadata").is_file():
        raise ExportError(f"checkpoint {src} is not complete (no .metadata): it cannot be exported")

    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemReader

    from instances.runtime.model import build_model

    reader = FileSystemReader(str(src))
    metadata = reader.read_metadata()
    embed = metadata.state_dict_metadata.get("model.model.embed_tokens.weight")
    if embed is None or not hasattr(embed, "size"):
        raise ExportError(f"checkpoint {src} holds no Llama model weights (engine deepspeed is not exportable)")
    try:
        runtime = _read_runtime_state(FileSystemReader(str(src)))
    except Exception as exc:  # a DCP folder that is not the runtime's
        raise ExportError(f"checkpoint {src} has no readable runtime state: {exc}") from exc
    config = runtime.get("config") or {}
    report(10)
    tokenizer, eos_id = _tokenizer_source(config, tokenizer_file)
    if tokenizer is None or not tokenizer.is_file():
        raise ExportError(f"the training data's tokenizer ({tokenizer or 'none recorded'}) is missing")

    vocab = int(embed.size[0])
    model = build_model(
        str(config.get("model", "tiny")), vocab_size=vocab, seq_len=int(config.get("seq_len", 1024)), seed=0
    )
    state = {"model": model.state_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, storage_reader=FileSystemReader(str(src)), no_dist=True)
    model.load_state_dict(state["model"])
    report(40)
    model.config.use_cache = True
    if eos_id is not None:
        model.config.eos_token_id = eos_id
        model.config.pad_token_id = eos_id
        model.generation_config.eos_token_id = eos_id
        model.generation_config.pad_token_id = eos_id
    model.generation_config.do_sample = False
    # the local server's default and, through generation_config.json, vLLM's: small models loop without it
    model.generation_config.repetition_penalty = REPETITION_PENALTY

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with torch.no_grad():
            model.save_pretrained(tmp, safe_serialization=True)
        report(70)
        shutil.copyfile(tokenizer, tmp / TOKENIZER_FILE)
        eos_token = ""
        if eos_id is not None:
            from tokenizers import Tokenizer

            eos_token = Tokenizer.from_file(str(tokenizer)).id_to_token(eos_id) or ""
        (tmp / TOKENIZER_CONFIG).write_text(
            json.dumps(
                tokenizer_config(eos_token=eos_token, context_length=int(model.config.max_position_embeddings)),
                indent=1,
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        info = {
            "format": EXPORT_FORMAT,
            "step": int(runtime.get("step", 0)),
            "source": str(src),
            "model": str(config.get("model", "")),
            "vocab_size": vocab,
            "eos_id": eos_id,
            "max_position_embeddings": int(model.config.max_position_embeddings),
            "parameters": sum(p.numel() for p in model.parameters()),
            "bytes": sum(f.stat().st_size for f in tmp.iterdir() if f.is_file()),
        }
        (tmp / EXPORT_INFO).write_text(json.dumps(info, indent=1, sort_keys=True), encoding="utf-8")
        report(90)
        if out.exists():  # another exporter finished first: keep its folder
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report(100)
    return json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m instances.serving.export",
        description="export a complete DCP checkpoint folder to a Hugging Face folder",
    )
    parser.add_argument("checkpoint_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--tokenizer", default=None)
    args = parser.parse_args(argv)
    print(json.dumps(export_checkpoint(args.checkpoint_dir, args.out_dir, tokenizer_file=args.tokenizer)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
