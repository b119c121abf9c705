"""The API's JSON parser: RFC 8259 JSON only, with bounds that keep bad bodies out of the database.

Refused with a 400 ``parse_error`` in the error envelope, before any view code runs:
- ``NaN`` / ``Infinity`` (not JSON, RFC 8259 §6; PostgreSQL ``jsonb`` refuses them later);
- a NUL character (``\\u0000``) in any string or key (PostgreSQL ``text`` and ``jsonb`` cannot store it);
- documents nested deeper than :data:`MAX_DEPTH` (Python's parser would raise ``RecursionError``, and
  nothing this API accepts is deeper than a few levels).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from portal.lib import strictjson

MAX_DEPTH = 32


def json_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a parsed JSON value is not acceptable (NUL in a string, nested too deep), or None. Iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return "Strings must not contain the NUL character (\\u0000)."
        elif isinstance(node, dict | list):
            if depth > max_depth:
                return f"The document is nested deeper than {max_depth} levels."
            items = node.items() if isinstance(node, dict) else ((None, v) for v in node)
            for key, child in items:
                if isinstance(key, str) and "\x00" in key:
                    return "Keys must not contain the NUL character (\\u0000)."
                stack.append((child, depth + 1))
    return None


def loads_checked(data: str | bytes) -> Any:
    """Parse JSON text strictly (``portal.strictjson``) and apply :func:`json_problem`.

    Raises ``ValueError`` with a sentence for the client: malformed, non-JSON constants, NUL, too deep.
    """
    try:
        value = strictjson.loads(data)
    except RecursionError:
        raise ValueError(f"The document is nested deeper than {MAX_DEPTH} levels.") from None
    except UnicodeDecodeError:
        raise ValueError("The body is not UTF-8.") from None
    except ValueError as exc:
        raise ValueError(f"The body is not valid JSON: {exc}") from None
    problem = json_problem(value)
    if problem:
        raise ValueError(problem)
    return value


class StrictJSONParser(JSONParser):
    """DRF's ``JSONParser`` with :func:`loads_checked` (see the module docstring)."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        body = stream.read() if stream is not None else b""
        try:
            return loads_checked(body.decode(settings.DEFAULT_CHARSET) if isinstance(body, bytes) else body)
        except UnicodeDecodeError:
            raise ParseError("The body is not UTF-8.") from None
        except ValueError as exc:
            raise ParseError(str(exc)) from None
