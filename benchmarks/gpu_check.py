"""One end-to-end check of the training runtime and the inference export on a GPU (prints figures).

    benchmarks/gpu_check.sh [--cpu] [--out DIR] [--steps N] [--corpus FILE] [--deterministic] [--skip-export]
        [--speed-presets gpt2-small,1b] [--speed-only] [--compile] [--activation-checkpointing]

Not part of the test suite; run on purpose on a machine with an NVIDIA GPU (``--cpu`` runs the same
sequence with a tiny model on CPU, to check the script itself). Pure PyTorch + tokenizers: no Django.

Sequence (every training run is ``torchrun --nproc-per-node 1 --standalone -m instances.runtime``, engine
FSDP2, NCCL + gloo on GPU, ``mixed_precision`` bf16, which applies on GPU only):

1. data: a byte-level BPE tokenizer trained on a slice of the legal corpus, and token shards of that slice;
2. run A, uninterrupted: ``--steps`` optimizer steps, an interval DCP checkpoint every ``--every`` steps
   (async), the final one sync; tokens/s from the progress events (one per step), checkpoint save time
   from the gap between the progress event of a step and the checkpoint event of that step;
3. run B, interrupted: the same config; SIGTERM to the whole torchrun process group once the first
   interval checkpoint is committed (the runtime saves at its current step and exits 85), then the same
   command again, which resumes from that checkpoint and runs to ``--steps``; the losses of every step
   after the resume point are compared with run A's (on GPU bitwise equality is not promised), and so are
   the losses of run B before its interrupt (the same config run twice: the run-to-run noise floor);
   ``--deterministic`` starts the runtime through an entry script that first calls
   ``torch.use_deterministic_algorithms(True, warn_only=True)`` (the runtime itself has no such setting);
4. ``python -m instances.serving.export`` of run A's final checkpoint, then greedy generation from the
   export: through ``instances.serving.server.Generator`` (the server's code path) and, on GPU, the same
   ``model.generate`` call with the exported model moved to CUDA (the Generator itself loads on CPU).

0. speed (first, ``--speed-presets``, default ``gpt2-small,1b`` on GPU, ``tiny`` with ``--cpu``): a short run
   of each preset (FSDP2 world 1, bf16, no checkpoints); median tokens/s and the MFU the runtime itself
   reports in its progress events (FLOPs per token from the model config: 6·N + attention; the device's dense
   bf16 peak from ``instances/runtime/mfu.py``), both printed with their basis. ``--speed-only`` stops there.

Figures go to stdout and ``{out}/gpu_check.json``; the torchrun logs are copied to ``{out}``.

Seen on one NVIDIA H200 (torch 2.11.0+cu130, driver 580.159.04), 2026-11-30, defaults (gpt2-small preset,
125.8M parameters with an 8192 vocabulary, 1024 x 32 tokens per step, FSDP2 world 1, bf16): ~284k tokens/s
(median step 115 ms; one loss all-reduce + ``.item()`` per step since ``log_every_steps`` is 1); a 1.51 GB
checkpoint committed 4.1-4.8 s after its step (sha256 included), training blocked ~1.4-2.0 s per async
interval save; SIGTERM save 6.0-6.4 s. Losses are not bitwise reproducible run to run on this GPU (the same
config twice differs from step 2, up to 2e-4 by step 31; the cuDNN attention backward is non-deterministic
and ``--deterministic`` does not change that, it only warns), so the resumed run's losses differ from the
uninterrupted run's by the same order (6e-5 at step 40; 2.1e-3 at step 60 in a 60-step run); bitwise
exactness of resume is what the CPU tests in tests/runtime prove. Generation (128 new tokens, greedy,
batch 1): 23.8 tokens/s through the Generator on CPU, 122 tokens/s for the same call on CUDA in float32.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_check_support beside this script
from gpu_check_support import (  # noqa: E402
    Run,
    gpu_identity,
    log,
    progress_by_step,
    read_events,
    time_generation,
    train_figures,
    ts,
)

CORPUS_NAME = "legal_zh_lawrefbook.jsonl"
PROMPT = "中华人民共和国刑法\n第一条 为了惩罚犯罪，保护人民，根据宪法，"


def default_corpus() -> Path:
    """The legal corpus: ``$PORTAL_CORPORA_DIR/legal``, ``../shared/corpora/legal`` or ``.gpucheck/`` in the repo."""
    candidates = [
        Path(os.environ["PORTAL_CORPORA_DIR"]) / "legal" / CORPUS_NAME
        if os.environ.get("PORTAL_CORPORA_DIR")
        else None,
        REPO.parent / "shared" / "corpora" / "legal" / CORPUS_NAME,
        REPO / ".gpucheck" / CORPUS_NAME,
    ]
    for c in candidates:
        if c is not None and c.is_file():
            return c
    raise SystemExit(f"legal corpus not found; tried {[str(c) for c in candidates if c]} (use --corpus)")


def make_data(root: Path, corpus: Path, *, text_bytes: int, vocab: int) -> Path:
    """Tokenizer + shards of the first ``text_bytes`` UTF-8 bytes of ``corpus``; returns the shard folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.shards import ShardWriter

    texts, size = [], 0
    with open(corpus, encoding="utf-8") as fh:
        for line in fh:
            texts.append(json.loads(line)["text"])
            size += len(texts[-1].encode())
            if size >= text_bytes:
                break
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=vocab, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    out = root / "shards"
    out.mkdir()
    tok.save(str(out / "tokenizer.json"))
    with ShardWriter(
        out, vocab_size=tok.get_vocab_size(), eos_id=tok.token_to_id("<eos>"), tokenizer_file="tokenizer.json"
    ) as w:
        for enc in tok.encode_batch(texts):
            w.add_document(enc.ids)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="hide the GPU; tiny model and sizes (checks the script)")
    parser.add_argument("--out", default=os.environ.get("OUT") or "", help="where logs and gpu_check.json go")
    parser.add_argument("--corpus", default="", help=f"the legal corpus file ({CORPUS_NAME})")
    parser.add_argument("--workdir", default="", help="scratch folder (default: a temp dir)")
    parser.add_argument("--preset", default="", help="model preset (default gpt2-small on GPU, tiny with --cpu)")
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps of the full run")
    parser.add_argument("--every", type=int, default=0, help="interval checkpoint every N steps")
    parser.add_argument("--seq-len", type=int, default=0)
    parser.add_argument("--micro-batch", type=int, default=0)
    parser.add_argument("--new-tokens", type=int, default=128, help="tokens per generation")
    parser.add_argument(
        "--deterministic",
        action="store_true",
        help="start the runtime through an entry script that calls torch.use_deterministic_algorithms(True, "
        "warn_only=True) first, with CUBLAS_WORKSPACE_CONFIG=:4096:8 (the runtime has no such setting)",
    )
    parser.add_argument("--skip-export", action="store_true", help="stop after the training runs")
    parser.add_argument("--speed-presets", default="", help="presets timed first (default gpt2-small,1b; tiny on CPU)")
    parser.add_argument("--speed-steps", type=int, default=0, help="steps per speed run (default 30; 4 on CPU)")
    parser.add_argument("--speed-only", action="store_true", help="stop after the speed runs")
    parser.add_argument("--compile", action="store_true", help="speed runs: torch.compile each decoder block")
    parser.add_argument("--activation-checkpointing", action="store_true", help="speed runs: recompute blocks")
    parser.add_argument("--run-timeout", type=float, default=240.0, help="seconds before a torchrun run is killed")
    args = parser.parse_args()

    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    }
    for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = env["CUDA_VISIBLE_DEVICES"] = ""
        env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    import torch

    gpu = torch.cuda.is_available()
    preset = args.preset or ("gpt2-small" if gpu else "tiny")
    steps = args.steps or (60 if gpu else 14)
    every = args.every or (20 if gpu else 4)
    seq_len = args.seq_len or (1024 if gpu else 64)
    micro_batch = args.micro_batch or (32 if gpu else 4)
    text_bytes, vocab = (8_000_000, 8192) if gpu else (600_000, 1024)

    out = Path(args.out or tempfile.mkdtemp(prefix="gpu-check-out-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="gpu-check-"))
    root.mkdir(parents=True, exist_ok=True)
    for name in ("ckpt-a", "ckpt-b", "work-a", "work-b", "export"):  # a reused scratch folder starts clean
        shutil.rmtree(root / name, ignore_errors=True)
    entry: Path | None = None
    if args.deterministic:
        env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        entry = root / "deterministic_entry.py"
        entry.write_text(
            "import sys\nimport torch\ntorch.use_deterministic_algorithms(True, warn_only=True)\n"
            "from instances.runtime.__main__ import main\nsys.exit(main())\n"
        )
    corpus = Path(args.corpus) if args.corpus else default_corpus()
    figures: dict[str, Any] = {"mode": "gpu" if gpu else "cpu", "deterministic": args.deterministic, **gpu_identity()}
    failures: list[str] = []
    log(f"== gpu_check: {json.dumps(figures, ensure_ascii=False)}")
    log(f"scratch {root}, output {out}, corpus {corpus}")

    t0 = time.perf_counter()
    shards = root / "shards"
    if not (shards / "index.json").is_file():  # reused from an earlier run in the same --workdir
        shutil.rmtree(shards, ignore_errors=True)
        shards = make_data(root, corpus, text_bytes=text_bytes, vocab=vocab)
    index = json.loads((shards / "index.json").read_text())
    log(f"data: {index['tokens']} tokens, vocab {index['vocab_size']}, in {time.perf_counter() - t0:.1f} s")
    figures["data"] = {"tokens": index["tokens"], "vocab": index["vocab_size"], "text_bytes": text_bytes}

    speed_presets = [x for x in (args.speed_presets or ("gpt2-small,1b" if gpu else "tiny")).split(",") if x]
    figures["speed"] = speed_runs(speed_presets, shards, root, out, env, entry, args, gpu=gpu, failures=failures)
    if args.speed_only:
        return finish(figures, failures, out, root, keep=bool(args.workdir))

    cfg = {
        "model": preset,
        "data": [str(shards)],
        "tokenizer": str(shards / "tokenizer.json"),
        "seq_len": seq_len,
        "micro_batch": micro_batch,
        "max_steps": steps,
        "engine": "fsdp",
        "mixed_precision": "bf16",
        "lr": 6e-4,
        "warmup_steps": 10,
        "checkpoint_every_minutes": 0,
        "checkpoint_every_steps": every,
        "keep_last": 2,
        "async_save": True,
        "log_every_steps": 1,
        "term_grace_s": 120,
    }
    tokens_per_step = seq_len * micro_batch
    figures["config"] = {
        k: cfg[k] for k in ("model", "seq_len", "micro_batch", "max_steps", "engine", "mixed_precision")
    }
    figures["config"]["checkpoint_every_steps"] = every

    # ---- run A: uninterrupted ------------------------------------------------------------------------
    ckpt_a = root / "ckpt-a"
    run = Run({**cfg, "checkpoint_dir": str(ckpt_a)}, root / "work-a", out, "a-uninterrupted", env, entry)
    rc = run.wait(args.run_timeout)
    events_a = read_events(root / "work-a")
    log(f"run A (uninterrupted): rc {rc}, {run.wall_s:.1f} s wall")
    if rc != 0:
        log(run.tail())
        failures.append(f"run A exited {rc}")
        return finish(figures, failures, out, root, keep=bool(args.workdir))
    train = train_figures(events_a, tokens_per_step)
    train["wall_s"] = round(run.wall_s, 1)
    train["launch_to_first_step_s"] = round(ts(progress_by_step(events_a)[1]) - run.t0, 1)
    figures["train"] = train
    loss_a = {s: e["loss"] for s, e in progress_by_step(events_a).items()}
    log(
        f"training ({preset}, {seq_len}x{micro_batch} tokens/step): "
        f"{train['tokens_per_s_median_step']:.0f} tokens/s (median step {train['median_step_s'] * 1e3:.1f} ms), "
        f"{train['tokens_per_s_overall'] or 0:.0f} tokens/s over steps 3..{steps} including saves; "
        f"loss step 1 {loss_a[1]:.4f} -> step {steps} {loss_a[steps]:.4f}; "
        f"launch -> first step {train['launch_to_first_step_s']} s"
    )
    for s in train["saves"]:
        kind = "sync (final)" if s["step"] == steps else "async (interval)"
        log(
            f"checkpoint step {s['step']} {kind}: {s['bytes'] / 1e6:.0f} MB, committed {s['committed_after_s']:.2f} s "
            f"after the step"
            + (f", training blocked ~{s['training_blocked_s']:.2f} s" if s["training_blocked_s"] is not None else "")
        )

    # ---- run B: interrupted by SIGTERM after the first interval checkpoint, then resumed -------------
    ckpt_b = root / "ckpt-b"
    cfg_b = {**cfg, "checkpoint_dir": str(ckpt_b)}
    run = Run(cfg_b, root / "work-b", out, "b-interrupted", env, entry)
    deadline = time.monotonic() + args.run_timeout
    while not any(e["type"] == "checkpoint" for e in read_events(root / "work-b")):
        if run.proc.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if run.proc.poll() is None:
        os.killpg(run.proc.pid, signal.SIGTERM)  # the preemption notice, to torchrun and the worker
    rc = run.wait(args.run_timeout)
    events_b = read_events(root / "work-b")
    exit_b = next((e for e in reversed(events_b) if e["type"] == "exit"), {})
    stopped_at = int(exit_b.get("step", -1))
    log(
        f"run B (SIGTERM after the first checkpoint): torchrun rc {rc}, exit {exit_b.get('reason')} "
        f"({exit_b.get('exit_code')}) at step {stopped_at}"
    )
    if exit_b.get("exit_code") != 85:
        failures.append(f"run B did not exit preempted: {exit_b}")
        log(run.tail())
    term_ckpt = next((e for e in events_b if e["type"] == "checkpoint" and e["step"] == stopped_at), None)
    prog_b = progress_by_step(events_b)
    if term_ckpt is not None and stopped_at in prog_b:
        figures["sigterm_save_s"] = round(ts(term_ckpt) - ts(prog_b[stopped_at]), 3)
        log(f"SIGTERM save at step {stopped_at}: committed {figures['sigterm_save_s']:.2f} s after the step")
    # noise floor: the same config run twice (A and B before its interrupt) with no resume in between
    loss_pre = {s: e["loss"] for s, e in prog_b.items() if s <= stopped_at}
    pre = [s for s in sorted(loss_pre) if s in loss_a]
    first_diff = next((s for s in pre if loss_pre[s] != loss_a[s]), None)
    figures["before_interrupt"] = {
        "steps_compared": len(pre),
        "bitwise_equal_steps": sum(1 for s in pre if loss_pre[s] == loss_a[s]),
        "first_differing_step": first_diff,
        "max_abs_diff": max((abs(loss_pre[s] - loss_a[s]) for s in pre), default=None),
    }
    log(
        f"same config twice, steps 1..{stopped_at} before the interrupt (run-to-run noise, no resume): "
        f"bitwise equal on {figures['before_interrupt']['bitwise_equal_steps']} of {len(pre)} steps, first "
        f"difference at step {first_diff}, max |diff| {figures['before_interrupt']['max_abs_diff']!r}"
    )
    figures["losses_uninterrupted"] = [loss_a[s] for s in sorted(loss_a)]
    figures["losses_b_before_interrupt"] = [loss_pre[s] for s in sorted(loss_pre)]
    run = Run(cfg_b, root / "work-b", out, "b-resumed", env, entry)
    rc = run.wait(args.run_timeout)
    events_b = read_events(root / "work-b")
    starts = [e["step"] for e in events_b if e["type"] == "started"]
    log(f"run B resumed: rc {rc}, {run.wall_s:.1f} s wall, started at steps {starts}")
    if rc != 0:
        failures.append(f"resumed run exited {rc}")
        log(run.tail())
    else:
        loss_b = {s: e["loss"] for s, e in progress_by_step(events_b).items()}
        after = [s for s in range(stopped_at + 1, steps + 1) if s in loss_b and s in loss_a]
        diffs = [abs(loss_b[s] - loss_a[s]) for s in after]
        figures["losses_b_after_resume"] = {s: loss_b[s] for s in after}
        figures["resume"] = {
            "stopped_at": stopped_at,
            "started": starts,
            "final_step": steps,
            "loss_uninterrupted": loss_a[steps],
            "loss_resumed": loss_b.get(steps),
            "abs_diff_final": abs(loss_b[steps] - loss_a[steps]) if steps in loss_b else None,
            "max_abs_diff_after_resume": max(diffs) if diffs else None,
            "steps_compared": len(after),
            "bitwise_equal_steps": sum(1 for s in after if loss_b[s] == loss_a[s]),
            "first_step_after_resume": {
                "step": stopped_at + 1,
                "uninterrupted": loss_a.get(stopped_at + 1),
                "resumed": loss_b.get(stopped_at + 1),
            },
        }
        r = figures["resume"]
        log(
            f"loss at step {steps}: uninterrupted {r['loss_uninterrupted']!r}, resumed {r['loss_resumed']!r}, "
            f"|diff| {r['abs_diff_final']!r}; max |diff| over the {r['steps_compared']} steps after the resume "
            f"{r['max_abs_diff_after_resume']!r}; bitwise equal on {r['bitwise_equal_steps']} of them"
        )

    # ---- export + generation ------------------------------------------------------------------------
    if args.skip_export:
        return finish(figures, failures, out, root, keep=bool(args.workdir))
    final_dir = ckpt_a / f"step-{steps:08d}"
    export_dir = root / "export"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "instances.serving.export", str(final_dir), str(export_dir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=args.run_timeout,
    )
    export_s = time.perf_counter() - t0
    (out / "export.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        failures.append(f"export exited {proc.returncode}")
        log(f"export failed:\n{proc.stderr[-3000:]}")
    else:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        figures["export"] = {"seconds": round(export_s, 1), "bytes": info["bytes"], "parameters": info["parameters"]}
        log(f"export: {info['parameters'] / 1e6:.1f}M parameters, {info['bytes'] / 1e6:.0f} MB, {export_s:.1f} s")

        from instances.serving.server import Generator

        gen = Generator(export_dir)
        device = next(gen.model.parameters()).device
        torch.set_num_threads(min(8, os.cpu_count() or 1))
        cpu = time_generation(lambda: gen.generate(PROMPT, args.new_tokens), runs=2)
        figures["generate_generator"] = {"device": str(device), **cpu}
        log(
            f"generation via Generator (device {device}, float32): {cpu['tokens_per_s']:.1f} tokens/s "
            f"({cpu['new_tokens']} new tokens in {cpu['seconds']:.2f} s)"
        )
        log(f"  sample: {cpu['text']!r}")
        if gpu and device.type != "cuda":
            for dtype in (torch.float32, torch.bfloat16):
                model = gen.model.to("cuda", dtype=dtype)
                ids = gen.tokenizer.encode(PROMPT).ids

                def on_gpu(model: Any = model, ids: list[int] = ids) -> tuple[str, int]:
                    with torch.no_grad():
                        inputs = torch.tensor([ids], dtype=torch.long, device="cuda")
                        res = model.generate(
                            inputs,
                            attention_mask=torch.ones_like(inputs),
                            do_sample=False,
                            max_new_tokens=args.new_tokens,
                            min_new_tokens=1,
                            repetition_penalty=gen.repetition_penalty,
                        )
                        torch.cuda.synchronize()
                    new = res[0, len(ids) :].tolist()
                    eos = gen.info.get("eos_id")
                    if eos is not None and eos in new:
                        new = new[: new.index(eos)]
                    return gen.tokenizer.decode(new), len(new)

                g = time_generation(on_gpu, runs=2)
                name = str(dtype).removeprefix("torch.")
                figures[f"generate_cuda_{name}"] = g
                log(
                    f"generation, same call on CUDA ({name}): {g['tokens_per_s']:.1f} tokens/s "
                    f"({g['new_tokens']} new tokens in {g['seconds']:.2f} s); same text as the Generator: "
                    f"{g['text'] == cpu['text']}"
                )

    return finish(figures, failures, out, root, keep=bool(args.workdir))


def speed_runs(
    presets: list[str],
    shards: Path,
    root: Path,
    out: Path,
    env: dict[str, str],
    entry: Path | None,
    args: Any,
    *,
    gpu: bool,
    failures: list[str],
) -> dict[str, Any]:
    """Section 0: tokens/s and the runtime's own MFU for each preset (see the module docstring)."""
    steps = args.speed_steps or (30 if gpu else 4)
    shapes = {"gpt2-small": (1024, 32), "1b": (2048, 8), "7b": (2048, 2), "tiny": (64, 4)}
    results: dict[str, Any] = {}
    for preset in presets:
        seq_len, micro_batch = shapes.get(preset, (1024, 8)) if gpu else (64, 4)
        cfg = {
            "model": preset, "data": [str(shards)], "tokenizer": str(shards / "tokenizer.json"),
            "seq_len": seq_len, "micro_batch": micro_batch, "max_steps": steps, "engine": "fsdp",
            "mixed_precision": "bf16", "lr": 3e-4, "warmup_steps": 2, "checkpoint_every_minutes": 0,
            "checkpoint_every_steps": 0, "keep_last": 1, "log_every_steps": 1, "compile": args.compile,
            "activation_checkpointing": args.activation_checkpointing,
            "checkpoint_dir": str(root / f"ckpt-speed-{preset}"),
        }  # fmt: skip
        shutil.rmtree(root / f"ckpt-speed-{preset}", ignore_errors=True)
        shutil.rmtree(root / f"work-speed-{preset}", ignore_errors=True)
        run = Run(cfg, root / f"work-speed-{preset}", out, f"speed-{preset}", env, entry)
        rc = run.wait(args.run_timeout)
        events = read_events(root / f"work-speed-{preset}")
        prog = [e for e in events if e["type"] == "progress" and e["step"] > 3]  # past warm-up / compilation
        started = next((e for e in events if e["type"] == "started"), {})
        if rc != 0 or not prog:
            failures.append(f"speed run {preset} exited {rc}")
            log(run.tail())
            continue
        tps = statistics.median(e["tokens_per_s"] for e in prog)
        mfus = [e["mfu"] for e in prog if e.get("mfu") is not None]
        mfu = statistics.median(mfus) if mfus else None
        note = next((e.get("mfu_note") for e in prog if e.get("mfu_note")), "")
        fpt, peak = started.get("flops_per_token"), started.get("peak_flops")
        results[preset] = {"tokens_per_s": round(tps, 1), "mfu": mfu, "flops_per_token": fpt, "peak_flops": peak,
                           "device": started.get("device"), "seq_len": seq_len, "micro_batch": micro_batch,
                           "steps": steps, "compile": args.compile,
                           "activation_checkpointing": args.activation_checkpointing, "mfu_note": note}  # fmt: skip
        basis = (f"{fpt / 1e9:.3f} GFLOP/token" if fpt else "?") + (
            f", peak {peak / 1e12:.1f} TFLOP/s dense bf16 ({started.get('device')})" if peak else ""
        )
        log(f"speed {preset} ({seq_len}x{micro_batch} tokens/step, {steps} steps): {tps:.0f} tokens/s, MFU "
            + (f"{100 * mfu:.1f}%" if mfu is not None else f"n/a ({note})") + f" [{basis}]")  # fmt: skip
    return results


def finish(figures: dict[str, Any], failures: list[str], out: Path, root: Path, *, keep: bool) -> int:
    """Write ``gpu_check.json``, print the verdict, drop a temporary scratch folder; return the exit code."""
    figures["failures"] = failures
    (out / "gpu_check.json").write_text(json.dumps(figures, indent=1, ensure_ascii=False))
    log(f"== gpu_check {'FAILED: ' + '; '.join(failures) if failures else 'done'}; figures in {out / 'gpu_check.json'}")
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
