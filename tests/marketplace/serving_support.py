"""A tiny model trained for real by the runtime on the legal corpus, for the serving and publishing tests and the
serving benchmark: a byte-level BPE tokenizer (1,024 ids) and token shards of ~300 kB of
``../shared/corpora/legal``, a ``tiny`` Llama trained on them with ``torchrun`` (DDP, one process) and, on
request, its checkpoint exported the way a published app's build exports it. Nothing is downloaded."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))
from runtime_support import Job  # the runtime tests' torchrun launcher

CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "corpora")
LEGAL = CORPORA / "legal" / "legal_zh_lawrefbook.jsonl"
STEPS = 40
SHARDS_REL = "datasets/legal-laws/v1/shards"


def train_tiny_model(root: Path, *, steps: int = STEPS) -> dict[str, Any]:
    """Tokenizer and shards under ``root/SHARDS_REL``, then ``steps`` training steps checkpointed at the last.

    Returns ``root``, ``checkpoint`` (the folder), ``step`` and ``loss``. Raises ``FileNotFoundError`` when the
    corpus is missing (callers skip)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.shards import ShardWriter

    if not LEGAL.exists():
        raise FileNotFoundError(f"corpus {LEGAL} not found (set PORTAL_CORPORA_DIR)")
    texts, size = [], 0
    with open(LEGAL, encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"][:20_000])
            size += len(texts[-1].encode())
            if size >= 300_000:
                break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=1024, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    shards = root / SHARDS_REL
    shards.mkdir(parents=True)
    tok.save(str(shards / "tokenizer.json"))
    with ShardWriter(
        shards,
        vocab_size=tok.get_vocab_size(),
        eos_id=tok.token_to_id("<eos>"),
        shard_tokens=50_000,
        tokenizer_file="tokenizer.json",
    ) as w:
        for enc in tok.encode_batch(texts):
            w.add_document(enc.ids)
    cfg = {
        "model": "tiny",
        "data": [str(shards)],
        "checkpoint_dir": str(root / "checkpoints"),
        "seq_len": 64,
        "micro_batch": 8,
        "max_steps": steps,
        "seed": 7,
        "lr": 3e-3,
        "warmup_steps": 4,
        "engine": "ddp",
        "checkpoint_every_minutes": 0,
        "checkpoint_every_steps": steps,
        "keep_last": 1,
        "log_every_steps": 10,
        "async_save": False,
    }
    job = Job(cfg, root / "work", nproc=1)
    assert job.wait(timeout=180) == 0, job.output()
    events = [json.loads(line) for line in (root / "work" / "events.jsonl").read_text().splitlines()]
    saved = [e for e in events if e["type"] == "checkpoint"]
    assert [e["step"] for e in saved] == [steps]
    return {"root": root, "checkpoint": saved[0]["path"], "step": steps, "loss": saved[0]["loss"]}


def trained_export(root: Path) -> Path:
    """A trained tiny model exported to ``root/export`` (``instances.serving.export_checkpoint``)."""
    from instances.serving import export_checkpoint

    trained = train_tiny_model(root)
    out = root / "export"
    export_checkpoint(trained["checkpoint"], out)
    return out
