"""Find untranslated UI text in a rendered page: ASCII words outside an allow-list of product names and units.

The page is parsed with the standard library's ``html.parser`` (no regular expressions over markup): text nodes
and the attributes a reader sees or hears (``placeholder``, ``title``, ``aria-label``, ``alt``, and the
``value`` of a button-like ``<input>``) count; other attributes, ``<script>``, ``<style>``, ``<template>``, code
samples (``<code>``, ``<pre>``, ``<kbd>``, ``<samp>``), form field contents (``<textarea>``) and anything marked
``translate="no"`` (user data: names, e-mail addresses, file names) are left out. In the text, a whitespace-
separated chunk that looks like an identifier (has a digit, ``@``, ``_``, ``://``, a quote or bracket, starts
with ``/`` or ``--``, joins letters with ``.`` or ``:``, or is a lower-case slug such as ``cpu-local``:
versions, sizes, e-mail addresses, file names, JSON, command-line flags, catalog codes) is skipped; every other
run of ASCII letters is a word, and a word that is not in the allow-list is reported.

Used by ``tests/instances/test_console_zh_pages.py`` (every console page in zh-hans) and the browser journey
``tests/e2e/test_browser_first_hour.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser

# Product names, standards and units that stay in Latin letters on Chinese pages.
ALLOWED_WORDS: frozenset[str] = frozenset(
    {
        # product and technology names
        "gpu",
        "portal",
        "GPU",
        "CPU",
        "API",
        "JupyterLab",
        "Jupyter",
        "SSH",
        "FSDP",
        "FSDP2",
        "DDP",
        "DeepSpeed",
        "ZeRO",
        "PyTorch",
        "CUDA",
        "NCCL",
        "Megatron",
        "NVLink",
        "NVIDIA",
        "Kubernetes",
        "OpenSSH",
        "ssh",  # the command's name, as typed
        "DSA",
        "RSA",
        "NVML",
        "UTC",
        "TDP",  # a card's thermal design power, as datasheets name it
        "GeForce",
        "MIIT",  # China's Ministry of Industry and Information Technology, as cited
        "PUE",
        "data",  # the workspace's datasets folder, shown as its path (data/)
        "pub",  # a public key file's extension (.pub)
        "AAAA",  # the start of every OpenSSH public key, shown as an example
        "Stripe",
        "Llama",
        "OpenAPI",
        "OpenAI",  # the API shape and its client package (openai) that model apps speak
        "openai",
        "vLLM",
        "curl",
        "Python",
        "CLI",
        "HTTP",
        "HTTPS",
        "URL",
        "JSON",
        "JSONL",
        "CSV",
        "TXT",
        "HTML",
        "TCO",
        "MFU",
        "PII",
        "IP",
        "ID",
        "SXM",
        "PCIe",
        "VRAM",
        "Pod",
        "Bearer",
        "Authorization",
        "Token",
        "OK",
        "htmx",
        "AdamW",
        "SHA",
        "HMAC",
        "Luhn",
        "BPE",
        "LoRA",
        "AI",
        "English",
        "RTX",
        "TFLOPS",
        "SIGKILL",
        "SIGTERM",
        "SIGINT",
        "OOMKilled",
        "NaN",
        "Infinity",
        "Celery",
        "Redis",
        "PostgreSQL",
        "Idempotency",
        "Key",
        "Content",
        "Type",
        "POST",
        "GET",
        "Megatron-Core",
        "Core",
        "Schema",
        "python",
        # machine-learning terms Chinese text keeps in Latin letters ("token/秒", "节点 rank")
        "token",
        "tokens",
        "rank",
        # units and currency
        "CNY",
        "GB",
        "MB",
        "KB",
        "TB",
        "GiB",
        "MiB",
        "KiB",
        "TiB",
        "kW",
        "kWh",
        "W",
        "ms",
    }
)

_SKIPPED_ELEMENTS = frozenset({"script", "style", "template", "code", "pre", "kbd", "samp", "textarea", "noscript"})
_READ_ATTRIBUTES = ("placeholder", "title", "aria-label", "alt")  # what a reader sees (tooltips) or hears
_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)
_IDENTIFIER = re.compile(
    r"\d|@|_|://|^/|^--|[A-Za-z][.:][A-Za-z0-9]"  # numbers, addresses, paths, flags, file names, codes
    r'|["{}\[\]<>=`]'  # quoted literals and JSON ("text")
)
_SLUG = re.compile(r"^[a-z]+(-[a-z0-9]+)+$")  # slugs and catalog codes (cpu-local, legal-tiny)
_EDGES = re.compile(r"^[^A-Za-z0-9-]+|[^A-Za-z0-9-]+$")
_WORD = re.compile(r"[A-Za-z]+")


@dataclass(frozen=True)
class Finding:
    """An untranslated ``word`` and the text node it was found in (cut to 120 characters)."""

    word: str
    context: str


class _TextCollector(HTMLParser):
    """Collects the visible text nodes, skipping the elements above and ``translate="no"`` subtrees."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped)
        self.texts: list[str] = []

    def _skipping(self) -> bool:
        return any(skip for _tag, skip in self.stack)

    def _attributes(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if self._skipping() or tag in _SKIPPED_ELEMENTS or values.get("translate") == "no":
            return
        names = list(_READ_ATTRIBUTES)
        if tag == "input" and values.get("type") in ("submit", "button", "reset"):
            names.append("value")
        for name in names:
            text = values.get(name)
            if text and text.strip():
                self.texts.append(" ".join(text.split()))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attributes(tag, attrs)
        if tag in _VOID:
            return
        skip = tag in _SKIPPED_ELEMENTS or dict(attrs).get("translate") == "no"
        self.stack.append((tag, skip))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._attributes(tag, attrs)  # <x/>: no content

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed elements (<p>, <li>, <td>)
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if data.strip() and not self._skipping():
            self.texts.append(" ".join(data.split()))


def visible_texts(html: str) -> list[str]:
    """The page's text nodes and read attributes in document order, whitespace collapsed, skipped elements
    left out."""
    parser = _TextCollector()
    parser.feed(html)
    parser.close()
    return parser.texts


def untranslated_words(html: str, *, allowed: Iterable[str] = ()) -> list[Finding]:
    """Every ASCII word of the page's visible text that is neither in :data:`ALLOWED_WORDS` nor in
    ``allowed`` (the page's own data: names a test gave its objects), with its text node; in page order."""
    ok = ALLOWED_WORDS | frozenset(allowed)
    found: list[Finding] = []
    for text in visible_texts(html):
        for chunk in text.split():
            if _IDENTIFIER.search(chunk) or _SLUG.match(_EDGES.sub("", chunk)):
                continue
            for word in _WORD.findall(chunk):
                if word not in ok:
                    found.append(Finding(word, text[:120]))
    return found


def findings_report(findings_by_page: dict[str, list[Finding]]) -> str:
    """A readable report: per page, each text node with untranslated words once, with its words."""
    lines = []
    for page, findings in findings_by_page.items():
        if not findings:
            continue
        lines.append(f"{page}:")
        by_text: dict[str, list[str]] = {}
        for f in findings:
            by_text.setdefault(f.context, []).append(f.word)
        lines += [f"    {text!r}: {' '.join(dict.fromkeys(words))}" for text, words in by_text.items()]
    return "\n".join(lines)
