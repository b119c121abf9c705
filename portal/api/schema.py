"""OpenAPI post-processing: every operation documents the error answers it can give, in the one envelope (in
OpenAI's error shape under ``/api/v1/openai/``).

drf-spectacular documents success answers from the views; the refusals come from layers around them
(authentication 401, role and scope 403, organization scoping 404, throttling 429, the strict JSON parser and
validators 400, body size 413, domain refusals 402 / 409 / 422, upstream failures of app calls 502 / 504,
unconfigured payments 503). This hook adds them to every operation with the ``ErrorEnvelope`` schema, so a
client generated from the schema knows every status code it will see.
"""

from __future__ import annotations

from typing import Any

ERROR_ENVELOPE = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "description": "machine-readable, e.g. not_found, insufficient_funds"},
                "message": {"type": "string", "description": "a sentence for people"},
                "details": {"nullable": True, "description": "field errors or extra facts; may be null"},
            },
        }
    },
}

# The OpenAI-compatible API (``/api/v1/openai/``) answers errors in OpenAI's shape instead
# (``portal.marketplace.openai_api.openai_error``), so clients built for OpenAI read them.
OPENAI_PREFIX = "/api/v1/openai/"
OPENAI_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string", "description": "a sentence for people"},
                "type": {"type": "string", "description": "OpenAI's error type, e.g. invalid_request_error"},
                "param": {"type": "string", "nullable": True, "description": "the request field at fault"},
                "code": {"type": "string", "description": "machine-readable, e.g. model_not_found"},
            },
        }
    },
}

_ALL = {
    "400": "Invalid input: malformed JSON, a value out of its documented bounds, a NUL or oversized parameter.",
    "401": "Missing, malformed or revoked token, or its user is no longer a member of its organization.",
    "403": "The token's scope or the member's role does not allow this.",
    "404": "Not found, or not your organization's (the two are indistinguishable).",
    "405": "Method not allowed.",
    "406": "Only application/json answers are available.",
    "429": "Too many requests; retry after the Retry-After header.",
}
_WRITES = {
    "402": "The wallet cannot pay for this (insufficient funds, monthly cap reached).",
    "409": "Conflict: the Idempotency-Key was used with another body, or the object is in the wrong state.",
    "413": "The request body is too large.",
    "415": "Unsupported media type: send application/json.",
    "422": "The input does not match the operation's input schema.",
    "502": "An upstream service (an app backend, the payment provider) failed; nothing was charged.",
    "503": "A service this operation needs is not configured on this installation.",
    "504": "An upstream service did not answer in time; nothing was charged.",
}


# Which request media type an operation documents when its parsers accept several, best first.
REQUEST_MEDIA_PREFERENCE = ("application/json", "multipart/form-data", "application/x-www-form-urlencoded")


def one_request_media_type(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Document one media type per request body: JSON where the view parses JSON, else multipart, else a form.

    DRF's default parsers (JSON, form, multipart) make drf-spectacular list the same serializer under three
    media types. The form variants cannot carry the nested fields (hyperparameters, id lists) the JSON form
    can, and a client generated from the schema (``clients/python``, openapi-python-client) sends the last
    variant it is given, so every generated ``POST`` would go out as multipart. The views still parse the
    other forms; the schema names the one to use.
    """
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            content = operation.get("requestBody", {}).get("content") if isinstance(operation, dict) else None
            if not content or len(content) < 2:
                continue
            keep = next((m for m in REQUEST_MEDIA_PREFERENCE if m in content), None)
            if keep is not None:
                operation["requestBody"]["content"] = {keep: content[keep]}
    return result


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """``POSTPROCESSING_HOOKS`` entry: add ``ErrorEnvelope`` and the error answers to every operation."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorEnvelope"] = ERROR_ENVELOPE
    components["OpenAIError"] = OPENAI_ERROR
    for path, item in result.get("paths", {}).items():
        ref = {"$ref": f"#/components/schemas/{'OpenAIError' if path.startswith(OPENAI_PREFIX) else 'ErrorEnvelope'}"}
        for method, operation in item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            codes = dict(_ALL)
            if method != "get":
                codes.update(_WRITES)
            responses = operation.setdefault("responses", {})
            for code, description in codes.items():
                responses.setdefault(
                    code, {"description": description, "content": {"application/json": {"schema": ref}}}
                )
    return result
