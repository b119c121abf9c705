"""Token shard format shared by the dataset pipeline (writer) and the training runtime (reader).

A shard set is one folder::

    index.json          {"format": "gpu-portal-shards/1", "dtype": "uint16" | "uint32",
                         "vocab_size": int, "eos_id": int, "documents": int, "tokens": int,
                         "tokenizer": "tokenizer.json" | null,
                         "shards": [{"file": "shard-00000.bin", "tokens": int, "sha256": hex}, ...]}
    shard-00000.bin     flat little-endian token ids, documents separated by ``eos_id``
    shard-00001.bin     ...

Each shard is a plain array of ``dtype`` with no header, so the runtime can ``numpy.memmap`` it.
``dtype`` is ``uint16`` when ``vocab_size <= 65536`` and ``uint32`` otherwise.

This module imports only the standard library and numpy: it is used from ``instances.runtime``
(which never imports Django) and from the ``datasets`` pipeline.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "gpu-portal-shards/1"
INDEX_NAME = "index.json"
DEFAULT_SHARD_TOKENS = 16 * 1024 * 1024  # 16 Mi tokens = 32 MiB per uint16 shard


class ShardFormatError(ValueError):
    """Raised when a shard folder is missing, malformed or does not match its index."""


def dtype_for_vocab(vocab_size: int) -> str:
    """Smallest unsigned dtype name that holds token ids ``0 … vocab_size - 1``."""
    if vocab_size <= 0:
        raise ShardFormatError(f"vocab_size must be positive, got {vocab_size}")
    return "uint16" if vocab_size <= 65536 else "uint32"


@dataclass
class ShardWriter:
    """Streams documents (lists of token ids) into fixed-size shard files.

    Usage::

        with ShardWriter(out_dir, vocab_size=8000, eos_id=0) as w:
            for ids in documents:
                w.add_document(ids)
        index = w.index   # the dict written to index.json

    Memory stays at one shard buffer (``shard_tokens`` ids) whatever the corpus size.
    ``out_dir`` must not already hold an ``index.json`` (raises ``ShardFormatError``): a shard set
    is immutable once written; ``index.json`` is written last, so a folder without it is incomplete.
    """

    out_dir: Path
    vocab_size: int
    eos_id: int
    shard_tokens: int = DEFAULT_SHARD_TOKENS
    tokenizer_file: str | None = None
    index: dict[str, Any] = field(default_factory=dict, init=False)
    # One shard's worth of ids in the shard dtype (2 or 4 bytes each; a list of Python ints took ~36).
    _buf: np.ndarray | None = field(default=None, init=False, repr=False)
    _fill: int = field(default=0, init=False, repr=False)
    _shards: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _documents: int = field(default=0, init=False, repr=False)
    _tokens: int = field(default=0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.out_dir = Path(self.out_dir)
        if (self.out_dir / INDEX_NAME).exists():
            raise ShardFormatError(f"{self.out_dir} already holds a shard set")
        if not 0 <= self.eos_id < self.vocab_size:
            raise ShardFormatError(f"eos_id {self.eos_id} outside vocabulary of {self.vocab_size}")
        if self.shard_tokens <= 0:
            raise ShardFormatError("shard_tokens must be positive")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._dtype = np.dtype(dtype_for_vocab(self.vocab_size)).newbyteorder("<")

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()

    def add_document(self, ids: Iterable[int]) -> None:
        """Append one document's token ids followed by ``eos_id``.

        Raises ``ShardFormatError`` for an id outside ``0 … vocab_size - 1``.
        """
        arr = np.asarray(ids if isinstance(ids, list | np.ndarray) else list(ids), dtype=np.int64)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.vocab_size):
            raise ShardFormatError(f"token id outside vocabulary of {self.vocab_size}")
        self._append(arr)
        self._append(np.array([self.eos_id], dtype=np.int64))
        self._documents += 1

    def _append(self, arr: np.ndarray) -> None:
        if self._buf is None:
            self._buf = np.empty(self.shard_tokens, dtype=self._dtype)
        pos = 0
        while pos < arr.size:
            take = min(arr.size - pos, self.shard_tokens - self._fill)
            self._buf[self._fill : self._fill + take] = arr[pos : pos + take]
            self._fill += take
            pos += take
            if self._fill == self.shard_tokens:
                self._flush(self._buf)
                self._fill = 0

    def _flush(self, ids: np.ndarray) -> None:
        name = f"shard-{len(self._shards):05d}.bin"
        data = ids.astype(self._dtype, copy=False).tobytes()
        path = self.out_dir / name
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        self._shards.append({"file": name, "tokens": int(ids.size), "sha256": hashlib.sha256(data).hexdigest()})
        self._tokens += int(ids.size)

    def close(self) -> dict[str, Any]:
        """Flush the last partial shard and write ``index.json`` (atomically, last). Returns the index."""
        if self.index:
            return self.index
        if self._buf is not None and self._fill:
            self._flush(self._buf[: self._fill])
        self._buf, self._fill = None, 0
        self.index = {
            "format": FORMAT,
            "dtype": self._dtype.name,
            "vocab_size": self.vocab_size,
            "eos_id": self.eos_id,
            "documents": self._documents,
            "tokens": self._tokens,
            "tokenizer": self.tokenizer_file,
            "shards": self._shards,
        }
        tmp = self.out_dir / (INDEX_NAME + ".tmp")
        tmp.write_text(json.dumps(self.index, indent=2))
        os.replace(tmp, self.out_dir / INDEX_NAME)
        return self.index


class ShardSet:
    """Read-only view of a shard folder: ``len(s)`` tokens, ``s.tokens(start, n)`` -> int64 array.

    The shards are memory-mapped and addressed as one concatenated stream of token ids.
    Raises ``ShardFormatError`` when ``index.json`` is missing or malformed, or a shard's size does
    not match the index. ``verify=True`` also checks every shard's SHA-256 (reads all data once).
    """

    def __init__(self, folder: str | os.PathLike[str], *, verify: bool = False) -> None:
        self.folder = Path(folder)
        index_path = self.folder / INDEX_NAME
        try:
            self.index: dict[str, Any] = json.loads(index_path.read_text())
        except FileNotFoundError as exc:
            raise ShardFormatError(f"{index_path} not found: not a complete shard set") from exc
        except json.JSONDecodeError as exc:
            raise ShardFormatError(f"{index_path} is not valid JSON: {exc}") from exc
        if self.index.get("format") != FORMAT:
            raise ShardFormatError(f"{index_path}: unknown format {self.index.get('format')!r}")
        self.dtype = np.dtype(self.index["dtype"]).newbyteorder("<")
        self.vocab_size = int(self.index["vocab_size"])
        self.eos_id = int(self.index["eos_id"])
        self._maps: list[np.ndarray] = []
        self._offsets: list[int] = [0]
        for shard in self.index["shards"]:
            path = self.folder / shard["file"]
            if not path.exists():
                raise ShardFormatError(f"shard {path} listed in the index is missing")
            size = path.stat().st_size
            if size != shard["tokens"] * self.dtype.itemsize:
                raise ShardFormatError(f"shard {path} has {size} bytes, index says {shard['tokens']} tokens")
            if verify and hashlib.sha256(path.read_bytes()).hexdigest() != shard["sha256"]:
                raise ShardFormatError(f"shard {path} fails its SHA-256 check")
            self._maps.append(np.memmap(path, dtype=self.dtype, mode="r"))
            self._offsets.append(self._offsets[-1] + int(shard["tokens"]))

    def __len__(self) -> int:
        return self._offsets[-1]

    def tokens(self, start: int, count: int) -> np.ndarray:
        """Return ``count`` token ids starting at global position ``start`` as an int64 array.

        Raises ``IndexError`` when the range leaves the shard set.
        """
        if start < 0 or count < 0 or start + count > len(self):
            raise IndexError(f"tokens [{start}, {start + count}) outside 0..{len(self)}")
        out = np.empty(count, dtype=np.int64)
        pos, filled = start, 0
        import bisect

        i = bisect.bisect_right(self._offsets, pos) - 1
        while filled < count:
            local = pos - self._offsets[i]
            take = min(count - filled, self._offsets[i + 1] - pos)
            out[filled : filled + take] = self._maps[i][local : local + take]
            filled += take
            pos += take
            i += 1
        return out
