"""Fixtures for the training runtime tests: a tokenizer trained on real legal text, token shards,
and a helper that runs the runtime under real ``torchrun`` (2 processes, gloo on CPU).

Pure: no Django. The corpora folder is ``<checkout>/../shared/corpora`` unless ``PORTAL_CORPORA_DIR``
says otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# the test modules import helpers from runtime_support.py beside this file, whatever the import mode
sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_support import Job

REPO = Path(__file__).resolve().parents[2]
CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "corpora")
LEGAL = CORPORA / "legal" / "legal_zh_lawrefbook.jsonl"
VOCAB = 1024
TEXT_BYTES = 400_000  # slice of the corpus used for the tokenizer and the shards


def corpus_texts(limit_bytes: int = TEXT_BYTES) -> list[str]:
    """Texts from the start of the legal corpus, about ``limit_bytes`` UTF-8 bytes in all."""
    if not LEGAL.exists():
        pytest.skip(f"corpus {LEGAL} not found (set PORTAL_CORPORA_DIR)")
    texts, size = [], 0
    with open(LEGAL, encoding="utf-8") as fh:
        for line in fh:
            text = json.loads(line)["text"][:20_000]
            texts.append(text)
            size += len(text.encode())
            if size >= limit_bytes:
                break
    return texts


@pytest.fixture(scope="session")
def shard_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Byte-level BPE tokenizer (vocab 1024) trained on the legal corpus slice, and shards of that slice."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.shards import ShardWriter

    texts = corpus_texts()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(texts, trainer)
    out = tmp_path_factory.mktemp("shards")
    tok.save(str(out / "tokenizer.json"))
    eos = tok.token_to_id("<eos>")
    with ShardWriter(
        out, vocab_size=tok.get_vocab_size(), eos_id=eos, shard_tokens=50_000, tokenizer_file="tokenizer.json"
    ) as w:
        for enc in tok.encode_batch(texts):
            w.add_document(enc.ids)
    return out


@pytest.fixture(scope="session")
def base_config(shard_dir: Path) -> dict[str, Any]:
    """Config fields shared by the tests (tiny model, 32-token samples, checkpoint every 3 steps)."""
    return {
        "model": "tiny",
        "data": [str(shard_dir)],
        "tokenizer": str(shard_dir / "tokenizer.json"),
        "seq_len": 32,
        "micro_batch": 2,
        "grad_accum": 2,
        "max_steps": 8,
        "seed": 1234,
        "lr": 3e-3,
        "warmup_steps": 2,
        "engine": "ddp",
        "checkpoint_every_minutes": 0,
        "checkpoint_every_steps": 3,
        "keep_last": 2,
        "log_every_steps": 1,
        "term_grace_s": 60,
        "report_interval_s": 0.2,
    }


@pytest.fixture
def run_job() -> Callable[..., Job]:
    """Start a job: ``run_job(cfg, workdir, env=None) -> Job`` (call ``.wait()``)."""
    jobs: list[Job] = []

    def start(cfg: dict[str, Any], workdir: Path, env: dict[str, str] | None = None, nproc: int = 2) -> Job:
        job = Job(cfg, workdir, env, nproc)
        jobs.append(job)
        return job

    yield start
    for job in jobs:  # nothing of a job may outlive its test, workers included
        job.kill_all()
