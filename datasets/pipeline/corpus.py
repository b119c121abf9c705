"""Reading the licensed corpora folder (``shared/corpora`` beside the checkout).

Layout: ``<folder>/<domain>/*.jsonl`` with one JSON object per line holding at least ``id``, ``title``,
``text`` and ``source`` (see ``SOURCES.md`` in the folder). Document counts at the time of writing:
legal/legal_zh_lawrefbook.jsonl 1,589; finance/finance_zh_lawrefbook.jsonl 242;
medical/medical_zh_lawrefbook.jsonl 153; medical/medical_en_medquad.jsonl 5,486.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .common import DEFAULT_MAX_LINE_BYTES, PipelineError, decode_line, iter_raw_lines

DOMAINS = ("legal", "finance", "medical")
REQUIRED_FIELDS = ("id", "title", "text", "source")
CORPORA_ENV = "PORTAL_CORPORA_DIR"


def default_corpora_dir(project_root: str | Path) -> Path:
    """``$PORTAL_CORPORA_DIR`` when set, else ``<project_root>/../shared/corpora``."""
    env = os.environ.get(CORPORA_ENV)
    return Path(env) if env else Path(project_root).resolve().parent / "shared" / "corpora"


def corpus_files(folder: str | Path) -> list[tuple[str, Path]]:
    """``(domain, path)`` of every ``<folder>/<domain>/*.jsonl`` for the known ``DOMAINS``, sorted by
    domain order then file name. Missing domain folders are skipped; a missing ``folder`` gives []."""
    folder = Path(folder)
    found: list[tuple[str, Path]] = []
    for domain in DOMAINS:
        d = folder / domain
        if d.is_dir():
            found.extend((domain, p) for p in sorted(d.glob("*.jsonl")) if p.is_file())
    return found


def read_corpus_file(path: str | Path, *, domain: str = "") -> Iterator[dict[str, Any]]:
    """Documents of one corpus JSONL file, streamed: ``{"id", "title", "text", "source", "domain",
    "file", "line", ...extra fields}``. Blank lines are skipped.

    Raises ``PipelineError`` (stage ``"import"``) with the line number for invalid UTF-8 or JSON, a
    line that is not an object, or a missing / non-string required field.
    """
    path = Path(path)
    with open(path, "rb") as fh:
        for number, offset, raw in iter_raw_lines(fh, stage="import", max_line_bytes=DEFAULT_MAX_LINE_BYTES):
            line = decode_line(raw, stage="import", number=number, offset=offset)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PipelineError(
                    "import",
                    f"{path.name}: invalid JSON: {exc.msg}",
                    number,
                    code="structure",
                ) from None
            if not isinstance(obj, dict):
                raise PipelineError(
                    "import",
                    f"{path.name}: expected a JSON object",
                    number,
                    code="structure",
                )
            for name in REQUIRED_FIELDS:
                if not isinstance(obj.get(name), str):
                    raise PipelineError(
                        "import",
                        f"{path.name}: missing string field {name!r}",
                        number,
                        code="structure",
                    )
            yield {**obj, "domain": domain, "file": path.name, "line": number}


def read_corpus_folder(folder: str | Path) -> Iterator[dict[str, Any]]:
    """All documents of all corpus files under ``folder`` (``corpus_files`` order), streamed."""
    for domain, path in corpus_files(folder):
        yield from read_corpus_file(path, domain=domain)


def count_documents(path: str | Path) -> int:
    """Number of documents (non-blank lines) in one corpus file, validated as ``read_corpus_file`` does."""
    return sum(1 for _ in read_corpus_file(path))
