"""Benchmark of the training runtime (prints figures; never part of the test suite).

    .venv/bin/python benchmarks/runtime_bench.py [--workdir DIR] [--repeats N] [--steps N] [--threads N]
        [--sections ckpt,async,overhead,resume,rank-loss]

Measures on this machine, each figure a median over ``--repeats`` rounds:
1. ``ckpt``: checkpoint save throughput for a ~505 MB state (a 42M-parameter Llama + AdamW moments), manifest
   with SHA-256 per file included (hashed while written), side by side with the raw write speed of the same
   folder (``dd bs=1M conv=fdatasync`` of as many bytes); the order of dd and the save alternates each round;
2. ``async``: time training is blocked per save, sync vs ``dcp.async_save``, and what an async save in flight
   costs the next three steps (their time vs the same three steps with no save);
3. ``overhead``: tokens/s of the runtime loop vs a bare PyTorch loop (same model, data, DDP world 1, AdamW,
   clipping, schedule); which of the two runs first alternates each round;
4. ``resume``: process start (torchrun) to the first training step after that ~505 MB checkpoint;
5. ``rank-loss``: the local backend, 2 ranks, tiny model: SIGKILL of rank 1 -> job reported lost (exit 88)
   -> next attempt's first resumed step (what the portal adds: its reconcile period).
Sections 1-3 run in one process (world size 1, gloo) so the figures are not shared between two ranks.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

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
    parser.add_argument("--repeats", type=int, default=5, help="rounds per figure (medians are printed)")
    parser.add_argument("--threads", type=int, default=4, help="DCP writer threads per rank")
    parser.add_argument("--sections", default="ckpt,async,overhead,resume,rank-loss")
    args = parser.parse_args()
    sections = set(args.sections.split(","))
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

    # ---- 1: checkpoint throughput vs dd, order alternated -------------------------------------
    tr = Trainer(dataclasses.replace(base, checkpoint_threads=args.threads))
    tr.build()
    tr.train_step()  # creates the AdamW moments, so the state is weights + m + v
    tr.step = 1
    print(f"model: {tr.n_params / 1e6:.1f}M parameters; {args.threads} writer thread(s)")
    size_mb = 0.0

    def save_once() -> float:
        tr.step += 1
        t0 = time.perf_counter()
        tr.save(asynchronous=False)
        return time.perf_counter() - t0

    save_once()  # warm-up (allocations, first files); also tells the size
    manifest = json.loads((Path(tr.store.step_path(tr.step)) / "manifest.json").read_text())
    size_mb = manifest["bytes"] / 1e6
    assert all("sha256" in f for f in manifest["files"].values())
    dd_mb = int(size_mb * 1e6 / 1048576) + 1
    if "ckpt" in sections:
        dd_rates, save_rates, pair = [], [], []
        for i in range(args.repeats):
            order = ("dd", "save") if i % 2 == 0 else ("save", "dd")
            got: dict[str, float] = {}
            for what in order:
                got[what] = dd_speed(root, dd_mb) if what == "dd" else size_mb / save_once()
            dd_rates.append(got["dd"])
            save_rates.append(got["save"])
            pair.append(got["save"] / got["dd"])
        d, sv = statistics.median(dd_rates), statistics.median(save_rates)
        print(f"raw disk write (dd bs=1M count={dd_mb} conv=fdatasync): median {d:.0f} MB/s "
              f"(rounds: {', '.join(f'{x:.0f}' for x in dd_rates)})")  # fmt: skip
        print(f"checkpoint save {size_mb:.0f} MB incl. fsync + manifest with SHA-256: median {sv:.0f} MB/s "
              f"(rounds: {', '.join(f'{x:.0f}' for x in save_rates)})")  # fmt: skip
        print(f"save / dd: {sv / d:.2f} x (ratio of medians); median of per-round ratios "
              f"{statistics.median(pair):.2f} x over {args.repeats} rounds, order alternated")  # fmt: skip

    # ---- 2: blocked time sync vs async, and the next steps after an async save ----------------
    if "async" in sections:
        blocked_sync, blocked_async, quiet, after = [], [], [], []

        def timed_steps(n: int) -> float:
            t0 = time.perf_counter()
            for _ in range(n):
                tr.train_step()
                tr.step += 1
            return time.perf_counter() - t0

        for _ in range(args.repeats):
            timed_steps(1)
            tr.save(asynchronous=False)
            blocked_sync.append(tr.blocked_s)
            quiet.append(timed_steps(3))  # three steps, nothing in flight
            tr.save(asynchronous=True)
            blocked_async.append(tr.blocked_s)
            after.append(timed_steps(3))  # the same three steps while the write runs
            tr.wait_for_save()
        bs, ba = statistics.median(blocked_sync), statistics.median(blocked_async)
        q, a3 = statistics.median(quiet), statistics.median(after)
        print(f"training blocked per save ({size_mb:.0f} MB): sync {bs:.2f} s, async {ba:.2f} s = "
              f"{100 * ba / bs:.0f}% of sync (median of {args.repeats})")  # fmt: skip
        print(f"next 3 steps after an async save: {a3:.2f} s vs {q:.2f} s with no save in flight "
              f"({a3 - q:+.2f} s, {100 * (a3 / q - 1):+.0f}%)")  # fmt: skip
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

    if "overhead" in sections:
        bare, rt, ratios = [], [], []
        for k in range(args.repeats):  # which loop runs first alternates: drift and warm-up hit both alike
            if k % 2 == 0:
                b1 = bare_round(args.steps)
                r1 = runtime_round(args.steps, k)
            else:
                r1 = runtime_round(args.steps, k)
                b1 = bare_round(args.steps)
            bare += b1
            rt += r1
            ratios.append(statistics.median(r1) / statistics.median(b1))
        tokens = 256 * 4
        b, r = statistics.median(bare), statistics.median(rt)
        print(
            f"throughput: bare loop {tokens / b:.0f} tokens/s, runtime {tokens / r:.0f} tokens/s, "
            f"overhead {100 * (r / b - 1):+.1f}% (median step {b * 1e3:.0f} ms vs {r * 1e3:.0f} ms, "
            f"{len(bare)} steps each); per-round overheads "
            + ", ".join(f"{100 * (x - 1):+.1f}%" for x in ratios)
            + " (bare first in rounds 1, 3, …)"
        )

    if "resume" in sections:
        resume_time(base, root, ckpt_step, size_mb)
    if "rank-loss" in sections:
        rank_loss_time(shards, root)
    if not args.workdir:
        shutil.rmtree(root, ignore_errors=True)


def resume_time(base: Any, root: Path, ckpt_step: int, size_mb: float) -> None:
    """Section 4: torchrun start -> state loaded -> first step, from the newest checkpoint."""
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


def rank_loss_time(shards: Path, root: Path) -> None:
    """Section 5: SIGKILL of rank 1 under the local backend -> lost (88) -> the next attempt's first step."""
    import signal

    from instances.backends.base import JobSpec
    from instances.backends.local import LocalBackend

    backend = LocalBackend(workspace_root=root / "rl-ws", slots=2)
    work = root / "rl-work"
    cfg = {"model": "tiny", "data": [str(shards)], "checkpoint_dir": str(root / "rl-ckpt"), "seq_len": 64,
           "micro_batch": 2, "max_steps": 100_000, "engine": "ddp", "checkpoint_every_minutes": 0,
           "checkpoint_every_steps": 5, "log_every_steps": 1, "workdir": str(work)}  # fmt: skip

    def events() -> list[dict[str, Any]]:
        path = work / "events.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def submit(attempt: int) -> str:
        return backend.submit(JobSpec(job_id="rank-loss-bench", attempt=attempt, image="local",
                                      placement=(("local", 2),), nproc_per_node=2,
                                      config_json=json.dumps({**cfg, "attempt": attempt})))  # fmt: skip

    handle = submit(1)
    _, ws = LocalBackend.parse_handle(handle)
    while not any(e["type"] == "checkpoint" for e in events()):
        time.sleep(0.05)
    victim = int((ws / "ranks" / "started-1").read_text())
    t_kill = time.time()
    os.kill(victim, signal.SIGKILL)
    while not backend.status(handle).terminal:
        time.sleep(0.02)
    t_detect = time.time()
    st = backend.status(handle)
    handle2 = submit(2)
    while not any(e["type"] == "progress" and e.get("attempt") == 2 for e in events()):
        time.sleep(0.05)
    t_step = time.time()
    started = [e["step"] for e in events() if e["type"] == "started"][-1]
    backend.stop(handle2, grace_s=1)
    print(f"rank loss (SIGKILL of rank 1, 2 ranks, tiny model): backend status {st.state}/{st.exit_code} "
          f"{t_detect - t_kill:.1f} s after the kill; next attempt's first step (resumed from step {started}) "
          f"{t_step - t_kill:.1f} s after the kill (+ the portal's reconcile period)")  # fmt: skip


if __name__ == "__main__":
    main()
