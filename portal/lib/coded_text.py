"""Stored texts as codes with parameters, rendered in the reader's language — the engine every app's registry
uses (ledger memos: ``billing.memos``; app state reasons: ``portal.marketplace.reasons``). Instance and job
reasons keep their own Django-free twin (``instances.reasons`` / ``instances.reason_display``), which the
launcher process needs; :class:`TextCodes` can wrap that registry too (its back-fill migration does).

A registry maps a code to an English template with ``%(name)s`` / ``%(name)d`` parameters; the template is the
gettext msgid (the zh_Hans catalogue translates it, so each template must be marked with ``gettext_noop`` where
it is written). A row stores three things: the English text (for the API, CSV exports, the admin and rows
written before codes), the code and the parameters (JSON). Rendering falls back to the stored text when the
code is empty or unknown or the parameters do not fit the template.

A parameter may itself be a coded text (``{"code": …, "params": …}``, rendered recursively: "Expiry of Trial
credit") or a list of them and of plain strings (joined with "; ").

:meth:`TextCodes.parse` reads an English text back to ``(code, params)``: the data migrations use it to give
rows written before codes their code where the text is recognised.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_PARAM = re.compile(r"%\((\w+)\)([sd])")


class CodedText(str):
    """A stored text's English value (the ``str``) with its ``code`` and JSON-able ``params``."""

    code: str
    params: dict[str, Any]

    def __new__(cls, text: str, code: str, params: dict[str, Any]) -> CodedText:
        obj = super().__new__(cls, text)
        obj.code, obj.params = code, params
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (CodedText, (str(self), self.code, self.params))

    def as_json(self) -> dict[str, Any]:
        """``{"code": …, "params": …}``: the form stored in a nested parameter."""
        return {"code": self.code, "params": self.params}


def coded_fields(value: str) -> tuple[str, dict[str, Any]]:
    """``(code, params)`` of ``value`` (``("", {})`` for plain text): what the ``*_code`` / ``*_params`` columns
    store beside the text."""
    if isinstance(value, CodedText):
        return value.code, dict(value.params)
    return "", {}


def _json(value: Any) -> Any:
    if isinstance(value, CodedText):
        return value.as_json()
    if isinstance(value, (list, tuple)):
        return [_json(v) for v in value]
    if isinstance(value, (int, float, bool, dict)) or value is None:
        return value
    return str(value)


class TextCodes:
    """One registry of codes: ``texts`` maps a code to its English template (a msgid).

    ``nested`` names, per code, the parameters that hold a coded text themselves (what :meth:`parse` reads back
    nested; any other parameter is user data and stays as written, even when it happens to read like a code's
    text). ``max_length`` cuts the English text to the column it is stored in."""

    def __init__(
        self,
        texts: Mapping[str, str],
        *,
        nested: Mapping[str, Iterable[str]] | None = None,
        max_length: int = 300,
    ) -> None:
        self.texts = dict(texts)
        self.nested = {code: frozenset(names) for code, names in (nested or {}).items()}
        self.max_length = max_length
        self._patterns: list[tuple[str, re.Pattern[str], dict[str, str]]] | None = None

    def __contains__(self, code: object) -> bool:
        return code in self.texts

    def coded(self, code: str, **params: Any) -> CodedText:
        """The text ``code`` with ``params`` (numbers kept, nested coded texts as JSON, anything else as str).
        Raises ``KeyError`` for a code the registry lacks."""
        if code not in self.texts:
            raise KeyError(f"unknown text code {code!r}")
        values = {k: _json(v) for k, v in params.items()}
        return CodedText(self.text(code, values, translate=None)[: self.max_length], code, values)

    def text(self, code: str, params: Mapping[str, Any] | None, *, translate: Callable[[str], str] | None) -> str:
        """``code``'s template (through ``translate``, e.g. ``gettext``; as written when None) filled with
        ``params``, nested texts rendered the same way. Raises ``KeyError`` / ``ValueError`` / ``TypeError``
        when the template and the params disagree."""
        template = self.texts[code]
        if translate is not None:
            template = translate(template)
        values = {key: self._value(value, translate) for key, value in (params or {}).items()}
        return template % values if values else template

    def _value(self, value: Any, translate: Callable[[str], str] | None) -> Any:
        if isinstance(value, dict) and value.get("code") in self.texts:
            return self.text(value["code"], value.get("params") or {}, translate=translate)
        if isinstance(value, list):
            return "; ".join(str(self._value(v, translate)) for v in value)
        return value

    def render(self, *, code: str, params: Mapping[str, Any] | None, fallback: str = "") -> str:
        """The text in the active language (Django's ``gettext``), or ``fallback`` (the stored text) when the
        code is empty or unknown or its params do not fit."""
        from django.utils.translation import gettext

        if not code or code not in self.texts:
            return fallback
        try:
            return self.text(code, params, translate=gettext)
        except (KeyError, ValueError, TypeError):
            return fallback

    def parse(self, text: str) -> tuple[str, dict[str, Any]] | None:
        """``(code, params)`` of an English ``text`` one of the templates produced, or None when none matches
        whole. ``%(x)d`` parameters come back as ints; a ``%(x)s`` parameter named in ``nested`` comes back nested
        (``{"code": …, "params": …}``) when it is a recognised text itself. A template without parameters wins over
        one with; among those with, the one with the most literal characters wins."""
        for code, pattern, kinds in self._compiled():
            match = pattern.fullmatch(text)
            if match is None:
                continue
            params: dict[str, Any] = {}
            for name, kind in kinds.items():
                raw = match.group(name)
                if kind == "d":
                    params[name] = int(raw)
                else:
                    inner = name in self.nested.get(code, ()) and raw != text
                    nested = self.parse(raw) if inner else None
                    params[name] = {"code": nested[0], "params": nested[1]} if nested else raw
            return code, params
        return None

    def _compiled(self) -> list[tuple[str, re.Pattern[str], dict[str, str]]]:
        if self._patterns is None:
            built = []
            for code, template in self.texts.items():
                kinds: dict[str, str] = {}
                parts, last = [], 0
                for m in _PARAM.finditer(template):
                    parts.append(re.escape(template[last : m.start()]))
                    name, kind = m.group(1), m.group(2)
                    if name in kinds:  # the same parameter twice: a back-reference
                        parts.append(f"(?P={name})")
                    else:
                        kinds[name] = kind
                        parts.append(f"(?P<{name}>-?\\d+)" if kind == "d" else f"(?P<{name}>.+?)")
                    last = m.end()
                parts.append(re.escape(template[last:]))
                literal = len(_PARAM.sub("", template))
                built.append((bool(kinds), -literal, code, re.compile("".join(parts), re.DOTALL), kinds))
            built.sort(key=lambda t: (t[0], t[1]))
            self._patterns = [(code, pattern, kinds) for _has, _lit, code, pattern, kinds in built]
        return self._patterns
