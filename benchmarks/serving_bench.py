"""Throughput of the local model server at 1, 4 and 16 concurrent clients: before (the first server, one
generation at a time under a lock, no streaming) and after (continuous batching with a KV cache, streamed).

    .venv/bin/python benchmarks/serving_bench.py [--tokens 64] [--rounds 2] [--clients 1,4,16] [--before REF]

The model is the tiny Llama the tests use, trained by the runtime on the legal corpus (``tests/marketplace/
serving_support.py``: about a minute of torchrun the first time, then kept under ``--work``, default
``/tmp/gpu-portal-serving-bench``) and exported as a published app's build exports it. Nothing is downloaded.

*Before* is ``instances/serving/server.py`` as it was at ``--before`` (default ``af9b0c3``, the last commit before
issue 29), started from a copy of that file beside this checkout (its imports, ``instances.serving.base``, are
unchanged), asked ``POST /generate``. *After* is this checkout's server, asked ``POST /v1/completions`` with
``stream: true``. Both run as ``LocalDeployments`` runs them: one process, ``OMP_NUM_THREADS=1``, greedy decoding
with the repetition penalty, the same prompts; each client sends ``--rounds`` requests one after another for
``--tokens`` tokens. Printed per level: the tokens generated (as each server counts them), the wall time, total
tokens/s, its ratio to one client's, and for the streaming server the median time to the first token — the best
of ``--repeat`` runs per level (the machines are shared: other processes only ever slow a run down). The load
average is printed with them.

What it leaves out: a GPU (where one is lent, vLLM's own figures belong beside these), the portal in front
(billing adds two database round trips per call: ``benchmarks/app_call_bench.py``) and the network.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "marketplace"))
PROMPTS = ["第一条 为了规范合同行为", "第二条 本法所称", "中华人民共和国", "第十条 当事人订立合同，有书面形式"]


def model(work: Path) -> Path:
    export = work / "export"
    if (export / "export.json").is_file():
        return export
    import serving_support

    from instances.serving import export_checkpoint

    trained = serving_support.train_tiny_model(work / "train")
    export_checkpoint(trained["checkpoint"], export)
    return export


def start(cmd: list[str], ready: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error"}  # fmt: skip
    ready.unlink(missing_ok=True)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 120
    while not ready.is_file():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the server did not start: {log.read_text()[-800:]}")
        time.sleep(0.1)
    return proc, f"http://127.0.0.1:{json.loads(ready.read_text())['port']}"


RESETS = [0]  # connections the server reset (its listen backlog overflowed), each retried


def post(url: str, body: dict[str, Any]) -> Any:
    data, headers = json.dumps(body).encode(), {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, headers=headers)  # noqa: S310 - our own server on loopback
    for _ in range(20):
        try:
            return urllib.request.urlopen(request, timeout=600)  # noqa: S310 - our own server on loopback
        except (ConnectionResetError, urllib.error.URLError) as exc:
            if not isinstance(exc, ConnectionResetError) and not isinstance(exc.reason, ConnectionResetError):
                raise
            RESETS[0] += 1
            time.sleep(0.05)
    raise SystemExit("the server kept resetting connections")


def before_call(url: str, prompt: str, tokens: int) -> tuple[int, float | None]:
    with post(f"{url}/generate", {"text": prompt, "max_new_tokens": tokens}) as r:
        return int(json.loads(r.read())["tokens"]), None


def after_call(url: str, prompt: str, tokens: int) -> tuple[int, float | None]:
    started, first, count = time.perf_counter(), None, 0
    body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    with post(f"{url}/v1/completions", body) as r:
        for raw in r:
            line = raw.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("choices") and first is None:
                first = time.perf_counter() - started
            if event.get("usage"):
                count = int(event["usage"]["completion_tokens"])
    return count, first


def level(call: Any, url: str, clients: int, rounds: int, tokens: int) -> dict[str, Any]:
    results: list[tuple[int, float | None]] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        for r in range(rounds):
            out = call(url, PROMPTS[(i + r) % len(PROMPTS)], tokens)
            with lock:
                results.append(out)

    call(url, PROMPTS[0], 4)  # warm up
    RESETS[0] = 0
    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    generated = sum(n for n, _ in results)
    ttft = [f for _, f in results if f is not None]
    return {"clients": clients, "tokens": generated, "wall_s": wall, "tps": generated / wall,
            "ttft_ms": statistics.median(ttft) * 1000 if ttft else None, "resets": RESETS[0]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3, help="runs per level; the best is printed")
    parser.add_argument("--clients", default="1,4,16")
    parser.add_argument("--before", default="af9b0c3", help="the git commit of the first server")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "gpu-portal-serving-bench"))
    parser.add_argument("--only", choices=["before", "after"], default=None)
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    export = model(work)
    levels = [int(c) for c in args.clients.split(",")]
    legacy = work / "legacy_server.py"
    old = subprocess.run(
        ["git", "show", f"{args.before}:instances/serving/server.py"], cwd=ROOT, check=True, capture_output=True
    )
    legacy.write_bytes(old.stdout)
    serve = ["serve", "--model-dir", str(export), "--port", "0"]
    servers = {
        "before": ([sys.executable, str(legacy), *serve], before_call),
        "after": ([sys.executable, "-m", "instances.serving.server", *serve], after_call),
    }
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"model {export} ({json.loads((export / 'export.json').read_text())['parameters']:,} parameters), "
          f"{args.tokens} tokens per request, {args.rounds} requests per client, 1 thread per server")  # fmt: skip
    for name, (cmd, call) in servers.items():
        if args.only and name != args.only:
            continue
        ready = work / f"{name}.ready"
        proc, url = start([*cmd, "--ready-file", str(ready)], ready, work / f"{name}.log")
        try:
            rows = [
                max((level(call, url, n, args.rounds, args.tokens) for _ in range(args.repeat)), key=lambda r: r["tps"])
                for n in levels
            ]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        base = rows[0]["tps"]
        print(f"\n{name}: {'clients':>7} {'tokens':>7} {'wall s':>8} {'tokens/s':>9} {'× 1 client':>10} {'TTFT ms':>8}"
              f" {'resets':>6}")  # fmt: skip
        for row in rows:
            ttft = f"{row['ttft_ms']:.0f}" if row["ttft_ms"] is not None else "—"
            print(f"{'':>{len(name) + 1}} {row['clients']:>7} {row['tokens']:>7} {row['wall_s']:>8.2f} "
                  f"{row['tps']:>9.1f} {row['tps'] / base:>10.2f} {ttft:>8} {row['resets']:>6}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
