"""Where a test pass's time goes, from pytest's JUnit XML (``--junitxml``): the slowest tests and the time per
test folder, as Markdown tables; with ``--write-weights`` also the per-test weights ``tests/conftest.py`` orders
the suite by (longest first, so the parallel workers finish together).

    .venv/bin/python .ci/timings.py var/ci/sqlite.xml [more.xml …] [--top 50] [--write-weights tests/weights.json]

A test's time is its setup + call + teardown as pytest recorded it (JUnit's ``time`` attribute); with xdist the
folder sums are CPU-side sums over both workers, not wall time.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET  # our own pytest's output, not untrusted input
from collections import defaultdict
from pathlib import Path


def read(paths: list[Path]) -> list[tuple[str, float, str]]:
    """``(test id, seconds, outcome)`` for every test case in the files (outcome: passed/failed/skipped/error)."""
    rows = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):  # noqa: S314
            file = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
            outcome = "passed"
            for child in case:
                if child.tag in {"failure", "error", "skipped"}:
                    outcome = {"failure": "failed"}.get(child.tag, child.tag)
            rows.append((f"{file}::{case.get('name')}", float(case.get("time") or 0), outcome))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("xml", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=50)
    parser.add_argument("--write-weights", type=Path, help="write {test id: seconds} (tests over 2 s) for the order")
    args = parser.parse_args()
    rows = read(args.xml)
    total = sum(seconds for _, seconds, _ in rows)
    print(f"{len(rows)} tests, {total:.0f} s of test time\n")
    print("| # | seconds | test |\n|---|---|---|")
    for rank, (test, seconds, outcome) in enumerate(sorted(rows, key=lambda r: -r[1])[: args.top], 1):
        print(f"| {rank} | {seconds:.1f} | `{test}`{'' if outcome == 'passed' else f' ({outcome})'} |")
    folders: dict[str, list[float]] = defaultdict(list)
    for test, seconds, _ in rows:
        folders[str(Path(test.split("::", 1)[0]).parent)].append(seconds)
    print("\n| folder | tests | seconds | share |\n|---|---|---|---|")
    for folder, times in sorted(folders.items(), key=lambda kv: -sum(kv[1])):
        print(f"| `{folder}` | {len(times)} | {sum(times):.0f} | {sum(times) / total:.0%} |")
    if args.write_weights:
        weights = {test: round(seconds, 1) for test, seconds, _ in sorted(rows) if seconds >= 2.0}
        args.write_weights.write_text(json.dumps(weights, indent=1, sort_keys=True) + "\n")
        print(f"\nwrote {len(weights)} test weights to {args.write_weights}")


if __name__ == "__main__":
    main()
