"""URL slugs for names written in Chinese as well as in Latin script."""

from __future__ import annotations

from django.utils.text import slugify
from pypinyin import lazy_pinyin


def ascii_slug(text: str, *, max_length: int, fallback: str) -> str:
    """An ASCII slug of ``text`` of at most ``max_length`` characters: Chinese characters become their pinyin
    without tones (``pypinyin.lazy_pinyin``; ü is written ``v``), the rest goes through Django's ``slugify``.
    ``"法律助手"`` → ``"fa-lv-zhu-shou"``, ``"Contract review 合同"`` → ``"contract-review-he-tong"``; ``fallback``
    when nothing is left (``"!!!"``)."""
    return slugify(" ".join(lazy_pinyin(text)))[:max_length].strip("-") or fallback
