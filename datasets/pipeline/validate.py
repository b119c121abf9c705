"""Stage 1: validate an upload (JSONL, TXT or CSV) and normalise it to the pipeline's JSONL.

Accepted formats (all UTF-8; a UTF-8 BOM is ignored):

* ``jsonl`` — one JSON object per line with a string field ``text``; optional ``id`` (string or integer)
  and ``title`` (string). Blank lines are skipped.
* ``txt`` — ``txt_mode="paragraphs"`` (default): documents are separated by one or more blank lines, the
  lines of a document are joined with ``\\n``; ``txt_mode="lines"``: every non-blank line is a document.
* ``csv`` — RFC 4180 CSV with a header row; ``text_column`` names the column holding the text; columns
  named ``id`` and ``title`` are used when present. Quoted fields may span lines.

Output: one JSON object per line, ``{"id": str, "title": str, "text": str}``; documents whose text is
empty or only whitespace are dropped and counted.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from .common import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DEFAULT_MAX_LINE_BYTES,
    MAX_REPORTED_ERRORS,
    PipelineError,
    Progress,
    ProgressFn,
    atomic_output,
    decode_line,
    dumps_line,
    finished_report,
    iter_raw_lines,
    save_report,
    stage_key,
)

STAGE = "validate"
FORMATS = ("jsonl", "txt", "csv")
Format = Literal["jsonl", "txt", "csv"]


class _BadLines:
    """Collects per-line structure errors: counts all, keeps the first ``MAX_REPORTED_ERRORS``."""

    def __init__(self) -> None:
        self.count = 0
        self.listed: list[dict[str, Any]] = []

    def add(self, line: int, message: str) -> None:
        self.count += 1
        if len(self.listed) < MAX_REPORTED_ERRORS:
            self.listed.append({"line": line, "message": message})


_SNIFF_BYTES = 64 * 1024
_MAGIC = {
    b"%PDF-": "a PDF document",
    b"PK\x03\x04": "a ZIP archive (or a .docx/.xlsx file)",
    b"\x1f\x8b": "a gzip archive",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"\xd0\xcf\x11\xe0": "an old Microsoft Office document",
}


def _sniff(head: bytes) -> None:
    """Refuse well-known binary formats, UTF-16 and NUL bytes in the first 64 KiB before reading lines."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise PipelineError(
            STAGE,
            "the file is UTF-16 encoded; save it as UTF-8",
            1,
            code="encoding",
            byte_offset=0,
        )
    for magic, what in _MAGIC.items():
        if head.startswith(magic):
            raise PipelineError(
                STAGE,
                f"this is {what}, not a text file; upload UTF-8 text",
                1,
                code="binary",
                byte_offset=0,
            )
    nul = head.find(b"\x00")
    if nul >= 0:
        line = head.count(b"\n", 0, nul) + 1
        raise PipelineError(
            STAGE,
            f"binary data: NUL byte at byte offset {nul}; upload a UTF-8 text file",
            line,
            code="binary",
            byte_offset=nul,
        )


def _decoded_lines(
    path: Path, max_line_bytes: int, progress: Progress, keep_newline: bool = False
) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as fh:
        _sniff(fh.read(_SNIFF_BYTES))
        fh.seek(0)
        for number, offset, raw in iter_raw_lines(fh, stage=STAGE, max_line_bytes=max_line_bytes, progress=progress):
            text = decode_line(raw, stage=STAGE, number=number, offset=offset)
            if keep_newline and raw.endswith(b"\n"):
                text += "\n"
            yield number, text


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _jsonl_docs(
    path: Path, max_line_bytes: int, progress: Progress, bad: _BadLines
) -> Iterator[tuple[int, str | None, str, str]]:
    for number, line in _decoded_lines(path, max_line_bytes, progress):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.add(number, f"invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        if not isinstance(obj, dict):
            bad.add(number, f"expected a JSON object, got {type(obj).__name__}")
            continue
        text = obj.get("text")
        if not isinstance(text, str):
            bad.add(
                number,
                'missing string field "text"' if text is None else '"text" is not a string',
            )
            continue
        doc_id = obj.get("id")
        if doc_id is not None and not isinstance(doc_id, str | int):
            bad.add(number, '"id" must be a string or an integer')
            continue
        title = obj.get("title")
        if title is not None and not isinstance(title, str):
            bad.add(number, '"title" must be a string')
            continue
        lone = next((m for v in (text, title, doc_id) if isinstance(v, str) and (m := _LONE_SURROGATE.search(v))), None)
        if lone is not None:
            # JSON can escape half of a UTF-16 pair ("\udc80"): no character, and no UTF-8 can hold it.
            bad.add(number, f"a \\u{ord(lone.group()):04x} escape without its pair: not valid Unicode")
            continue
        yield number, None if doc_id is None else str(doc_id), title or "", text


def _txt_docs(
    path: Path,
    max_line_bytes: int,
    max_document_bytes: int,
    progress: Progress,
    mode: str,
) -> Iterator[tuple[int, str | None, str, str]]:
    lines: list[str] = []
    size = 0
    first = 0
    for number, line in _decoded_lines(path, max_line_bytes, progress):
        if mode == "lines":
            if line.strip():
                yield number, None, "", line
            continue
        if not line.strip():
            if lines:
                yield first, None, "", "\n".join(lines)
                lines, size = [], 0
            continue
        if not lines:
            first = number
        size += len(line.encode("utf-8")) + 1
        if size > max_document_bytes:
            raise PipelineError(
                STAGE,
                f"the document starting at line {first} is larger than {max_document_bytes} bytes; "
                "separate documents with blank lines",
                number,
                code="document_too_large",
            )
        lines.append(line)
    if lines:
        yield first, None, "", "\n".join(lines)


def _csv_docs(
    path: Path,
    max_line_bytes: int,
    max_document_bytes: int,
    progress: Progress,
    text_column: str | None,
    bad: _BadLines,
) -> Iterator[tuple[int, str | None, str, str]]:
    if not text_column:
        raise PipelineError(STAGE, "CSV uploads need the name of the text column", code="missing_column")
    # The csv module's per-field limit is process-wide; raise it to the document limit (never lower it).
    if csv.field_size_limit() < max_document_bytes:
        csv.field_size_limit(max_document_bytes)
    numbered = _decoded_lines(path, max_line_bytes, progress, keep_newline=True)
    current = [0]

    def lines() -> Iterator[str]:
        for number, text in numbered:
            current[0] = number
            yield text

    reader = csv.reader(lines())
    try:
        header = next(reader, None)
        if header is None:
            return
        header = [h.strip() for h in header]
        if text_column not in header:
            available = ", ".join(repr(h) for h in header) or "none"
            raise PipelineError(
                STAGE,
                f"column {text_column!r} is not in the CSV header; available columns: {available}",
                1,
                code="missing_column",
            )
        ti = header.index(text_column)
        ii = header.index("id") if "id" in header else None
        hi = header.index("title") if "title" in header else None
        for row in reader:
            number = current[0]
            if not row:
                continue
            if len(row) != len(header):
                bad.add(number, f"expected {len(header)} fields, found {len(row)}")
                continue
            yield (
                number,
                row[ii] if ii is not None else None,
                row[hi] if hi is not None else "",
                row[ti],
            )
    except csv.Error as exc:
        too_large = "field larger than field limit" in str(exc)
        raise PipelineError(
            STAGE,
            f"a CSV field is larger than {max_document_bytes} bytes" if too_large else f"malformed CSV: {exc}",
            current[0],
            code="document_too_large" if too_large else "csv",
        ) from None


def validate(
    src: str | Path,
    dst: str | Path,
    *,
    fmt: Format,
    text_column: str | None = None,
    txt_mode: Literal["paragraphs", "lines"] = "paragraphs",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
    max_bad_lines: int = 0,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Check an upload and write its documents to ``dst`` as normalised JSONL (see the module docstring).

    Streams: memory holds one line (at most ``max_line_bytes``) or one TXT/CSV document. Lines with a
    structure error (bad JSON, no ``text``, wrong CSV field count) are skipped and listed (the first
    ``MAX_REPORTED_ERRORS``, with line numbers); if there are more than ``max_bad_lines`` of them the
    stage fails after reading the whole file, so the user sees every listed error at once.

    Returns the report ``{"format", "input_bytes", "input_sha256", "lines", "documents",
    "empty_documents", "bad_lines", "errors", "reused"}``. A second call with the same input and
    parameters returns the saved report (``"reused": True``) without reading the input again.

    Raises ``PipelineError`` (stage ``"validate"``) with ``code``: ``"binary"`` (NUL byte),
    ``"encoding"`` (invalid UTF-8 / UTF-16; line and byte offset), ``"empty"`` (no bytes or no
    document), ``"line_too_long"``, ``"document_too_large"``, ``"missing_column"`` (CSV; names the
    available columns), ``"csv"`` (malformed CSV), ``"structure"`` (too many bad lines) or ``"format"``.
    On any error nothing is left at ``dst``.
    """
    src, dst = Path(src), Path(dst)
    if fmt not in FORMATS:
        raise PipelineError(
            STAGE,
            f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}",
            code="format",
        )
    if not src.is_file():
        raise PipelineError(STAGE, f"input file {src} not found", code="input")
    params = {
        "fmt": fmt,
        "text_column": text_column,
        "txt_mode": txt_mode,
        "max_line_bytes": max_line_bytes,
        "max_document_bytes": max_document_bytes,
        "max_bad_lines": max_bad_lines,
    }
    key = stage_key(STAGE, [src], params)
    total = src.stat().st_size
    saved = finished_report(dst, key)
    if saved is not None:
        if progress is not None:
            progress(total, total)
        return {**saved, "reused": True}
    if total == 0:
        raise PipelineError(STAGE, "the file is empty", code="empty")

    tracker = Progress(progress, total)
    bad = _BadLines()
    documents = empty = 0
    with (
        atomic_output(dst) as tmp,
        open(tmp, "w", encoding="utf-8", newline="\n") as out,
    ):
        docs: Iterator[tuple[int, str | None, str, str]]
        if fmt == "jsonl":
            docs = _jsonl_docs(src, max_line_bytes, tracker, bad)
        elif fmt == "txt":
            docs = _txt_docs(src, max_line_bytes, max_document_bytes, tracker, txt_mode)
        else:
            docs = _csv_docs(src, max_line_bytes, max_document_bytes, tracker, text_column, bad)
        for number, doc_id, title, text in docs:
            if not text.strip():
                empty += 1
                continue
            if len(text) * 4 > max_document_bytes and len(text.encode("utf-8")) > max_document_bytes:
                raise PipelineError(
                    STAGE,
                    f"document at line {number} is larger than {max_document_bytes} bytes",
                    number,
                    code="document_too_large",
                )
            documents += 1
            out.write(dumps_line({"id": doc_id or str(documents), "title": title, "text": text}))
        if bad.count > max_bad_lines:
            raise PipelineError(
                STAGE,
                f"{bad.count} line(s) could not be read"
                + (f" (at most {max_bad_lines} allowed)" if max_bad_lines else "")
                + "; first: "
                + "; ".join(f"line {e['line']}: {e['message']}" for e in bad.listed[:3]),
                bad.listed[0]["line"],
                code="structure",
                errors=bad.listed,
            )
        if documents == 0:
            raise PipelineError(
                STAGE,
                "no documents found" + (f" ({empty} empty document(s) skipped)" if empty else ""),
                code="empty",
            )
    tracker.finish()
    sha256, lines = _sha256_and_lines(src)
    report = {
        "format": fmt,
        "input_bytes": total,
        "input_sha256": sha256,
        "lines": lines,
        "documents": documents,
        "empty_documents": empty,
        "bad_lines": bad.count,
        "errors": bad.listed,
    }
    save_report(dst, key, report)
    return {**report, "reused": False}


def _sha256_and_lines(path: Path) -> tuple[str, int]:
    """Hex SHA-256 of the file and its number of lines (a last line without newline counts)."""
    h = hashlib.sha256()
    n = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1024 * 1024):
            h.update(chunk)
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return h.hexdigest(), n + (0 if last == b"\n" else 1)
