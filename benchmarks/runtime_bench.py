"""Benchmark of the training runtime (prints figures; never part of the test suite).

    .venv/bin/python benchmarks/runtime_bench.py [--workdir DIR] [--steps N]

Measures, in one run on this machine:
1. checkpoint write throughput (MB/s) for a ~500 MB state (a 42M-parameter Llama + AdamW moments),
   as a ratio to the raw write speed of the same disk (``dd ... conv=fdatasync``), for 1/2/4 writer threads;
2. time training is blocked per save, sync vs ``dcp.async_save``;
3. tokens/s of the runtime loop vs a bare PyTorch loop (same model, data, DDP world 1, AdamW,
   clipping, schedule), as overhead %;
4. resume time: process start (torchrun) to the first training step after that ~500 MB checkpoint.
Single process (world size 1, gloo) so the figures are not shared between two ranks on two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
CORPUS = Path(os.environ.get("PORTAL_CORPORA_DIR") or REPO.parent / "shared" / "corpora") / "legal"


def make_data(root: Path) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.shards import ShardWriter

    texts, size = [], 0
    with open(CORPUS / "legal_zh_lawrefbook.jsonl", encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            size += len(texts[-1].encode())
            if size > 3_000_000:
                break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=4096, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    out = root / "shards"
    out.mkdir()
    tok.save(str(out / "tokenizer.json"))
    with ShardWriter(out, vocab_size=tok.get_vocab_size(), eos_id=tok.token_to_id("<eos>")) as w:
        for enc in tok.encode_batch(texts):
            w.add_document(enc.ids)
    return out


def make_model(root: Path) -> Path:
    """A 42M-parameter Llama saved in Hugging Face format: 42M x 4 bytes x 3 (weights, Adam m, v) ~ 500 MB."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=16384,
        hidden_size=512,
        intermediate_size=1376,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    out = root / "model"
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


def dd_speed(folder: Path, mb: int = 512) -> float:
    """Raw sequential write speed of ``folder``'s disk in MB/s (dd with fdatasync)."""
    target = folder / "dd.bin"
    t0 = time.perf_counter()
    subprocess.run(
        ["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={mb}", "conv=fdatasync"],
        check=True,
        capture_output=True,
    )
    elapsed = time.perf_counter() - t0
    target.unlink()
    return mb * 1.048576 / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default="", help="scratch folder on the disk to measure (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=12, help="training steps per throughput round")
    args = parser.parse_args()
    root = Path(args.workdir or tempfile.mkdtemp(prefix="runtime-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000), RANK="0")
    os.environ.update(WORLD_SIZE="1", LOCAL_RANK="0")

    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    from instances.runtime.config import JobConfig
    from instances.runtime.train import Trainer

    shards = make_data(root)
    model_dir = make_model(root)
    base = JobConfig.from_dict(
        {
            "model": str(model_dir),
            "data": [str(shards)],
            "checkpoint_dir": str(root / "ckpt"),
            "seq_len": 256,
            "micro_batch": 4,
            "max_steps": 10_000,
            "engine": "ddp",
            "checkpoint_every_minutes": 0,
            "log_every_steps": 1,
            "workdir": str(root / "work"),
            "lr": 3e-4,
            "warmup_steps": 10,
        }
    )
    print(f"scratch folder: {root}")

    # ---- 1 + 2: checkpoint throughput and blocked time --------------------------------------
    raw = statistics.median(dd_speed(root) for _ in range(2))
    tr = Trainer(base)
    tr.build()
    tr.train_step()  # creates the AdamW moments, so the state is weights + m + v
    tr.step = 1
    print(f"model: {tr.n_params / 1e6:.1f}M parameters")
    print(f"raw disk write (dd bs=1M conv=fdatasync, 512 MiB): {raw:.0f} MB/s")
    size_mb = 0.0
    for threads in (1, 2, 4):
        for verify in (False, True):
            tr.cfg = dataclasses.replace(base, checkpoint_threads=threads, verify_checkpoints=verify)
            times = []
            for _ in range(2):
                tr.step += 1
                t0 = time.perf_counter()
                tr.save(asynchronous=False)
                times.append(time.perf_counter() - t0)
            manifest = json.loads((Path(tr.store.step_path(tr.step)) / "manifest.json").read_text())
            size_mb = manifest["bytes"] / 1e6
            best = min(times)
            label = "write+fsync+manifest+sha256" if verify else "write+fsync+manifest"
            print(
                f"checkpoint {size_mb:.0f} MB, {threads} writer thread(s), {label}: {best:.2f} s = "
                f"{size_mb / best:.0f} MB/s = {size_mb / best / raw:.2f} x raw disk"
            )
    tr.cfg = base
    blocked_sync, blocked_async = [], []
    for _ in range(3):
        tr.train_step()
        tr.step += 1
        tr.save(asynchronous=False)
        blocked_sync.append(tr.blocked_s)
        tr.train_step()
        tr.step += 1
        tr.save(asynchronous=True)
        blocked_async.append(tr.blocked_s)
        tr.train_step()  # training continues while the write runs
        tr.wait_for_save()
    print(
        f"training blocked per save ({size_mb:.0f} MB): sync {statistics.median(blocked_sync):.2f} s, "
        f"async {statistics.median(blocked_async):.2f} s (median of 3)"
    )
    ckpt_step = tr.step
    tr.reporter.close() if tr.reporter else None
    tr._commit_pool.shutdown()

    # ---- 3: runtime vs bare loop ------------------------------------------------------------
    import torch.nn.functional as F

    from instances.runtime.model import build_model
    from instances.runtime.shards import ShardSet
    from instances.runtime.train import lr_lambda

    def bare_round(n: int) -> list[float]:
        model = build_model(str(model_dir), vocab_size=4096, seq_len=256, seed=0)
        model = torch.nn.parallel.DistributedDataParallel(model)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1, foreach=True)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(base, 10_000))
        stream = ShardSet(shards)  # bare data path: consecutive windows straight from the memmap
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            rows = torch.from_numpy(stream.tokens(i * 4 * 256, 4 * 256 + 1))
            x, y = rows[:-1].view(4, 256), rows[1:].reshape(4, 256)
            opt.zero_grad(set_to_none=True)
            logits = model(input_ids=x).logits
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            loss.item()
            out.append(time.perf_counter() - t0)
        return out[2:]

    def runtime_round(n: int, k: int) -> list[float]:
        work = root / f"work-rt{k}"
        cfg = dataclasses.replace(base, max_steps=n, checkpoint_dir=str(root / f"ckpt-rt{k}"), workdir=str(work))
        t = Trainer(cfg)
        t.save = lambda **_: None  # type: ignore[method-assign]  # measure the loop, not the final save
        t.run()
        if t.reporter:
            t.reporter.close()
        t._commit_pool.shutdown()
        stamps = [
            datetime.fromisoformat(e["time"].replace("Z", "+00:00")).timestamp()
            for e in map(json.loads, (work / "events.jsonl").read_text().splitlines())
            if e["type"] == "progress"
        ]
        return [b - a for a, b in itertools.pairwise(stamps)][2:]

    bare, rt = [], []
    for k in range(2):  # interleaved rounds: the machine's noise hits both sides alike
        bare += bare_round(args.steps)
        rt += runtime_round(args.steps, k)
    tokens = 256 * 4
    b, r = statistics.median(bare), statistics.median(rt)
    print(
        f"throughput: bare loop {tokens / b:.0f} tokens/s, runtime {tokens / r:.0f} tokens/s, "
        f"overhead {100 * (r / b - 1):+.1f}% (median step {b * 1e3:.0f} ms vs {r * 1e3:.0f} ms, "
        f"{len(bare)} steps each)"
    )

    # ---- 4: resume time -----------------------------------------------------------------------
    cfg = dataclasses.replace(base, max_steps=ckpt_step + 1, workdir=str(root / "work-resume"))
    cfg_path = root / "resume.json"
    cfg_path.write_text(json.dumps(cfg.to_dict()))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(os.cpu_count() or 2)}
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    t0 = time.time()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "1",
            "--standalone",
            "-m",
            "instances.runtime",
            "--config",
            str(cfg_path),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    events = [json.loads(x) for x in (root / "work-resume" / "events.jsonl").read_text().splitlines()]

    def at(kind: str) -> float:
        ev = next(e for e in events if e["type"] == kind)
        return datetime.fromisoformat(ev["time"].replace("Z", "+00:00")).timestamp()

    started = next(e for e in events if e["type"] == "started")
    m = re.search(r"resumed from step (\d+)", proc.stdout + proc.stderr)
    print(
        f"resume from the {size_mb:.0f} MB checkpoint (step {started['step']}, torchrun rc {proc.returncode}): "
        f"process start -> state loaded {at('started') - t0:.1f} s, -> first step done {at('progress') - t0:.1f} s"
        + ("" if m else " (no resume line found)")
    )


if __name__ == "__main__":
    main()
