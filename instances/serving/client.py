"""Calling a deployment — the local model server or a vLLM Deployment, which speak the same OpenAI API shape.

- :func:`stream_completion` opens ``POST <url>/v1/completions`` with ``stream: true`` and gives its server-sent
  events one by one (:class:`CompletionStream`); the portal's OpenAI-compatible API proxies it.
- :func:`generate` answers an app's ``invoke`` body ``{"text", "max_new_tokens"}`` with ``{"output", "tokens"}``
  through the same endpoint (greedy, at least one token; the prompt cut to its last tokens that leave room for
  the answer, as the first server did).
- :func:`healthy` asks ``GET <url>/health`` (vLLM's health endpoint; the local server answers it too).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from instances.serving.base import DEFAULT_NEW_TOKENS, MAX_NEW_TOKENS

HEALTH_PATH = "/health"


class UpstreamError(RuntimeError):
    """The model server refused a request (``status``, its OpenAI error ``code``, ``param`` and message)."""

    def __init__(self, status: int, message: str, code: str = "", param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


class CompletionStream:
    """An open streamed completion: iterate it for the chunks (dicts) up to ``data: [DONE]``; :meth:`close` ends the
    connection at once (from any thread: a blocked read returns), which tells the server to stop generating.

    Raises ``TimeoutError`` when no byte comes within the timeout, ``OSError`` when the connection breaks, and
    ``UpstreamError`` for an ``error`` event in the stream."""

    def __init__(self, connection: http.client.HTTPConnection, response: http.client.HTTPResponse) -> None:
        self._connection, self._response = connection, response
        self.done = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        data: list[bytes] = []
        while True:
            try:
                line = self._response.readline()
            except TimeoutError as exc:
                raise TimeoutError("the model server sent nothing within the timeout") from exc
            except (http.client.HTTPException, ValueError) as exc:  # a broken chunked body, a closed response
                raise OSError(f"the model server's stream broke: {exc}") from exc
            if not line:
                raise OSError("the model server closed the stream before [DONE]")
            line = line.rstrip(b"\r\n")
            if line.startswith(b"data:"):
                data.append(line[5:].lstrip())
                continue
            if line or not data:
                continue  # a comment, another field, or a blank line without data
            payload, data = b"\n".join(data), []
            if payload == b"[DONE]":
                self.done = True
                return
            try:
                event = json.loads(payload)
            except ValueError as exc:
                raise OSError("the model server sent an event that is not JSON") from exc
            if isinstance(event, dict) and isinstance(event.get("error"), dict):
                error = event["error"]
                raise UpstreamError(500, str(error.get("message") or "error"), str(error.get("code") or ""))
            if isinstance(event, dict):
                yield event

    def close(self) -> None:
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            self._response.close()
        with contextlib.suppress(Exception):
            self._connection.close()


def _split(url: str) -> tuple[str, int, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"a deployment URL is http://host[:port] (got {url!r})")
    return parts.hostname, parts.port or 80, parts.path.rstrip("/")


def stream_completion(
    *, deployment: dict[str, Any], body: dict[str, Any], timeout_s: float, request_id: str = ""
) -> CompletionStream:
    """Open a streamed ``/v1/completions`` of ``body`` (``model`` set to the deployment's ``served_model``, usage
    in every chunk: ``stream_options.continuous_usage_stats``) and return it once the server answered 200.

    ``timeout_s`` bounds the connection and each wait for a byte. Raises ``UpstreamError`` for a refusal (its
    status and OpenAI error), ``TimeoutError``, ``OSError`` when it cannot be reached, ``ValueError`` for a
    deployment without a URL."""
    url = str(deployment.get("url") or "")
    if not url:
        raise ValueError("the deployment has no URL (not started)")
    host, port, prefix = _split(url)
    payload = {**body, "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    payload.pop("model", None)
    if deployment.get("served_model"):  # vLLM needs it; a local server of an older record serves any name
        payload["model"] = deployment["served_model"]
    data = json.dumps(payload, ensure_ascii=False).encode()
    connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    if request_id:
        headers["X-Request-Id"] = request_id
    try:
        connection.request("POST", f"{prefix}/v1/completions", body=data, headers=headers)
        response = connection.getresponse()
    except TimeoutError as exc:
        connection.close()
        raise TimeoutError(f"no answer within {timeout_s:g} s") from exc
    except OSError as exc:
        connection.close()
        raise OSError(f"model server unreachable: {exc}") from exc
    if response.status != 200:
        raw = response.read(65536)
        connection.close()
        message, code, param = raw[:500].decode(errors="replace"), "", None
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            error = json.loads(raw)["error"]
            message, code, param = str(error.get("message")), str(error.get("code") or ""), error.get("param")
        raise UpstreamError(response.status, message, code, param)
    return CompletionStream(connection, response)


def generate(*, deployment: dict[str, Any], payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Answer an invoke ``payload`` ``{"text": str, "max_new_tokens": int}`` (default ``DEFAULT_NEW_TOKENS``, at
    most ``MAX_NEW_TOKENS``) with ``{"output": <generated continuation>, "tokens": <completion tokens>}``: greedy,
    at least one token, the prompt's last tokens that leave room for ``max_new_tokens``.

    Raises ``ValueError`` for a bad payload or a deployment without a URL, ``TimeoutError``, ``OSError`` (the server
    cannot be reached or the stream broke) and ``RuntimeError`` for a refusal (message carries the server's error).
    """
    from instances.serving.prompting import load_model_text

    text, wanted = payload.get("text"), payload.get("max_new_tokens", DEFAULT_NEW_TOKENS)
    if not isinstance(text, str) or not text:
        raise ValueError("text must be a non-empty string")
    if isinstance(wanted, bool) or not isinstance(wanted, int) or not 1 <= wanted <= MAX_NEW_TOKENS:
        raise ValueError(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}")
    model = load_model_text(str(deployment.get("model_dir") or ""))
    ids = model.encode(text)[-(model.context_length - wanted) :] or [model.eos_id or 0]
    body = {"prompt": ids, "max_tokens": wanted, "temperature": 0, "min_tokens": 1}
    try:
        stream = stream_completion(deployment=deployment, body=body, timeout_s=timeout_s)
    except UpstreamError as exc:
        raise RuntimeError(f"model server answered HTTP {exc.status}: {exc}") from exc
    parts, tokens = [], 0
    try:
        for chunk in stream:
            for choice in chunk.get("choices") or []:
                parts.append(str(choice.get("text") or ""))
            usage = chunk.get("usage") or {}
            tokens = int(usage.get("completion_tokens") or tokens)
    except UpstreamError as exc:
        raise RuntimeError(f"model server error: {exc}") from exc
    finally:
        stream.close()
    return {"output": "".join(parts), "tokens": tokens}


def healthy(deployment: dict[str, Any], timeout_s: float = 2.0) -> bool:
    """True when ``GET <url>/health`` answers 200 within ``timeout_s``."""
    url = str(deployment.get("url") or "")
    if not url:
        return False
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}{HEALTH_PATH}", timeout=timeout_s) as r:  # noqa: S310
            return r.status == 200
    except (OSError, ValueError, urllib.error.URLError):
        return False
