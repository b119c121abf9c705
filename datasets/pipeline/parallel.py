"""The de-identify stage scaled out: the input is cut into chunks at line boundaries, each chunk is
de-identified on its own (a Celery task, a process of a pool, or in-process), and the chunk outputs are
joined in order. The result — file and report — is byte for byte what ``deidentify_file`` writes, and
the stage key is the same, so a serial retry reuses a parallel run and the other way round.

Each chunk writes ``<dst>.chunks/<index>-<start>-<end>.jsonl`` under a temporary name with its report
beside it (``common.save_report``), so a chunk that finished is not redone when the stage is retried
(idempotent per chunk, resumable); the chunk folder is removed once the merged output is in place.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..deid import DEFAULT_OPTIONS, DeidOptions
from .common import PipelineError, atomic_output, finished_report, save_report, stage_key
from .stages import DeidAccumulator, deid_stage_key

DEFAULT_CHUNK_BYTES = 8 * 1024 * 1024
"""Target size of one chunk (bytes of normalised JSONL); a chunk always ends at a line end."""

Chunk = tuple[int, int, int]  # (index, start byte, end byte)
MapFn = Callable[[Callable[..., dict[str, Any]], list[tuple[Any, ...]]], Iterable[dict[str, Any]]]


def options_to_dict(options: DeidOptions) -> dict[str, Any]:
    """JSON-ready form of ``DeidOptions`` (Celery messages are JSON)."""
    return {"style": options.style, "allow": sorted(options.allow), "hash_key": options.hash_key.hex()}


def options_from_dict(data: dict[str, Any]) -> DeidOptions:
    return DeidOptions(style=data["style"], allow=frozenset(data["allow"]), hash_key=bytes.fromhex(data["hash_key"]))


def plan_chunks(src: str | Path, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> list[Chunk]:
    """Byte ranges of ``src`` of about ``chunk_bytes`` each, every one ending at a line end (or EOF)."""
    if chunk_bytes < 1:
        raise ValueError("chunk_bytes must be positive")
    size = Path(src).stat().st_size
    chunks: list[Chunk] = []
    start = 0
    with open(src, "rb") as fh:
        while start < size:
            fh.seek(min(start + chunk_bytes, size))
            if fh.tell() < size:
                fh.seek(fh.tell() - 1)
                fh.readline()  # to the end of the line that holds the cut
            end = fh.tell()
            chunks.append((len(chunks), start, end))
            start = end
    return chunks


def _chunk_dir(dst: Path) -> Path:
    return dst.with_name(dst.name + ".chunks")


def _part(dst: Path, chunk: Chunk) -> Path:
    i, start, end = chunk
    return _chunk_dir(dst) / f"{i:05d}-{start}-{end}.jsonl"


def deidentify_chunk(src: str, dst: str, index: int, start: int, end: int, options: dict[str, Any]) -> dict[str, Any]:
    """De-identify bytes ``[start, end)`` of ``src`` (whole lines) into the chunk file of ``dst``; returns
    the chunk's report. A chunk finished before with the same input and options is reused."""
    src_p, dst_p = Path(src), Path(dst)
    part = _part(dst_p, (index, start, end))
    opts = options_from_dict(options)
    key = stage_key("deidentify-chunk", [src_p], {"range": [start, end], "options": opts.fingerprint()})
    saved = finished_report(part, key)
    if saved is not None:
        return saved
    part.parent.mkdir(parents=True, exist_ok=True)
    acc = DeidAccumulator(opts)
    with open(src_p, "rb") as fh, atomic_output(part) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as out:
        fh.seek(start)
        remaining = end - start
        while remaining > 0:
            raw = fh.readline(remaining)
            if not raw:
                break
            remaining -= len(raw)
            if raw.strip():
                out.write(acc.line(_loads(raw)))
    report = acc.report()
    save_report(part, key, report)
    return report


def _loads(raw: bytes) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(raw)
    return doc


def merge_chunks(
    src: str, dst: str, chunks: list[Chunk], reports: list[dict[str, Any]], options: dict[str, Any]
) -> dict[str, Any]:
    """Join the chunk files of ``dst`` in order into ``dst`` and record the stage report (the serial
    run's key), then remove the chunk folder. Returns the merged report plus ``"reused": False``."""
    src_p, dst_p = Path(src), Path(dst)
    if len(reports) != len(chunks):
        raise PipelineError("deidentify", f"{len(reports)} chunk reports for {len(chunks)} chunks", code="input")
    with atomic_output(dst_p) as tmp, open(tmp, "wb") as out:
        for chunk in chunks:
            with open(_part(dst_p, chunk), "rb") as fh:
                shutil.copyfileobj(fh, out, 1024 * 1024)
    report = DeidAccumulator.merge(reports)
    save_report(dst_p, deid_stage_key(src_p, options_from_dict(options)), report)
    shutil.rmtree(_chunk_dir(dst_p), ignore_errors=True)
    return {**report, "reused": False}


def finished_chunk_reports(
    src: str, dst: str, chunks: list[Chunk], options: dict[str, Any]
) -> list[dict[str, Any]] | None:
    """The reports of every chunk in order when all of them are finished (same input and options), else None."""
    src_p, dst_p = Path(src), Path(dst)
    fingerprint = options_from_dict(options).fingerprint()
    reports = []
    for chunk in chunks:
        key = stage_key("deidentify-chunk", [src_p], {"range": [chunk[1], chunk[2]], "options": fingerprint})
        saved = finished_report(_part(dst_p, chunk), key)
        if saved is None:
            return None
        reports.append(saved)
    return reports


def claim_merge(dst: str | Path) -> bool:
    """Compare-and-set on the file system: True for exactly one caller per fan-out (``O_CREAT | O_EXCL``
    of ``<dst>.chunks/merge.claim``), so one task merges although several may see all chunks finished."""
    claim = _chunk_dir(Path(dst)) / "merge.claim"
    claim.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return False
    return True


def reset_claim(dst: str | Path) -> None:
    """Forget a previous claim (before a new fan-out of an unfinished stage)."""
    (_chunk_dir(Path(dst)) / "merge.claim").unlink(missing_ok=True)


def _serial_map(fn: Callable[..., dict[str, Any]], args: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [fn(*a) for a in args]


def deidentify_parallel(
    src: str | Path,
    dst: str | Path,
    *,
    options: DeidOptions = DEFAULT_OPTIONS,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
    map_fn: MapFn | None = None,
) -> dict[str, Any]:
    """``deidentify_file`` over chunks: ``map_fn(fn, [args, …])`` runs ``deidentify_chunk`` on every chunk
    and returns the reports in order (default: in this process; ``process_pool_map(n)`` for a pool of
    worker processes; ``celery_deidentify`` below for Celery). Same output, report and stage key as the
    serial stage; a finished output is reused (``"reused": True``)."""
    src, dst = Path(src), Path(dst)
    if not src.is_file():
        raise PipelineError("deidentify", f"input {src} not found (run the previous stage first)", code="input")
    saved = finished_report(dst, deid_stage_key(src, options))
    if saved is not None:
        return {**saved, "reused": True}
    chunks = plan_chunks(src, chunk_bytes)
    opts = options_to_dict(options)
    args = [(str(src), str(dst), i, s, e, opts) for i, s, e in chunks]
    reports = list((map_fn or _serial_map)(deidentify_chunk, args))
    return merge_chunks(str(src), str(dst), chunks, reports, opts)


def process_pool_map(workers: int) -> MapFn:
    """A ``map_fn`` running the chunks in ``workers`` processes (``concurrent.futures``, fork where available)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    def run(fn: Callable[..., dict[str, Any]], args: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        ctx = multiprocessing.get_context(method)
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            return list(pool.map(fn, *zip(*args, strict=True)))

    return run


def celery_deidentify(
    src: str | Path, dst: str | Path, *, options: DeidOptions = DEFAULT_OPTIONS, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> Any:
    """Start the chunked stage on Celery: a chord of ``datasets.tasks.deid_chunk`` tasks (one per chunk,
    on the same broker and queue as every other task) whose callback ``datasets.tasks.deid_merge`` joins
    them. Returns the chord's ``AsyncResult`` (its value is the merged report). Chords need a Celery result
    backend; uploads use a group with an on-disk fan-in instead (``datasets.tasks.upload_deid_chunk``)."""
    from celery import chord

    from datasets.tasks import deid_chunk, deid_merge

    chunks = plan_chunks(src, chunk_bytes)
    opts = options_to_dict(options)
    header = [deid_chunk.s(str(src), str(dst), i, s, e, opts) for i, s, e in chunks]
    return chord(header)(deid_merge.s(str(src), str(dst), [list(c) for c in chunks], opts))


__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "celery_deidentify",
    "claim_merge",
    "deidentify_chunk",
    "deidentify_parallel",
    "finished_chunk_reports",
    "merge_chunks",
    "options_from_dict",
    "options_to_dict",
    "plan_chunks",
    "process_pool_map",
    "reset_claim",
]
