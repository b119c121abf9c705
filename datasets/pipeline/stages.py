"""Stages 2–6 of the dataset pipeline, each reading the previous stage's normalised JSONL.

Every stage streams (memory independent of corpus size, except where stated), writes its output under a
temporary name and moves it into place on success, and records a report beside the output so that a
retry with the same inputs and parameters returns at once (``"reused": True``).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..deid import DEFAULT_OPTIONS, PII_TYPES, DeidOptions, deidentify_with_findings
from .common import (
    PipelineError,
    Progress,
    ProgressFn,
    atomic_output,
    dumps_line,
    file_sha256,
    finished_report,
    iter_jsonl,
    save_report,
    stage_key,
)

EOS_TOKEN = "<|endoftext|>"  # noqa: S105 - a token name, not a secret
"""The only special token; id 0; written after every document in the shards."""
TOKENIZER_FILE = "tokenizer.json"
DEFAULT_VOCAB_SIZE = 8000
DEFAULT_MAX_TRAINING_BYTES = 256 * 1024 * 1024
"""Tokenizer training reads at most this many bytes of text (the first documents): BPE training memory
grows with the number of distinct pre-tokens, so a cap keeps it bounded for very large uploads."""
HAN_CHUNK = 3
"""Runs of Han characters are cut into pieces of at most this many characters before byte-level BPE.

Chinese has no spaces, so GPT-2's pre-tokenizer sees whole clauses as one "word"; on the legal corpus
(26.7 MB) that made training take 44 s and 1.7 GB, against 9 s and 0.47 GB with 3-character pieces, for
30 % more tokens (5.67 M vs 4.36 M at 8 000 vocabulary). Measured on 2 cores; see the benchmark."""


def _cached(
    stage: str,
    dst: Path,
    inputs: list[Path],
    params: dict[str, Any],
    progress: ProgressFn | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    key = stage_key(stage, inputs, params)
    saved = finished_report(dst, key)
    if saved is not None and progress is not None:
        total = sum(p.stat().st_size for p in inputs if p.is_file())
        progress(total, total)
    return key, saved


def _need_file(stage: str, path: Path) -> None:
    if not path.is_file():
        raise PipelineError(
            stage,
            f"input {path} not found (run the previous stage first)",
            code="input",
        )


DEID_SAMPLES_PER_TYPE = 5
"""Replaced contexts kept per type in the de-identification report (the first ones met)."""
DEID_SAMPLE_CONTEXT = 24
"""Characters of de-identified text kept on each side of a sampled placeholder."""


def _sample(new_text: str, at: int, placeholder: str) -> str:
    """The de-identified text around a placeholder (which starts at ``at`` in ``new_text``): it shows the
    placeholder and already de-identified neighbours, never an identifier's value."""
    lo = max(0, at - DEID_SAMPLE_CONTEXT)
    hi = min(len(new_text), at + len(placeholder) + DEID_SAMPLE_CONTEXT)
    return " ".join(new_text[lo:hi].split())


class DeidAccumulator:
    """De-identifies documents one by one and accumulates the stage report; ``merge`` joins the reports
    of consecutive chunks into exactly the report one pass over all of them gives (sums, and the first
    ``DEID_SAMPLES_PER_TYPE`` samples per type in document order)."""

    def __init__(self, options: DeidOptions) -> None:
        self.options = options
        self.counts: Counter[str] = Counter()
        self.notes: Counter[str] = Counter()
        self.rules: Counter[str] = Counter()
        self.samples: dict[str, list[dict[str, Any]]] = {}
        self.documents = self.changed = self.allowed = 0

    def line(self, doc: dict[str, Any]) -> str:
        """The de-identified JSONL line of one normalised document."""
        pseudonyms: dict[tuple[str, str], str] = {}
        fields = {}
        any_change = False
        for name in ("title", "text"):
            new, replaced, n_allowed = deidentify_with_findings(
                doc.get(name) or "", options=self.options, pseudonyms=pseudonyms
            )
            fields[name] = new
            self.allowed += n_allowed
            shift = 0
            for f, placeholder in replaced:
                any_change = True
                self.counts[f.type] += 1
                self.rules[f.rule] += 1
                if f.note:
                    self.notes[f.note] += 1
                at = f.start + shift
                shift += len(placeholder) - (f.end - f.start)
                kept = self.samples.setdefault(f.type, [])
                if len(kept) < DEID_SAMPLES_PER_TYPE:
                    kept.append(
                        {
                            "context": _sample(new, at, placeholder),
                            "placeholder": placeholder,
                            "rule": f.rule,
                            "confidence": f.confidence,
                            "note": f.note,
                        }
                    )
        self.documents += 1
        self.changed += any_change
        return dumps_line({**doc, **fields})

    def report(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "documents_changed": self.changed,
            "replacements": {t: self.counts.get(t, 0) for t in PII_TYPES},
            "total_replacements": sum(self.counts.values()),
            "allowed": self.allowed,
            "notes": dict(sorted(self.notes.items())),
            "rules": dict(sorted(self.rules.items())),
            "samples": self.samples,
            "style": self.options.style,
        }

    @staticmethod
    def merge(reports: list[dict[str, Any]]) -> dict[str, Any]:
        """One report from the reports of consecutive chunks, in chunk order."""
        total: dict[str, Any] = {"documents": 0, "documents_changed": 0, "allowed": 0}
        replacements: Counter[str] = Counter()
        notes: Counter[str] = Counter()
        rules: Counter[str] = Counter()
        samples: dict[str, list[dict[str, Any]]] = {}
        style = reports[0]["style"] if reports else DEFAULT_OPTIONS.style
        for r in reports:
            for k in total:
                total[k] += r[k]
            replacements.update(r["replacements"])
            notes.update(r["notes"])
            rules.update(r["rules"])
            for t, items in r["samples"].items():
                kept = samples.setdefault(t, [])
                kept.extend(items[: DEID_SAMPLES_PER_TYPE - len(kept)])
        return {
            "documents": total["documents"],
            "documents_changed": total["documents_changed"],
            "replacements": {t: replacements.get(t, 0) for t in PII_TYPES},
            "total_replacements": sum(replacements.values()),
            "allowed": total["allowed"],
            "notes": dict(sorted(notes.items())),
            "rules": dict(sorted(rules.items())),
            "samples": {t: v for t, v in samples.items() if v},
            "style": style,
        }


def deid_stage_key(src: Path, options: DeidOptions) -> dict[str, Any]:
    """The stage key of de-identifying ``src`` with ``options`` (shared by the serial and chunked runs, so
    either one's finished output is reused by the other)."""
    return stage_key("deidentify", [src], {"options": options.fingerprint(), "rules": 3})


def deidentify_file(
    src: str | Path,
    dst: str | Path,
    *,
    options: DeidOptions = DEFAULT_OPTIONS,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Replace personal identifiers in ``title`` and ``text`` of every document (``datasets.deid``).

    Input and output: normalised JSONL. ``options``: placeholder style and allow-list (pseudonyms are
    consistent within one document, title and text together). Returns ``{"documents",
    "documents_changed", "replacements": {type: count for every type in PII_TYPES}, "total_replacements",
    "allowed" (identifiers kept because of the allow-list), "notes": {note: count} (e.g. "invalid check
    digit"), "rules": {rule: count}, "samples": {type: [{"context", "placeholder", "rule", "confidence",
    "note"}]} (at most ``DEID_SAMPLES_PER_TYPE`` per type; the context is de-identified text, never a
    value), "style", "reused"}``. Memory: one document. Raises ``PipelineError`` (stage ``"deidentify"``,
    ``code="input"``) when ``src`` is missing. ``datasets.pipeline.parallel`` gives the same output and
    report from chunks processed in parallel.
    """
    stage = "deidentify"
    src, dst = Path(src), Path(dst)
    _need_file(stage, src)
    key = deid_stage_key(src, options)
    saved = finished_report(dst, key)
    if saved is not None:
        if progress is not None:
            progress(src.stat().st_size, src.stat().st_size)
        return {**saved, "reused": True}
    tracker = Progress(progress, src.stat().st_size)
    acc = DeidAccumulator(options)
    with (
        atomic_output(dst) as tmp,
        open(tmp, "w", encoding="utf-8", newline="\n") as out,
    ):
        for doc in iter_jsonl(src, tracker):
            out.write(acc.line(doc))
    tracker.finish()
    report = acc.report()
    save_report(dst, key, report)
    return {**report, "reused": False}


def normalize_for_dedup(text: str) -> str:
    """Text as compared for exact duplicates: Unicode NFC, whitespace runs collapsed to one space, trimmed."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def deduplicate(src: str | Path, dst: str | Path, *, progress: ProgressFn | None = None) -> dict[str, Any]:
    """Drop exact duplicates, keeping the first: same SHA-256 of ``normalize_for_dedup(text)``.

    Memory: one 32-byte digest per distinct document (a set), never the texts. Returns
    ``{"documents_in", "documents_out", "duplicates", "reused"}``.
    """
    stage = "deduplicate"
    src, dst = Path(src), Path(dst)
    _need_file(stage, src)
    key, saved = _cached(stage, dst, [src], {"normalize": "nfc-ws"}, progress)
    if saved is not None:
        return {**saved, "reused": True}
    tracker = Progress(progress, src.stat().st_size)
    seen: set[bytes] = set()
    documents_in = 0
    with (
        atomic_output(dst) as tmp,
        open(tmp, "w", encoding="utf-8", newline="\n") as out,
    ):
        for doc in iter_jsonl(src, tracker):
            documents_in += 1
            digest = hashlib.sha256(normalize_for_dedup(doc["text"]).encode("utf-8")).digest()
            if digest in seen:
                continue
            seen.add(digest)
            out.write(dumps_line(doc))
    tracker.finish()
    report = {
        "documents_in": documents_in,
        "documents_out": len(seen),
        "duplicates": documents_in - len(seen),
    }
    save_report(dst, key, report)
    return {**report, "reused": False}


def new_tokenizer() -> Any:
    """An untrained byte-level BPE ``tokenizers.Tokenizer``: Han runs cut into ``HAN_CHUNK`` pieces, then
    GPT-2's byte-level pre-tokenizer (no prefix space) and the byte-level decoder, so that
    ``decode(encode(text).ids) == text`` for any text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(rf"\p{{Han}}{{1,{HAN_CHUNK}}}"), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(
    src: str | Path,
    dst: str | Path,
    *,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    min_frequency: int = 2,
    max_training_bytes: int = DEFAULT_MAX_TRAINING_BYTES,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Train a byte-level BPE tokenizer (Hugging Face ``tokenizers``) on the documents and save it as
    ``dst`` (a ``tokenizer.json``).

    The vocabulary holds ``vocab_size`` entries at most: ``<|endoftext|>`` (id 0, the eos of the shards),
    the 256 byte symbols, then merges seen at least ``min_frequency`` times. Training reads the texts
    through an iterator and stops after ``max_training_bytes`` bytes of text. Returns
    ``{"vocab_size", "eos_id", "trained_documents", "trained_bytes", "reused"}``. Raises
    ``PipelineError`` (stage ``"tokenizer"``) for ``vocab_size`` below 257 + 1 or a missing input.
    """
    from tokenizers import pre_tokenizers, trainers

    stage = "tokenizer"
    src, dst = Path(src), Path(dst)
    _need_file(stage, src)
    if vocab_size < 258:
        raise PipelineError(
            stage,
            f"vocab_size must be at least 258, got {vocab_size}",
            code="tokenizer",
        )
    params = {
        "vocab_size": vocab_size,
        "min_frequency": min_frequency,
        "max_training_bytes": max_training_bytes,
        "han_chunk": HAN_CHUNK,
    }
    key, saved = _cached(stage, dst, [src], params, progress)
    if saved is not None:
        return {**saved, "reused": True}
    tracker = Progress(progress, src.stat().st_size)
    used = {"documents": 0, "bytes": 0}

    def texts() -> Iterator[str]:
        for doc in iter_jsonl(src, tracker):
            text: str = doc["text"]
            size = len(text.encode("utf-8"))
            if used["bytes"] + size > max_training_bytes and used["documents"] > 0:
                return
            used["documents"] += 1
            used["bytes"] += size
            yield text

    tok = new_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts(), trainer=trainer)
    eos_id = tok.token_to_id(EOS_TOKEN)
    if eos_id != 0:  # pragma: no cover - guaranteed by special_tokens order
        raise PipelineError(stage, f"{EOS_TOKEN} got id {eos_id}, expected 0", code="tokenizer")
    with atomic_output(dst) as tmp:
        tok.save(str(tmp))
    tracker.finish()
    report = {
        "vocab_size": tok.get_vocab_size(),
        "eos_id": eos_id,
        "trained_documents": used["documents"],
        "trained_bytes": used["bytes"],
    }
    save_report(dst, key, report)
    return {**report, "reused": False}


def load_tokenizer(path: str | Path) -> Any:
    """Load a ``tokenizer.json``; raises ``PipelineError(code="tokenizer")`` when ``EOS_TOKEN`` is not id 0."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    if tok.token_to_id(EOS_TOKEN) != 0:
        raise PipelineError("shards", f"{path}: {EOS_TOKEN} must be token id 0", code="tokenizer")
    return tok


def _batches(docs: Iterator[dict[str, Any]], max_docs: int, max_bytes: int) -> Iterator[list[str]]:
    batch: list[str] = []
    size = 0
    for doc in docs:
        batch.append(doc["text"])
        size += len(doc["text"])
        if len(batch) >= max_docs or size >= max_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_shards(
    src: str | Path,
    tokenizer_path: str | Path,
    dst: str | Path,
    *,
    shard_tokens: int | None = None,
    batch_documents: int = 256,
    batch_chars: int = 1024 * 1024,
    progress: ProgressFn | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Tokenize every document and write a shard set (``instances.runtime.shards`` format, ``shard_tokens``
    tokens a shard, default ``DEFAULT_SHARD_TOKENS``) into ``dst``.

    Documents are encoded in batches (``encode_batch_fast``, else ``encode_batch``; at most
    ``batch_documents`` documents or ``batch_chars`` characters) without special tokens; a literal
    ``<|endoftext|>`` inside a text is
    encoded as ordinary bytes (``encode_special_tokens``), so only the writer's eos (id 0) separates
    documents. The tokenizer is copied into the folder as ``tokenizer.json``. ``dst`` is built under a
    temporary name and moved into place complete (an existing shard folder is replaced). Memory: one
    batch plus one shard buffer. Returns the shard index (``documents``, ``tokens`` including one eos per
    document, ``shards`` …) plus ``"reused"``.
    """
    # Documented hook upward (ARCHITECTURE.md): the shard format belongs to the training runtime that reads
    # it (``instances.runtime.shards``, no Django); the pipeline imports it here, not at module level.
    from instances.runtime.shards import DEFAULT_SHARD_TOKENS, INDEX_NAME, ShardWriter

    shard_tokens = DEFAULT_SHARD_TOKENS if shard_tokens is None else shard_tokens
    stage = "shards"
    src, tokenizer_path, dst = Path(src), Path(tokenizer_path), Path(dst)
    _need_file(stage, src)
    _need_file(stage, tokenizer_path)
    params = {"shard_tokens": shard_tokens}
    key, saved = _cached(stage, dst, [src, tokenizer_path], params, progress)
    if saved is not None and (dst / INDEX_NAME).is_file():
        return {**saved, "reused": True}
    tok = load_tokenizer(tokenizer_path)
    tok.encode_special_tokens = True
    # encode_batch_fast (tokenizers >= 0.21) skips character offsets: ~15 % faster, less memory.
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    tracker = Progress(progress, src.stat().st_size)
    with atomic_output(dst) as tmp:
        tmp.mkdir()
        shutil.copyfile(tokenizer_path, tmp / TOKENIZER_FILE)
        writer = ShardWriter(
            tmp,
            vocab_size=tok.get_vocab_size(),
            eos_id=0,
            shard_tokens=shard_tokens,
            tokenizer_file=TOKENIZER_FILE,
        )
        for batch in _batches(iter_jsonl(src, tracker), batch_documents, batch_chars):
            for enc in encode(batch, add_special_tokens=False):
                writer.add_document(enc.ids)
                if on_tokens is not None:
                    on_tokens(len(enc.ids) + 1)
        index = writer.close()
    tracker.finish()
    save_report(dst, key, index)
    return {**index, "reused": False}


def language_of(cjk: int, latin: int) -> str:
    """``"zh"`` when CJK ideographs are at least 30 % of CJK + Latin letters, ``"en"`` when there are
    letters otherwise, ``"und"`` when there are none. (A Chinese word is 1–2 characters, an English one
    about 5 letters, so 30 % CJK characters already means mostly-Chinese prose.)"""
    if cjk + latin == 0:
        return "und"
    return "zh" if cjk * 10 >= (cjk + latin) * 3 else "en"


# CJK Unified Ideographs (+ Extension A, compatibility ideographs, supplementary planes B–F).
_CJK_RE = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")
_LATIN_RE = re.compile("[A-Za-z]")


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(text) - len(pattern.sub("", text))


def statistics(
    documents: str | Path,
    shards: str | Path,
    dst: str | Path,
    *,
    progress: ProgressFn | None = None,
) -> dict[str, Any]:
    """Exact statistics of a finished dataset, written as JSON to ``dst`` and returned.

    ``{"documents", "bytes" (UTF-8 bytes of all texts), "characters" (code points of all texts),
    "tokens" (shard tokens including one eos per document), "cjk_characters", "latin_letters",
    "language" (see ``language_of``), "files": [{"file", "bytes", "sha256"}] for every file of the
    shard folder, sorted by name, "reused"}``. Raises ``PipelineError`` (stage ``"statistics"``) when the
    document count of the texts and the shard index disagree.
    """
    from instances.runtime.shards import INDEX_NAME, ShardSet  # the runtime's shard format (see write_shards)

    stage = "statistics"
    documents, shards, dst = Path(documents), Path(shards), Path(dst)
    _need_file(stage, documents)
    _need_file(stage, shards / INDEX_NAME)
    key, saved = _cached(stage, dst, [documents, shards / INDEX_NAME], {}, progress)
    if saved is not None:
        return {**saved, "reused": True}
    shard_set = ShardSet(shards)
    files = sorted(p for p in shards.iterdir() if p.is_file())
    total = documents.stat().st_size + sum(p.stat().st_size for p in files)
    tracker = Progress(progress, total)
    n_docs = n_bytes = n_chars = cjk = latin = 0
    for doc in iter_jsonl(documents, tracker):
        text: str = doc["text"]
        n_docs += 1
        n_bytes += len(text.encode("utf-8"))
        n_chars += len(text)
        latin += _count(_LATIN_RE, text)
        cjk += _count(_CJK_RE, text)
    if n_docs != int(shard_set.index["documents"]):
        raise PipelineError(
            stage,
            f"{documents.name} has {n_docs} documents but the shard index has {shard_set.index['documents']}",
            code="input",
        )
    manifest = []
    for p in files:
        manifest.append({"file": p.name, "bytes": p.stat().st_size, "sha256": file_sha256(p)})
        tracker.advance(p.stat().st_size)
    report = {
        "documents": n_docs,
        "bytes": n_bytes,
        "characters": n_chars,
        "tokens": len(shard_set),
        "cjk_characters": cjk,
        "latin_letters": latin,
        "language": language_of(cjk, latin),
        "files": manifest,
    }
    with atomic_output(dst) as tmp:
        tmp.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")
    tracker.finish()
    save_report(dst, key, report)
    return {**report, "reused": False}
