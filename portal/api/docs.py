"""The API's schema and documentation pages: public (they describe the API, like any provider's docs), read
with GET / HEAD only, and their errors in the API's JSON envelope.

drf-spectacular's Swagger UI and ReDoc views render HTML with ``TemplateHTMLRenderer``, which has no
template for an ``OPTIONS`` answer (a 500) and renders errors as HTML; these subclasses fix both.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response


class _PublicReadOnly:
    http_method_names: Any = ["get", "head"]
    authentication_classes: Any = []
    permission_classes: Any = [AllowAny]

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]


class SchemaView(_PublicReadOnly, SpectacularAPIView):
    """``GET /api/v1/schema``: the OpenAPI 3 document (YAML, or JSON with ``?format=json``)."""


class SwaggerDocsView(_PublicReadOnly, SpectacularSwaggerView):
    """``GET /api/v1/docs``: Swagger UI over the schema."""


class RedocView(_PublicReadOnly, SpectacularRedocView):
    """``GET /api/v1/redoc``: ReDoc over the schema."""
