"""Benchmark: dataset pipeline throughput and peak memory (prints figures; asserts nothing).

    .venv/bin/python benchmarks/dataset_pipeline.py [--corpus PATH] [--times 10] [--vocab 8000]

1. Trains the byte-level BPE tokenizer once on the corpus (default: the legal corpus of
   ``../shared/corpora`` or ``$PORTAL_CORPORA_DIR``) and reports its time and peak RSS.
2. Runs validate → de-identify → tokenize + shard on the corpus (1x) and on the corpus concatenated
   ``--times`` times into a temporary file, each in a fresh child process, and reports MB/s of input
   for de-identify + tokenize + shard, each stage's share of the time, and the child's peak RSS
   (``ru_maxrss``): a streaming pipeline has about the same peak for both sizes.
Deduplication is left out of the scaled run on purpose (it would drop the repeated copies).
3. On the 1x corpus (validated once): the de-identify stage in chunks on 1 and on 2 worker processes
   (``datasets.pipeline.parallel``, MB/s each), its cost against reading the same file and running one
   regular expression over every text, and the shard stage against raw ``tokenizers`` ``encode_batch``
   over the same texts.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MB = 1_000_000


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _child(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args],
        check=True,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def worker_train(src: str, work: str, vocab: int) -> None:
    from datasets.pipeline import train_tokenizer, validate

    w = Path(work)
    t0 = time.perf_counter()
    validate(src, w / "train-docs.jsonl", fmt="jsonl")
    t1 = time.perf_counter()
    report = train_tokenizer(w / "train-docs.jsonl", w / "tokenizer.json", vocab_size=vocab)
    t2 = time.perf_counter()
    (w / "train-docs.jsonl").unlink()
    print(
        json.dumps(
            {
                "validate_s": t1 - t0,
                "train_s": t2 - t1,
                "maxrss_mib": _maxrss_mib(),
                **report,
            }
        )
    )


def worker_run(src: str, work: str, tokenizer: str) -> None:
    from datasets.pipeline import deidentify_file, validate, write_shards

    w = Path(work)
    times: dict[str, float] = {}
    rss: dict[str, float] = {}
    t = time.perf_counter()
    validate(src, w / "docs.jsonl", fmt="jsonl")
    times["validate"], t = time.perf_counter() - t, time.perf_counter()
    rss["validate"] = _maxrss_mib()
    deid = deidentify_file(w / "docs.jsonl", w / "deid.jsonl")
    times["deidentify"], t = time.perf_counter() - t, time.perf_counter()
    rss["deidentify"] = _maxrss_mib()
    index = write_shards(w / "deid.jsonl", tokenizer, w / "shards")
    times["shards"] = time.perf_counter() - t
    rss["shards"] = _maxrss_mib()
    print(
        json.dumps(
            {
                "input_bytes": Path(src).stat().st_size,
                "times": times,
                "maxrss_mib": rss,
                "documents": index["documents"],
                "tokens": index["tokens"],
                "shards": len(index["shards"]),
                "replacements": deid["total_replacements"],
            }
        )
    )


def worker_compare(src: str, work: str, tokenizer: str) -> None:
    import re

    from datasets.pipeline import validate, write_shards
    from datasets.pipeline.common import iter_jsonl
    from datasets.pipeline.parallel import deidentify_parallel, process_pool_map
    from datasets.pipeline.stages import load_tokenizer

    w = Path(work)
    docs = w / "docs.jsonl"
    validate(src, docs, fmt="jsonl")
    size = docs.stat().st_size
    t = time.perf_counter()
    pattern = re.compile(r"1[3-9]\d{9}")
    hits = sum(len(pattern.findall(d["text"])) for d in iter_jsonl(docs))
    regex_s = time.perf_counter() - t
    deid_s = {}
    for workers in (1, 2):
        dst = w / f"deid-{workers}.jsonl"
        t = time.perf_counter()
        deidentify_parallel(docs, dst, chunk_bytes=2 * 1024 * 1024, map_fn=process_pool_map(workers))
        deid_s[workers] = time.perf_counter() - t
    t = time.perf_counter()
    write_shards(w / "deid-1.jsonl", tokenizer, w / "shards")
    shards_s = time.perf_counter() - t
    texts = [d["text"] for d in iter_jsonl(w / "deid-1.jsonl")]
    tok = load_tokenizer(tokenizer)
    t = time.perf_counter()
    for i in range(0, len(texts), 256):
        tok.encode_batch(texts[i : i + 256], add_special_tokens=False)
    raw_s = time.perf_counter() - t
    print(
        json.dumps(
            {
                "bytes": size,
                "regex_s": regex_s,
                "regex_hits": hits,
                "deid_s": deid_s,
                "shards_s": shards_s,
                "encode_batch_s": raw_s,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    env = os.environ.get("PORTAL_CORPORA_DIR")
    default = Path(env) if env else ROOT.parent / "shared" / "corpora"
    parser.add_argument("--corpus", type=Path, default=default / "legal" / "legal_zh_lawrefbook.jsonl")
    parser.add_argument("--times", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    tmp = Path(tempfile.mkdtemp(prefix="dataset-bench-"))
    try:
        print(f"corpus: {args.corpus} ({args.corpus.stat().st_size / MB:.1f} MB); cores: {os.cpu_count()}")
        train = _child(["--worker-train", str(args.corpus), str(tmp), str(args.vocab)])
        print(
            f"tokenizer training (vocab {args.vocab}, {train['trained_bytes'] / MB:.1f} MB of text): "
            f"{train['train_s']:.1f} s, peak RSS {train['maxrss_mib']:.0f} MiB"
        )
        big = tmp / f"corpus-x{args.times}.jsonl"
        with open(big, "wb") as out:
            for _ in range(args.times):
                with open(args.corpus, "rb") as fh:
                    shutil.copyfileobj(fh, out, 4 * 1024 * 1024)
        rows = []
        for label, src in (("1x", args.corpus), (f"{args.times}x", big)):
            work = tmp / f"run-{label}"
            work.mkdir()
            r = _child(["--worker-run", str(src), str(work), str(tmp / "tokenizer.json")])
            shutil.rmtree(work)
            rows.append((label, r))
        big.unlink()

        print()
        head = f"{'input':>6} {'MB':>7} {'docs':>7} {'tokens':>11} {'validate':>9} {'deid':>7} {'tok+shard':>9}"
        print(head + f" {'deid+tok+shard':>15} {'MB/s':>6} {'deid %':>7} {'shard %':>8} {'peak RSS MiB':>13}")
        for label, r in rows:
            t = r["times"]
            core = t["deidentify"] + t["shards"]
            mb = r["input_bytes"] / MB
            print(
                f"{label:>6} {mb:7.1f} {r['documents']:7d} {r['tokens']:11d} {t['validate']:8.1f}s"
                f" {t['deidentify']:6.1f}s {t['shards']:8.1f}s {core:14.1f}s {mb / core:6.2f}"
                f" {100 * t['deidentify'] / core:6.1f}% {100 * t['shards'] / core:7.1f}%"
                f" {r['maxrss_mib']['shards']:13.0f}"
            )
        for label, r in rows:
            t = r["times"]
            total = sum(t.values())
            shares = ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in t.items())
            rss = ", ".join(f"after {k} {v:.0f}" for k, v in r["maxrss_mib"].items())
            print(f"{label}: all three stages {r['input_bytes'] / MB / total:.2f} MB/s; shares: {shares}")
            print(f"{label}: peak RSS MiB {rss}; replacements {r['replacements']}; shards {r['shards']}")
        work = tmp / "compare"
        work.mkdir()
        c = _child(["--worker-compare", str(args.corpus), str(work), str(tmp / "tokenizer.json")])
        mb = c["bytes"] / MB
        d1, d2 = c["deid_s"]["1"], c["deid_s"]["2"]
        print()
        print(
            f"de-identify in chunks ({mb:.1f} MB): 1 worker process {mb / d1:.2f} MB/s, "
            f"2 worker processes {mb / d2:.2f} MB/s (x{d1 / d2:.2f})"
        )
        print(
            f"read + one regex pass: {c['regex_s']:.2f} s ({mb / c['regex_s']:.1f} MB/s); "
            f"de-identify costs x{d1 / c['regex_s']:.1f} that"
        )
        print(
            f"shard stage {c['shards_s']:.2f} s vs raw encode_batch {c['encode_batch_s']:.2f} s "
            f"(x{c['shards_s'] / c['encode_batch_s']:.2f})"
        )
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker-train":
        worker_train(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--worker-compare":
        worker_compare(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--worker-run":
        worker_run(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
