"""The OpenAI-compatible API of published models: base URL ``/api/v1/openai/v1`` (point the ``openai`` client's
``base_url`` there, with an API token as its ``api_key``).

- ``GET /models``, ``GET /models/{model}``: the model apps the token's organization may call
  (``completions.model_apps``), with ``max_model_len``, ``max_tokens`` and the prices.
- ``POST /completions`` and ``POST /chat/completions``: ``model`` (an app's slug), ``prompt`` / ``messages``,
  ``max_tokens`` (``max_completion_tokens`` for chat), ``temperature``, ``top_p``, ``stop``, ``seed``, ``stream``,
  ``stream_options.include_usage``, ``user``; ``n`` = 1 only. With ``stream: true`` the answer is server-sent
  events, one chunk per generated token, then ``data: [DONE]``; the usage comes on the chunk with the
  ``finish_reason`` (and on a last chunk without choices when ``include_usage`` asks for it, as OpenAI sends
  it); while no token comes the stream carries SSE comments (``: keep-alive``, every ``APP_STREAM_HEARTBEAT_MS``),
  which clients ignore and which tell the portal within two of them that a client went away. ``Idempotency-Key``
  replays a succeeded call (the stored answer, charged once).

Authentication and scoping as in the rest of the partner API (``Authorization: Bearer`` API tokens, the token's
organization through ``request_organization``; ``POST`` needs a write-scope token), throttled like app calls.
Errors are OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` with the product's codes
(``model_not_found``, ``context_length_exceeded``, ``max_tokens_too_large``, ``invalid_messages``,
``insufficient_funds``, ``monthly_cap_reached`` …); nothing is charged for any of them. Billing:
``portal.marketplace.completions``.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.money import from_micros
from portal.api.errors import ApiError, envelope_exception_handler
from portal.lib.http import AuthedRequest
from portal.marketplace import completions
from portal.marketplace.api import InvokeThrottle
from portal.marketplace.calls import CallResult
from portal.marketplace.completions import CompletionRefused, Opened, Piece
from portal.marketplace.services import MarketplaceError
from portal.scoping import request_organization

BASE_PATH = "/api/v1/openai/v1"
_TYPES = {
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}
_END = object()


def openai_error(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error body: ``type`` from the status (``invalid_request_error``, ``authentication_error`` …)."""
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _first_error(detail: Any, path: str = "") -> tuple[str | None, str]:
    """(param, message) of the first error of a serializer's ``errors`` (``messages[1].role`` …)."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            sub = f"{path}[{key}]" if isinstance(key, int) or str(key).isdigit() else f"{path}.{key}" if path else key
            return _first_error(value, str(sub))
    if isinstance(detail, list) and detail:
        if all(isinstance(d, (str, exceptions.ErrorDetail)) for d in detail):
            return path or None, str(detail[0])
        return _first_error(detail[0], path)
    return path or None, str(detail)


def openai_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """The partner API's errors (``envelope_exception_handler``) in OpenAI's shape."""
    if isinstance(exc, CompletionRefused):
        return Response(openai_error(exc.status, exc.code, str(exc), exc.param), status=exc.status)
    if isinstance(exc, MarketplaceError):
        details = exc.details if isinstance(exc.details, dict) else {}
        return Response(openai_error(exc.status, exc.code, str(exc), details.get("param")), status=exc.status)
    if isinstance(exc, exceptions.ValidationError):
        param, message = _first_error(exc.detail)
        code = "invalid_messages" if param and param.startswith("messages") else "invalid_request"
        if param == "n":
            code = "unsupported_parameter"
        return Response(openai_error(400, code, f"{param}: {message}" if param else message, param), status=400)
    response = envelope_exception_handler(exc, context)
    if response is None:
        return None
    error = (response.data or {}).get("error") or {}
    code = str(error.get("code") or "error")
    if response.status_code == 401:
        code = "invalid_api_key"
    response.data = openai_error(response.status_code, code, str(error.get("message") or ""))
    return response


class OpenAIView(APIView):
    """Partner-API authentication, permissions and scoping, OpenAI-shaped errors."""

    def get_exception_handler(self) -> Any:
        return openai_exception_handler


# --- requests ------------------------------------------------------------------------------------------------


class _Common(serializers.Serializer[dict[str, Any]]):
    model = serializers.CharField(help_text="the slug of a model app (GET /models)")
    max_tokens = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="completion tokens at most (held before the call)"
    )
    temperature = serializers.FloatField(min_value=0, max_value=2, required=False, allow_null=True)
    top_p = serializers.FloatField(min_value=0, max_value=1, required=False, allow_null=True)
    seed = serializers.IntegerField(required=False, allow_null=True)
    stop = serializers.JSONField(required=False, allow_null=True, help_text="a string or up to 4 strings")
    stream = serializers.BooleanField(required=False, default=False)
    stream_options = serializers.DictField(required=False, allow_null=True)
    user = serializers.CharField(required=False, allow_blank=True, max_length=256)
    n = serializers.IntegerField(required=False, allow_null=True, help_text="1 only")

    UNSUPPORTED = ("best_of", "logprobs", "top_logprobs", "echo", "suffix", "tools", "functions", "logit_bias")

    def validate_n(self, value: int | None) -> int | None:
        if value not in (None, 1):
            raise serializers.ValidationError("only n = 1 is supported (one choice per call)")
        return value

    def validate_top_p(self, value: float | None) -> float | None:
        if value is not None and value <= 0:
            raise serializers.ValidationError("must be greater than 0")
        return value

    def validate_stop(self, value: Any) -> Any:
        stops = [value] if isinstance(value, str) else value
        if value is not None and (
            not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops)
        ):
            raise serializers.ValidationError("a non-empty string or an array of up to 4 non-empty strings")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        for name in self.UNSUPPORTED:
            value = self.initial_data.get(name) if isinstance(self.initial_data, dict) else None
            if value is not None and value is not False and not (name == "best_of" and value == 1):
                raise serializers.ValidationError({name: ["is not supported by this API"]})
        options = attrs.get("stream_options") or {}
        if options and not attrs.get("stream"):
            raise serializers.ValidationError({"stream_options": ["is only allowed with stream: true"]})
        return {k: v for k, v in attrs.items() if v is not None}


class CompletionRequest(_Common):
    prompt = serializers.JSONField(help_text="a string, or an array of token ids")


class ChatCompletionRequest(_Common):
    messages = serializers.ListField(
        child=serializers.JSONField(),
        allow_empty=False,
        help_text="objects with a role (system, developer, user, assistant) and a content (text or text parts)",
    )
    max_completion_tokens = serializers.IntegerField(min_value=1, required=False, allow_null=True)


# --- answers -------------------------------------------------------------------------------------------------


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _answer(chat: bool, id_: str, created: int, model: str, text: str, finish: str | None, usage: dict[str, int]):  # type: ignore[no-untyped-def]
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": finish}  # fmt: skip
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    kind = "chat.completion" if chat else "text_completion"
    return {"id": id_, "object": kind, "created": created, "model": model, "choices": [choice], "usage": usage}


def _chunk(chat: bool, id_: str, created: int, model: str, text: str | None, finish: str | None) -> dict[str, Any]:
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if text is None else {"content": text}
        choice: dict[str, Any] = {"index": 0, "delta": delta if text != "" else {}, "logprobs": None,
                                  "finish_reason": finish}  # fmt: skip
    else:
        choice = {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}
    kind = "chat.completion.chunk" if chat else "text_completion"
    return {"id": id_, "object": kind, "created": created, "model": model, "choices": [choice]}


def _sse(payload: dict[str, Any] | str) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def _finish_reason(reason: str | None) -> str:
    return reason if reason in ("stop", "length") else "stop"


def _stream(opened: Opened) -> Iterator[bytes]:
    """The SSE body of an opened call; settles it when the stream ends, however it ends.

    A chunk counts as delivered once the server asks for the next one (WSGI servers write each item before they
    ask; a client that went away makes the write fail and the server closes this generator instead), so the
    tokens charged are those written to the client."""
    p = opened.prepared
    model, chat = p.app.slug, p.chat
    pieces: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def read() -> None:
        try:
            for piece in completions.completion_pieces(opened):
                pieces.put(piece)
            pieces.put(_END)
        except Exception as exc:  # the stream broke, timed out, or the model server reported an error
            pieces.put(exc)

    threading.Thread(target=read, name=f"completion-{opened.call.pk}", daemon=True).start()
    heartbeat = int(settings.APP_STREAM_HEARTBEAT_MS) / 1000
    delivered, text, finish, error = 0, [], None, ""
    try:
        if chat:
            yield _sse(_chunk(chat, opened.id, opened.created, model, None, None))
        while True:
            try:
                item = pieces.get(timeout=heartbeat)
            except queue.Empty:
                yield b": keep-alive\n\n"
                continue
            if item is _END:
                break
            if isinstance(item, Exception):
                error = f"{type(item).__name__}: {item}"
                break
            piece: Piece = item
            chunk = _chunk(chat, opened.id, opened.created, model, piece.text, piece.finish_reason and
                           _finish_reason(piece.finish_reason))  # fmt: skip
            if piece.finish_reason and not p.include_usage:
                chunk["usage"] = _usage(p.prompt_tokens, min(piece.completion_tokens, p.max_tokens))
            yield _sse(chunk)
            delivered = piece.completion_tokens  # written: the server asked for more
            text.append(piece.text)
            finish = piece.finish_reason or finish
        if error:
            completions.completion_finish(
                opened=opened, completion_tokens=delivered, text="".join(text), finish_reason="error", error=error
            )
            message = "The model server failed during the answer; only the tokens sent are charged."
            yield _sse(openai_error(502, "backend_error", message))
        else:
            completions.completion_finish(
                opened=opened, completion_tokens=delivered, text="".join(text), finish_reason=_finish_reason(finish)
            )
            if p.include_usage:
                usage = _usage(p.prompt_tokens, min(delivered, p.max_tokens))
                yield _sse({"id": opened.id, "object": "chat.completion.chunk" if chat else "text_completion",
                            "created": opened.created, "model": model, "choices": [], "usage": usage})  # fmt: skip
        yield _sse("[DONE]")
    except GeneratorExit:  # the client went away: charge what it was sent
        completions.completion_finish(
            opened=opened, completion_tokens=delivered, text="".join(text), finish_reason="client_disconnected"
        )
        raise
    finally:
        opened.stream.close()


def _whole(opened: Opened) -> dict[str, Any]:
    """Read the whole answer, settle, and return the OpenAI body. Raises ``ApiError`` 502 / 504 when the model
    server fails (nothing was delivered: nothing charged)."""
    p = opened.prepared
    text, tokens, finish = [], 0, None
    try:
        for piece in completions.completion_pieces(opened):
            text.append(piece.text)
            tokens, finish = piece.completion_tokens, piece.finish_reason or finish
    except Exception as exc:
        completions.completion_finish(
            opened=opened, completion_tokens=0, text="", finish_reason="error", error=f"{type(exc).__name__}: {exc}"
        )
        status, code = (504, "backend_timeout") if isinstance(exc, TimeoutError) else (502, "backend_error")
        raise ApiError(code, "The model server failed; nothing was charged.", status) from exc
    completions.completion_finish(
        opened=opened, completion_tokens=tokens, text="".join(text), finish_reason=_finish_reason(finish)
    )
    usage = _usage(p.prompt_tokens, min(tokens, p.max_tokens))
    return _answer(p.chat, opened.id, opened.created, p.app.slug, "".join(text), _finish_reason(finish), usage)


def _replay(result: CallResult, prepared: completions.Prepared) -> Any:
    """The stored answer of an earlier success with the same ``Idempotency-Key``, as JSON or as one SSE chunk."""
    out = completions.replay_output(result.call)
    usage = out.get("usage") or _usage(prepared.prompt_tokens, result.call.billed_tokens or 0)
    id_, created, text, finish = (
        out.get("id", ""),
        int(out.get("created") or 0),
        str(out.get("text") or ""),
        out.get("finish_reason"),
    )
    finish = _finish_reason(finish)
    model, chat = prepared.app.slug, prepared.chat
    if not prepared.stream:
        return Response(_answer(chat, id_, created, model, text, finish, usage), headers={"X-Replayed": "true"})

    def body() -> Iterator[bytes]:
        if chat:
            yield _sse(_chunk(chat, id_, created, model, None, None))
        chunk = _chunk(chat, id_, created, model, text, finish)
        chunk["usage"] = usage
        yield _sse(chunk)
        yield _sse("[DONE]")

    return _event_stream(body(), replayed=True)


def _event_stream(body: Iterator[bytes], *, replayed: bool = False) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # proxies (nginx) pass each chunk on at once
    if replayed:
        response["X-Replayed"] = "true"
    return response


class _Completions(OpenAIView):
    throttle_classes = [InvokeThrottle]
    chat = False
    request_serializer: type[serializers.Serializer[dict[str, Any]]] = CompletionRequest

    def post(self, request: AuthedRequest) -> Any:
        org = request_organization(request)
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.APP_MAX_REQUEST_BYTES:
            raise ApiError("body_too_large", f"the request body exceeds {settings.APP_MAX_REQUEST_BYTES} bytes", 413)
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            raise CompletionRefused("The body must be a JSON object.", code="invalid_request")
        s = self.request_serializer(data=data)
        s.is_valid(raise_exception=True)
        body = {**s.validated_data}
        prepared = completions.completion_prepare(organization=org, user=request.user, body=body, chat=self.chat)
        opened = completions.completion_open(
            prepared=prepared, idempotency_key=request.headers.get("Idempotency-Key") or None
        )
        if isinstance(opened, CallResult):
            return _replay(opened, prepared)
        if prepared.stream:
            return _event_stream(_stream(opened))
        return Response(_whole(opened))


_IDEMPOTENCY = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False, description="a retry answers the first result"
)
# JSON, or server-sent events with ``stream: true``
_ANSWERS: dict[Any, Any] = {(200, "application/json"): dict[str, Any], (200, "text/event-stream"): OpenApiTypes.STR}
_STREAM_NOTE = (
    " With `stream: true` the answer is `text/event-stream`: one chunk per token, the usage on the last one, then"
    " `data: [DONE]`. The hold for `max_tokens` is taken before the first byte; the call is charged for the"
    " tokens sent (prompt + completion × the app's prices per 1,000 tokens, plus its price per call), nothing when"
    " no token was produced."
)


class Completions(_Completions):
    """OpenAI ``POST /v1/completions`` of a model app."""

    @extend_schema(
        operation_id="openai_completions_create",
        request=CompletionRequest,
        parameters=[_IDEMPOTENCY],
        responses=_ANSWERS,
        description="A text completion of a model app (OpenAI's completions API)." + _STREAM_NOTE,
    )
    def post(self, request: AuthedRequest) -> Any:
        return super().post(request)


class ChatCompletions(_Completions):
    """OpenAI ``POST /v1/chat/completions`` of a model app."""

    chat = True
    request_serializer = ChatCompletionRequest

    @extend_schema(
        operation_id="openai_chat_completions_create",
        request=ChatCompletionRequest,
        parameters=[_IDEMPOTENCY],
        responses=_ANSWERS,
        description="A chat completion of a model app (OpenAI's chat completions API; the messages are rendered"
        " with the model's chat template)." + _STREAM_NOTE,
    )
    def post(self, request: AuthedRequest) -> Any:
        return super().post(request)


def _card(app: Any, version: Any) -> dict[str, Any]:
    from instances.serving.prompting import load_model_text

    try:
        context: int | None = load_model_text(version.artifact_path).context_length
    except OSError:
        context = None
    return {
        "id": app.slug,
        "object": "model",
        "created": int(app.created_at.timestamp()),
        "owned_by": app.publisher.slug,
        "name": app.name,
        "max_model_len": context,
        "max_tokens": completions.max_tokens_limit(app),
        "pricing": {
            "currency": "CNY",
            "per_call": str(from_micros(app.price_per_call_micros)),
            "per_1k_prompt_tokens": str(from_micros(app.price_per_1k_prompt_tokens_micros)),
            "per_1k_completion_tokens": str(from_micros(app.price_per_1k_tokens_micros)),
        },
    }


class Models(OpenAIView):
    """OpenAI ``GET /v1/models``: the model apps your organization may call, with their prices (CNY)."""

    @extend_schema(operation_id="openai_models_list", responses={200: dict[str, Any]})
    def get(self, request: Request) -> Response:
        org = request_organization(request)
        return Response({"object": "list", "data": [_card(a, v) for a, v in completions.model_apps(org)]})


class ModelDetail(OpenAIView):
    """OpenAI ``GET /v1/models/{model}``."""

    @extend_schema(operation_id="openai_models_retrieve", responses={200: dict[str, Any]})
    def get(self, request: Request, model: str) -> Response:
        app, version = completions.model_for(request_organization(request), model)
        return Response(_card(app, version))
