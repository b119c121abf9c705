"""A stored reason (code, params, English text) in the reader's language: the Django half of
``instances.reasons``, which stays free of Django for the launcher and the model server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext

from instances.reasons import REASON_TEXTS, reason_text


def reason_render(*, code: str, params: Mapping[str, Any] | None, fallback: str = "") -> str:
    """The reason in the active language: ``code``'s template translated and filled with ``params``;
    ``fallback`` (the stored English text) when the code is empty or unknown (rows written before codes)."""
    if not code or code not in REASON_TEXTS:
        return fallback
    try:
        return reason_text(code, dict(params or {}), translate=gettext)
    except (KeyError, ValueError, TypeError):  # a template and its stored params disagree: keep the text
        return fallback
