"""Prompts of an exported model, the same on both sides of a call: the portal counts and checks a request's prompt
tokens before it reserves money (and sends the token ids), the local model server encodes requests that come
with text. No Django, no torch: ``tokenizers`` and ``jinja2``.

- :func:`load_model_text` reads an export's ``tokenizer.json``, its chat template (``tokenizer_config.json``'s
  ``chat_template``, else :data:`DEFAULT_CHAT_TEMPLATE`), its end-of-sequence token and context length.
- :func:`chat_messages` checks OpenAI ``messages`` (roles ``system`` / ``developer`` / ``user`` / ``assistant``;
  content a string or a list of ``{"type": "text", "text": …}`` parts) and returns them with string contents.
- :meth:`ModelText.render_chat` renders them with the template as ``transformers``' ``apply_chat_template``
  renders one (a sandboxed Jinja2 environment with ``trim_blocks`` and ``lstrip_blocks``, ``raise_exception``,
  ``add_generation_prompt``), so vLLM, which renders with ``transformers``, builds the same text from the
  same export.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instances.serving.base import EXPORT_INFO, TOKENIZER_FILE

TOKENIZER_CONFIG = "tokenizer_config.json"
ROLES = ("system", "developer", "user", "assistant")
# The models trained here learn plain text, not a chat format: a conversation becomes "role: content" lines and
# the completion starts after "assistant:".
DEFAULT_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


class PromptError(ValueError):
    """A request's prompt or messages are not acceptable; ``param`` names the field (OpenAI's error ``param``)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ModelText:
    """An export's tokenizer (a ``tokenizers.Tokenizer``), chat template, end-of-sequence id and token, and context
    length (prompt + completion tokens)."""

    tokenizer: Any
    chat_template: str
    eos_id: int | None
    eos_token: str
    context_length: int

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added, as the model was trained)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Any) -> str:
        return str(self.tokenizer.decode(list(ids)))

    def render_chat(self, messages: list[dict[str, str]]) -> str:
        """The prompt text of ``messages`` (checked by :func:`chat_messages`), ending where the assistant's answer
        starts. Raises ``PromptError`` when the template refuses them."""
        try:
            return str(
                _template(self.chat_template).render(
                    messages=messages, add_generation_prompt=True, eos_token=self.eos_token, bos_token=""
                )
            )
        except _TemplateRefused as exc:
            raise PromptError(str(exc), "messages") from exc


class _TemplateRefused(Exception):
    pass


@functools.lru_cache(maxsize=64)
def _template(source: str) -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise _TemplateRefused(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


@functools.lru_cache(maxsize=32)
def _load(folder: str, mtime_ns: int) -> ModelText:
    from tokenizers import Tokenizer

    root = Path(folder)
    tokenizer = Tokenizer.from_file(str(root / TOKENIZER_FILE))
    info = _json(root / EXPORT_INFO)
    config = _json(root / "config.json")
    tok_config = _json(root / TOKENIZER_CONFIG)
    eos_id = info.get("eos_id", config.get("eos_token_id"))
    eos_id = int(eos_id) if isinstance(eos_id, int) else None
    eos_token = str(tok_config.get("eos_token") or (tokenizer.id_to_token(eos_id) if eos_id is not None else "") or "")
    context = int(info.get("max_position_embeddings") or config.get("max_position_embeddings") or 2048)
    template = tok_config.get("chat_template")
    return ModelText(
        tokenizer=tokenizer,
        chat_template=template if isinstance(template, str) and template else DEFAULT_CHAT_TEMPLATE,
        eos_id=eos_id,
        eos_token=eos_token,
        context_length=context,
    )


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_model_text(model_dir: str | Path) -> ModelText:
    """The :class:`ModelText` of the export in ``model_dir`` (cached per folder and tokenizer file version).
    Raises ``OSError`` when the folder has no ``tokenizer.json``."""
    root = Path(model_dir)
    mtime = (root / TOKENIZER_FILE).stat().st_mtime_ns
    return _load(str(root.resolve()), mtime)


def chat_messages(messages: Any) -> list[dict[str, str]]:
    """OpenAI chat ``messages`` checked and with string contents: a non-empty list of objects with a ``role`` of
    :data:`ROLES` and a ``content`` that is a string or a list of text parts. Raises ``PromptError`` naming the
    first bad field (``messages[2].content``)."""
    if not isinstance(messages, list) or not messages:
        raise PromptError("'messages' must be a non-empty array of message objects", "messages")
    out = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise PromptError(f"{where} must be an object with 'role' and 'content'", where)
        role = message.get("role")
        if role not in ROLES:
            raise PromptError(
                f"{where}.role must be one of {', '.join(ROLES)} (got {str(role)[:40]!r})", f"{where}.role"
            )
        content = message.get("content")
        if isinstance(content, list):
            parts = []
            for j, part in enumerate(content):
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise PromptError(
                        f'{where}.content[{j}] must be a text part {{"type": "text", "text": …}}; '
                        "this model reads text only",
                        f"{where}.content",
                    )
                parts.append(part["text"])
            content = "".join(parts)
        if not isinstance(content, str):
            raise PromptError(f"{where}.content must be a string or an array of text parts", f"{where}.content")
        out.append({"role": str(role), "content": content})
    return out


def tokenizer_config(*, eos_token: str, context_length: int) -> dict[str, Any]:
    """The ``tokenizer_config.json`` an export carries so that ``transformers.AutoTokenizer`` (and so vLLM) loads
    its ``tokenizer.json`` as a fast tokenizer with the chat template :data:`DEFAULT_CHAT_TEMPLATE`."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": eos_token,
        "pad_token": eos_token,
        "model_max_length": context_length,
        "clean_up_tokenization_spaces": False,
        "chat_template": DEFAULT_CHAT_TEMPLATE,
    }
