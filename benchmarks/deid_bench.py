"""Benchmark: de-identification quality and speed (prints figures; asserts nothing).

    .venv/bin/python benchmarks/deid_bench.py [--corpora DIR] [--limit-mb 5] [--show 8] [--type PHONE] [--errors]

1. Recall / precision per type on the frozen test part of the held-out set
   (``tests/datasets/deid_heldout/test.jsonl``: document shapes filled by Faker and hand-written records,
   frozen before tuning), beside its dev part and the author-written set
   (``tests/datasets/deid_set/deid_set.jsonl``), with every miss and false positive listed (``--errors``).
2. For each corpus file of ``../shared/corpora`` (or ``$PORTAL_CORPORA_DIR``; read-only): replacements by
   type and by rule, and throughput (MB/s of UTF-8 text through ``find_pii``) over at most ``--limit-mb``
   MB of text per file (0 = all). ``--show N`` prints up to N found spans per type with 20 characters
   of context (the value in 【】) so a person can judge them — the corpora are public-domain texts.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MB = 1_000_000


LABELLED_SETS = (
    ("held-out test part (frozen)", ROOT / "tests" / "datasets" / "deid_heldout" / "test.jsonl"),
    ("held-out dev part", ROOT / "tests" / "datasets" / "deid_heldout" / "dev.jsonl"),
    ("author-written set", ROOT / "tests" / "datasets" / "deid_set" / "deid_set.jsonl"),
)


def labelled_set(show_errors: bool) -> None:
    from datasets.deid import find_pii
    from datasets.deid.evaluate import load_set, score, table

    t0 = time.perf_counter()
    find_pii("车主华桂珍的电话")  # the tagger's dictionary loads once per process
    print(f"tagger loaded in {time.perf_counter() - t0:.2f} s")
    for label, path in LABELLED_SETS:
        records = load_set(path)
        t0 = time.perf_counter()
        scores, errors = score(records)
        took = time.perf_counter() - t0
        print(f"\n{label}: {len(records)} records, {took:.2f} s")
        print(table(scores))
        for e in errors if show_errors else []:
            print(f"  {e['error']} {e['type']:12} {e['span']!r} in {e['text']!r}")


def corpus(path: Path, limit_mb: float, show: int, only: str | None) -> None:
    from datasets.deid import find_pii

    counts: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    shown: dict[str, list[str]] = defaultdict(list)
    size = docs = 0
    took = 0.0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = f"{doc.get('title') or ''}\n{doc['text']}"
            size += len(text.encode("utf-8"))
            docs += 1
            t0 = time.perf_counter()
            found = find_pii(text)
            took += time.perf_counter() - t0
            for f in found:
                counts[f.type] += 1
                rules[f.rule] += 1
                if len(shown[f.type]) < show and (only is None or only == f.type):
                    ctx = text[max(0, f.start - 20) : f.start] + "【" + f.value + "】" + text[f.end : f.end + 20]
                    shown[f.type].append(" ".join(ctx.split()))
            if limit_mb and size >= limit_mb * MB:
                break
    print(
        f"\n{path.name}: {docs} documents, {size / MB:.1f} MB, {size / MB / took:.2f} MB/s, "
        f"{sum(counts.values())} replacements"
    )
    print("  by type: " + ", ".join(f"{t} {n}" for t, n in counts.most_common()) if counts else "  by type: none")
    if rules:
        print("  by rule: " + ", ".join(f"{r} {n}" for r, n in rules.most_common()))
    for t, items in shown.items():
        for item in items:
            print(f"    {t:12} {item}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = os.environ.get("PORTAL_CORPORA_DIR") or str(ROOT.parent / "shared" / "corpora")
    parser.add_argument("--corpora", default=default)
    parser.add_argument("--limit-mb", type=float, default=5.0, help="MB of text per corpus file (0 = all)")
    parser.add_argument("--show", type=int, default=8, help="spans shown per type and file")
    parser.add_argument("--type", default=None, help="show spans of this type only")
    parser.add_argument("--errors", action="store_true", help="list every miss and false positive of the sets")
    args = parser.parse_args()
    labelled_set(args.errors)
    for path in sorted(Path(args.corpora).glob("*/*.jsonl")):
        corpus(path, args.limit_mb, args.show, args.type)


if __name__ == "__main__":
    main()
