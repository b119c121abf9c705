"""The API's one error envelope: ``{"error": {"code": str, "message": str, "details": ...}}``."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler


class ApiError(exceptions.APIException):
    """A domain refusal with its own code, e.g. ``ApiError("insufficient_funds", "…", 402)``."""

    def __init__(self, code: str, message: str, status_code: int = 400, details: Any = None) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.details = details


def envelope_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Wrap every DRF error in the envelope; codes come from DRF's ``default_code`` or ``ApiError``."""
    if isinstance(exc, RequestDataTooBig):
        exc = ApiError("body_too_large", "The request body is larger than this endpoint accepts.", 413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):  # incl. portal.permissions.PermissionRefused: keep its sentence
        exc = exceptions.PermissionDenied(detail=str(exc) or None)
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        code, message, details = exc.error_code, str(exc.detail), exc.details
    elif isinstance(exc, exceptions.ValidationError):
        code, message, details = "invalid", "The request is not valid.", response.data
    elif isinstance(exc, exceptions.APIException):
        code = exc.default_code if not isinstance(exc.detail, dict) else "error"
        codes = exc.get_codes()
        if isinstance(codes, str):
            code = codes
        message = str(exc.detail) if not isinstance(exc.detail, (dict, list)) else "Error."
        details = None
    else:  # pragma: no cover - exception_handler returns None for others
        code, message, details = "error", str(exc), None
    if response.status_code == status.HTTP_401_UNAUTHORIZED:
        code = "not_authenticated" if code == "not_authenticated" else "authentication_failed"
    response.data = {"error": {"code": code, "message": message, "details": details}}
    return response


def not_found_handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """The project's ``handler404``: a URL no route matches under ``/api/`` is a 404 in the envelope (JSON),
    elsewhere Django's page."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": {"code": "not_found", "message": "Not found.", "details": None}}, status=404)
    return defaults.page_not_found(request, exception or Http404())


def server_error_handler(request: HttpRequest) -> HttpResponse:
    """The project's ``handler500``: under ``/api/`` a 500 still answers in the envelope."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"error": {"code": "server_error", "message": "Internal error.", "details": None}}, status=500
        )
    return defaults.server_error(request)
