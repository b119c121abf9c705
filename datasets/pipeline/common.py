"""Shared pieces of the dataset pipeline: the error type, progress reporting, bounded line reading,
atomic outputs and the "finished stage" record that lets a retried stage reuse its output."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

ProgressFn = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``: called during a stage (at most about once per MiB) and once at
the end with ``done_bytes == total_bytes``."""

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
"""Longest accepted line (bytes, newline included) of an upload; longer lines are refused unread."""
DEFAULT_MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
"""Largest accepted document (bytes of UTF-8 text) — bounds memory for multi-line TXT/CSV documents."""
MAX_REPORTED_ERRORS = 20
"""At most this many per-line errors are listed in an error or a report; the total is always counted."""

_PROGRESS_STEP = 1024 * 1024
_HASH_CHUNK = 1024 * 1024


class PipelineError(Exception):
    """A stage of the dataset pipeline failed for a reason the uploader can act on.

    ``stage``: the stage name (``"validate"``, ``"deidentify"``, ``"deduplicate"``, ``"tokenizer"``,
    ``"shards"``, ``"statistics"``); ``message``: a sentence for the user; ``line``: 1-based line
    number in the input when known. Keyword-only extras: ``code`` — a stable machine-readable reason
    (``"binary"``, ``"encoding"``, ``"empty"``, ``"line_too_long"``, ``"document_too_large"``,
    ``"missing_column"``, ``"structure"``, ``"csv"``, ``"format"``, ``"tokenizer"``, ``"input"``);
    ``byte_offset`` — 0-based offset into the input file; ``errors`` — up to ``MAX_REPORTED_ERRORS``
    per-line errors ``{"line": int, "message": str}``.
    """

    def __init__(
        self,
        stage: str,
        message: str,
        line: int | None = None,
        *,
        code: str = "error",
        byte_offset: int | None = None,
        errors: list[dict[str, Any]] | None = None,
    ) -> None:
        self.stage = stage
        self.message = message
        self.line = line
        self.code = code
        self.byte_offset = byte_offset
        self.errors = errors or []
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.stage}{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for a stored report or an API error body."""
        return {
            "stage": self.stage,
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "byte_offset": self.byte_offset,
            "errors": self.errors,
        }


class Progress:
    """Throttles a ``ProgressFn``: ``advance(n)`` adds bytes, calls back about once per MiB."""

    def __init__(self, callback: ProgressFn | None, total: int) -> None:
        self.callback = callback
        self.total = total
        self.done = 0
        self._last = 0

    def advance(self, nbytes: int) -> None:
        self.done += nbytes
        if self.callback is not None and self.done - self._last >= _PROGRESS_STEP:
            self._last = self.done
            self.callback(min(self.done, self.total), self.total)

    def finish(self) -> None:
        self.done = self.total
        if self.callback is not None:
            self.callback(self.total, self.total)


def iter_raw_lines(
    fh: IO[bytes], *, stage: str, max_line_bytes: int, progress: Progress | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(line_number, byte_offset, raw_line)`` from a binary file, newline included.

    Reads at most ``max_line_bytes + 1`` bytes per call, so a huge line is refused without being held in
    memory. Raises ``PipelineError`` (``code="binary"``) on a NUL byte and (``code="line_too_long"``)
    on a line longer than ``max_line_bytes``.
    """
    number = 0
    offset = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        number += 1
        nul = raw.find(b"\x00")
        if nul >= 0:
            raise PipelineError(
                stage,
                f"binary data: NUL byte at byte offset {offset + nul}; upload a UTF-8 text file",
                number,
                code="binary",
                byte_offset=offset + nul,
            )
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            raise PipelineError(
                stage,
                f"line {number} is longer than the limit of {max_line_bytes} bytes "
                "(one document per line, or split the text)",
                number,
                code="line_too_long",
                byte_offset=offset,
            )
        yield number, offset, raw
        offset += len(raw)
        if progress is not None:
            progress.advance(len(raw))


def decode_line(raw: bytes, *, stage: str, number: int, offset: int) -> str:
    """Decode one raw line as strict UTF-8 (a leading BOM on line 1 is dropped), newline stripped.

    Raises ``PipelineError(code="encoding")`` naming the line and the byte offset of the bad byte.
    """
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
        offset += 3
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start]
        raise PipelineError(
            stage,
            f"invalid UTF-8 at byte offset {offset + exc.start} (byte 0x{bad:02x}); the file must be encoded as UTF-8",
            number,
            code="encoding",
            byte_offset=offset + exc.start,
        ) from None
    return text.rstrip("\r\n")


def iter_jsonl(path: Path, progress: Progress | None = None) -> Iterator[dict[str, Any]]:
    """Documents of a JSONL file the pipeline itself wrote (trusted: one JSON object per line)."""
    with open(path, "rb") as fh:
        for raw in fh:
            if progress is not None:
                progress.advance(len(raw))
            if raw.strip():
                yield json.loads(raw)


def dumps_line(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False) + "\n"


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _partial_name(dst: Path) -> Path:
    return dst.with_name(f".{dst.name}.{uuid.uuid4().hex[:12]}.partial")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_output(dst: Path) -> Iterator[Path]:
    """Yield a fresh temporary path beside ``dst`` (file or folder); on success move it to ``dst``.

    On any exception the temporary path is removed and ``dst`` is left as it was, so a failed or killed
    stage never leaves half-made output under the final name. An existing folder at ``dst`` is replaced.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = _partial_name(dst)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if tmp.is_dir() and dst.exists():
        old = _partial_name(dst)
        os.replace(dst, old)
        os.replace(tmp, dst)
        _remove(old)
    else:
        os.replace(tmp, dst)


def report_path(dst: Path) -> Path:
    """Where a stage records its finished report: ``<dst>.report.json`` beside the output."""
    return dst.with_name(dst.name + ".report.json")


def stage_key(stage: str, inputs: list[Path], params: dict[str, Any]) -> dict[str, Any]:
    """Identity of one stage run: stage name, parameters, and (name, size, mtime) of each input."""
    fingerprints = []
    for p in inputs:
        st = p.stat()
        fingerprints.append([p.name, st.st_size, st.st_mtime_ns])
    return {"stage": stage, "params": params, "inputs": fingerprints}


def finished_report(dst: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The saved report when ``dst`` exists and was made from the same inputs and parameters, else None."""
    rp = report_path(dst)
    if not dst.exists() or not rp.exists():
        return None
    try:
        saved = json.loads(rp.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if saved.get("key") != json.loads(json.dumps(key)):
        return None
    report: dict[str, Any] = saved["report"]
    return report


def save_report(dst: Path, key: dict[str, Any], report: dict[str, Any]) -> None:
    """Record a finished stage (atomically, after its output is in place)."""
    rp = report_path(dst)
    tmp = _partial_name(rp)
    tmp.write_text(
        json.dumps({"key": key, "report": report}, ensure_ascii=False, indent=1),
        encoding="utf-8",
    )
    os.replace(tmp, rp)
