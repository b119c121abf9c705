"""drf-spectacular postprocessing hooks (``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``)."""

from __future__ import annotations

from typing import Any

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
