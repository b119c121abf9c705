"""Scoring of the de-identifier on a labelled set (``tests/datasets/deid_set/deid_set.jsonl``).

A labelled record is ``{"id", "type", "kind", "lang", "text", "spans": [[type, start, end, value]]}``.
A finding counts as a true positive only with the exact type and span of a label; every other finding
is a false positive of its type and every unmatched label a false negative.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from . import PII_TYPES, find_pii


def load_set(path: str | Path) -> list[dict[str, Any]]:
    """The records of a labelled JSONL file."""
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def score(records: list[dict[str, Any]]) -> tuple[dict[str, tuple[int, int, int]], list[dict[str, Any]]]:
    """``({type: (tp, fp, fn)} for every type of PII_TYPES, errors)``; ``errors`` lists each miss and each
    false positive as ``{"id", "error": "FN" | "FP", "type", "span", "text"}`` (for a person to read)."""
    tp: Counter[str] = Counter()
    fp: Counter[str] = Counter()
    fn: Counter[str] = Counter()
    errors: list[dict[str, Any]] = []
    for r in records:
        want = {(t, s, e) for t, s, e, _ in r["spans"]}
        got = {(f.type, f.start, f.end) for f in find_pii(r["text"])}
        for hit in got & want:
            tp[hit[0]] += 1
        for t, s, e in got - want:
            fp[t] += 1
            errors.append({"id": r["id"], "error": "FP", "type": t, "span": r["text"][s:e], "text": r["text"]})
        for t, s, e in want - got:
            fn[t] += 1
            errors.append({"id": r["id"], "error": "FN", "type": t, "span": r["text"][s:e], "text": r["text"]})
    return {t: (tp[t], fp[t], fn[t]) for t in PII_TYPES}, errors


def table(scores: dict[str, tuple[int, int, int]]) -> str:
    """A printable table: type, TP, FP, FN, recall, precision."""
    lines = [f"{'type':14} {'TP':>4} {'FP':>4} {'FN':>4} {'recall':>7} {'precision':>9}"]
    for t, (tp, fp, fn) in scores.items():
        recall = tp / (tp + fn) if tp + fn else 1.0
        precision = tp / (tp + fp) if tp + fp else 1.0
        lines.append(f"{t:14} {tp:4} {fp:4} {fn:4} {recall:7.3f} {precision:9.3f}")
    return "\n".join(lines)
