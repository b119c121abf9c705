"""Pieces of ``gpu_check.py`` that read what a run left behind: the runtime's events, per-step progress, the
training figures, the GPU's identity and generation timing. Imported by ``gpu_check.py`` (run as a script
from this folder)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    """Print a progress line at once (the check runs for minutes)."""
    print(msg, flush=True)


def read_events(workdir: Path) -> list[dict[str, Any]]:
    path = workdir / "events.jsonl"
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            out.append(json.loads(line))
    return out


def ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


class Run:
    """One torchrun launch of the runtime in its own process session (so SIGTERM reaches the whole group)."""

    def __init__(
        self, cfg: dict[str, Any], workdir: Path, out: Path, name: str, env: dict[str, str], entry: Path | None
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        cfg_path = workdir / "job.json"
        cfg_path.write_text(json.dumps({**cfg, "workdir": str(workdir)}))
        self.log_path = out / f"torchrun-{name}.log"
        self._fh = open(self.log_path, "w")  # noqa: SIM115 - closed in wait()
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "1",
            "--standalone",
            *([str(entry)] if entry else ["-m", "instances.runtime"]),
            "--config",
            str(cfg_path),
        ]
        self.t0 = time.time()
        self.proc = subprocess.Popen(
            cmd, cwd=REPO, env=env, stdout=self._fh, stderr=subprocess.STDOUT, start_new_session=True
        )

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            rc = -9
        self._fh.close()
        self.wall_s = time.time() - self.t0
        return rc

    def tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def progress_by_step(events: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """step -> the last progress event of that step."""
    return {e["step"]: e for e in events if e["type"] == "progress"}


def train_figures(events: list[dict[str, Any]], tokens_per_step: int) -> dict[str, Any]:
    """Throughput and checkpoint timings of one uninterrupted run's events."""
    prog = progress_by_step(events)
    ckpts = [e for e in events if e["type"] == "checkpoint"]
    ckpt_steps = {e["step"] for e in ckpts}
    steps = sorted(prog)
    # per-step durations from consecutive progress events; skip the first 3 (warm-up, allocator, autotuning)
    # and the steps right after a save (their duration holds the time training was blocked by the save)
    durations = {s: ts(prog[s]) - ts(prog[s - 1]) for s in steps if s - 1 in prog}
    clean = [d for s, d in durations.items() if s > 3 and (s - 1) not in ckpt_steps]
    median = statistics.median(clean) if clean else float("nan")
    first, last = steps[min(3, len(steps) - 1)], steps[-1]
    span = ts(prog[last]) - ts(prog[first])
    saves = []
    for e in ckpts:
        if e["step"] not in prog:
            continue
        blocked = durations.get(e["step"] + 1)
        saves.append(
            {
                "step": e["step"],
                "bytes": e["bytes"],
                "committed_after_s": round(ts(e) - ts(prog[e["step"]]), 3),
                "next_step_s": round(blocked, 3) if blocked is not None else None,
                "training_blocked_s": round(blocked - median, 3) if blocked is not None else None,
            }
        )
    return {
        "steps": len(steps),
        "median_step_s": round(median, 4),
        "tokens_per_s_median_step": round(tokens_per_step / median, 1),
        "tokens_per_s_overall": round(tokens_per_step * (last - first) / span, 1) if span > 0 else None,
        "saves": saves,
    }


def gpu_identity() -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["torch_cuda"] = torch.version.cuda
        info["device_name"] = torch.cuda.get_device_name(0)
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        info["nvidia_smi"] = f"unavailable: {exc}"
    return info


def time_generation(generate: Any, runs: int) -> dict[str, Any]:
    """Call ``generate() -> (text, new tokens)`` once to warm up, then ``runs`` times; best tokens/s."""
    generate()
    best: tuple[float, int, str] | None = None
    for _ in range(runs):
        t0 = time.perf_counter()
        text, n = generate()
        dt = time.perf_counter() - t0
        if best is None or n / dt > best[1] / best[0]:
            best = (dt, n, text)
    assert best is not None
    dt, n, text = best
    return {"new_tokens": n, "seconds": round(dt, 3), "tokens_per_s": round(n / dt, 1), "text": text[:200]}
