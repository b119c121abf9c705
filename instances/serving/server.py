"""The local model server: ``python -m instances.serving.server serve --model-dir D --port P`` serves an export
with the OpenAI API shape that vLLM serves, so the portal calls a local server and a vLLM Deployment alike.

Endpoints (as vLLM's OpenAI-compatible server names them):

- ``GET /health`` (and ``/healthz``, the name earlier deployments were checked with): 200 with the export's step,
  model and device once the model is loaded.
- ``GET /v1/models``: the one served model (``--served-model-name``, default the folder's name) with
  ``max_model_len``.
- ``POST /v1/completions`` (``prompt``: a string or token ids) and ``POST /v1/chat/completions`` (``messages``,
  rendered with the export's chat template, ``instances.serving.prompting``): ``max_tokens`` (default: what the
  context leaves), ``temperature`` (default 1), ``top_p``, ``seed``, ``stop``, ``stream``, ``stream_options``
  (``include_usage``; ``continuous_usage_stats`` puts the usage so far in every chunk, as vLLM does),
  ``min_tokens`` and ``repetition_penalty`` (vLLM's extensions; the default penalty is the export's
  ``generation_config.json`` one, else :data:`REPETITION_PENALTY`), ``n`` = 1 only. A streamed answer is
  server-sent events, one chunk per generated token, ending with ``data: [DONE]``; ``usage`` counts prompt and
  completion tokens (the end-of-sequence token included, as vLLM counts it). Errors are
  ``{"error": {"message", "type", "param", "code"}}`` with 400 / 404 / 413.
- ``GET /stats``: the engine's counters and its last finished requests (``instances.serving.engine``), each with
  the tokens it generated after its client went away.

Requests are batched by :class:`instances.serving.engine.Engine` (continuous batching, KV cache). A client that
goes away — its connection closed while its answer is generated — is noticed within ``POLL_S`` and its request
cancelled, so at most the batch step under way generates for it. The request id is the ``X-Request-Id`` header
when sent (the portal sends its call id). Started by module name by both deployment backends' local form (a
process) and by the training image's pods. Never imports Django (a test checks it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import select
import signal
import socket
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from instances.serving.base import EXPORT_INFO, MAX_BODY_BYTES
from instances.serving.engine import FINISH_CANCELLED, FINISH_ERROR, Engine, Event, Request, SamplingParams
from instances.serving.prompting import PromptError, chat_messages, load_model_text

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPETITION_PENALTY = 1.3  # CTRL's penalty (Keskar et al., 2019) for exports that name none: small models loop
POLL_S = 0.01  # how often a waiting handler looks whether its client went away
MAX_STOP = 4  # stop strings per request (OpenAI's limit)
UNSUPPORTED = ("best_of", "logprobs", "top_logprobs", "echo", "suffix", "tools", "functions", "logit_bias")


class BadRequest(Exception):
    """A request the server refuses: ``status``, OpenAI error ``code`` and ``param``."""

    def __init__(self, message: str, *, param: str | None = None, code: str = "invalid_request", status: int = 400):
        super().__init__(message)
        self.param, self.code, self.status = param, code, status


class Model:
    """A loaded export and its engine. ``device``: ``INFERENCE_DEVICE``, else the first GPU PyTorch sees, else the
    CPU; weights stay float32 on every device, so a GPU answers with the same greedy text as the CPU."""

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        *,
        served_name: str | None = None,
        device: str | None = None,
        max_batch: int = 32,
        min_step_s: float = 0.0,
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM

        self.dir = Path(model_dir)
        self.info = json.loads((self.dir / EXPORT_INFO).read_text(encoding="utf-8"))
        self.text = load_model_text(self.dir)
        self.served_name = served_name or self.dir.name
        self.device = torch.device(
            device or os.environ.get("INFERENCE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
        )
        model: Any = AutoModelForCausalLM.from_pretrained(self.dir, local_files_only=True, dtype=torch.float32)
        model.to(self.device)
        model.eval()
        penalty = getattr(model.generation_config, "repetition_penalty", None)
        self.repetition_penalty = float(penalty) if penalty and float(penalty) != 1.0 else REPETITION_PENALTY
        self.engine = Engine(
            model=model,
            decode=self.text.decode,
            eos_id=self.text.eos_id,
            max_context=self.text.context_length,
            device=self.device,
            max_batch=max_batch,
            min_step_s=min_step_s,
        )
        self.engine.start()
        self.created = int(time.time())

    # -- requests ---------------------------------------------------------------------------------------------
    def parse(self, body: dict[str, Any], *, chat: bool) -> tuple[list[int], SamplingParams, dict[str, Any]]:
        """(prompt ids, sampling parameters, options: ``stream``, ``include_usage``, ``continuous_usage``) of a
        request body. Raises ``BadRequest``."""
        model = body.get("model")
        if model is not None and model != self.served_name:
            raise BadRequest(f"The model `{model}` does not exist.", param="model", code="model_not_found", status=404)
        if body.get("n", 1) != 1:
            raise BadRequest("Only n = 1 is supported.", param="n")
        for name in UNSUPPORTED:
            value = body.get(name)
            if value is not None and value is not False and not (name == "best_of" and value == 1):
                raise BadRequest(f"'{name}' is not supported by this server.", param=name)
        if chat:
            try:
                ids = self.text.encode(self.text.render_chat(chat_messages(body.get("messages"))))
            except PromptError as exc:
                raise BadRequest(str(exc), param=exc.param) from exc
        else:
            ids = self._prompt_ids(body.get("prompt"))
        context = self.text.context_length
        if len(ids) >= context:
            raise BadRequest(
                f"This model's maximum context length is {context} tokens; the prompt has {len(ids)}.",
                param="messages" if chat else "prompt",
                code="context_length_exceeded",
            )
        room = context - len(ids)
        max_tokens = body.get("max_completion_tokens") if chat else None
        max_tokens = body.get("max_tokens") if max_tokens is None else max_tokens
        if max_tokens is None:
            max_tokens = room
        if not _int(max_tokens) or max_tokens < 1:
            raise BadRequest("'max_tokens' must be a positive integer.", param="max_tokens")
        if len(ids) + max_tokens > context:
            raise BadRequest(
                f"This model's maximum context length is {context} tokens; the prompt has {len(ids)} and "
                f"max_tokens asks for {max_tokens}.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
        top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
        if top_p <= 0:
            raise BadRequest("'top_p' must be greater than 0.", param="top_p")
        penalty = _number(body, "repetition_penalty", self.repetition_penalty, 0.01, 10.0)
        seed = body.get("seed")
        if seed is not None and not _int(seed):
            raise BadRequest("'seed' must be an integer.", param="seed")
        stop = body.get("stop")
        stops = [stop] if isinstance(stop, str) else stop if stop is not None else []
        if not isinstance(stops, list) or len(stops) > MAX_STOP or not all(isinstance(s, str) and s for s in stops):
            raise BadRequest(f"'stop' must be a string or up to {MAX_STOP} non-empty strings.", param="stop")
        min_tokens = body.get("min_tokens", 0)
        if not _int(min_tokens) or min_tokens < 0:
            raise BadRequest("'min_tokens' must be a non-negative integer.", param="min_tokens")
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise BadRequest("'stream_options' must be an object.", param="stream_options")
        params = SamplingParams(
            max_tokens=int(max_tokens),
            temperature=temperature,
            top_p=top_p,
            seed=int(seed) if seed is not None else None,
            stop=tuple(stops),
            repetition_penalty=penalty,
            min_tokens=int(min_tokens),
        )
        return (
            ids,
            params,
            {
                "stream": body.get("stream") is True,
                "include_usage": options.get("include_usage") is True,
                "continuous_usage": options.get("continuous_usage_stats") is True,
            },
        )

    def _prompt_ids(self, prompt: Any) -> list[int]:
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str) and prompt:
            return self.text.encode(prompt)
        if isinstance(prompt, list) and prompt and all(_int(i) for i in prompt):
            vocab = int(self.engine.vocab)
            if any(not 0 <= int(i) < vocab for i in prompt):
                raise BadRequest(f"Prompt token ids must be in [0, {vocab}).", param="prompt")
            return [int(i) for i in prompt]
        raise BadRequest("'prompt' must be a non-empty string or a non-empty array of token ids.", param="prompt")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(body: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise BadRequest(f"'{name}' must be a number from {low:g} to {high:g}.", param=name)
    return float(value)


def _error(message: str, *, code: str, param: str | None = None, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def make_server(
    model_dir: str,
    host: str,
    port: int,
    *,
    served_name: str | None = None,
    max_batch: int = 32,
    min_step_s: float = 0.0,
) -> ThreadingHTTPServer:
    """The HTTP server for ``model_dir`` bound to ``host:port`` (0 = any free port); not yet serving. Its
    ``model`` attribute is the loaded :class:`Model`."""
    model = Model(model_dir, served_name=served_name, max_batch=max_batch, min_step_s=min_step_s)
    # The engine thread hands the GIL back and forth with the handler threads at every torch call; a shorter
    # switch interval than CPython's 5 ms keeps it from waiting on them (steps are a few milliseconds).
    sys.setswitchinterval(0.0005)

    class Handler(BaseHTTPRequestHandler):
        server_version = "gpu-portal-inference/2"

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path in ("/health", "/healthz"):
                info = model.info
                self._send(
                    200, {"ok": True, "step": info.get("step"), "model": info.get("model"), "device": str(model.device)}
                )
            elif self.path == "/v1/models":
                card = {
                    "id": model.served_name,
                    "object": "model",
                    "created": model.created,
                    "owned_by": "gpu-portal",
                    "max_model_len": model.text.context_length,
                }
                self._send(200, {"object": "list", "data": [card]})
            elif self.path == "/stats":
                self._send(200, model.engine.stats())
            else:
                self._send(404, _error("Not found.", code="not_found"))

        def do_POST(self) -> None:
            chat = self.path == "/v1/chat/completions"
            if not chat and self.path != "/v1/completions":
                self._send(404, _error("Not found.", code="not_found"))
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self._send(413, _error(f"The body must have at most {MAX_BODY_BYTES} bytes.", code="body_too_large"))
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
                if not isinstance(body, dict):
                    raise BadRequest("The body must be a JSON object.")
                ids, params, options = model.parse(body, chat=chat)
                request = model.engine.submit(ids, params, request_id=self.headers.get("X-Request-Id") or "")
            except ValueError as exc:  # bad JSON, or the engine refused the prompt
                self._send(400, _error(str(exc), code="invalid_request"))
                return
            except BadRequest as exc:
                self._send(exc.status, _error(str(exc), code=exc.code, param=exc.param))
                return
            answer = Answer(model, request, chat=chat, **options)
            watcher.watch(self.connection, request)
            try:
                if options["stream"]:
                    self._stream(answer)
                else:
                    self._whole(answer)
            except (BrokenPipeError, ConnectionResetError):
                model.engine.cancel(request)  # the client went away mid-write
            finally:
                watcher.forget(self.connection)

        def _next(self, request: Request) -> Event | None:
            """The request's next event, or None once the client went away (the watcher cancelled the request)."""
            event = request.events.get()
            return None if event.finish_reason == FINISH_CANCELLED else event

        def _whole(self, answer: Answer) -> None:
            while True:
                event = self._next(answer.request)
                if event is None:
                    return
                answer.add(event)
                if event.finish_reason:
                    break
            if event.finish_reason == FINISH_ERROR:
                self._send(500, _error(f"Generation failed: {event.error}", code="server_error", kind="server_error"))
                return
            self._send(200, answer.whole())

        def _stream(self, answer: Answer) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for chunk in answer.opening():
                self._event(chunk)
            finished = False
            while not finished:
                event = self._next(answer.request)
                if event is None:
                    return
                events = [event]  # the tokens already waiting go out in one write
                while not events[-1].finish_reason:
                    try:
                        events.append(answer.request.events.get_nowait())
                    except queue.Empty:
                        break
                out = []
                for event in events:
                    if event.finish_reason == FINISH_CANCELLED:
                        return
                    if event.finish_reason == FINISH_ERROR:
                        error = _error(f"Generation failed: {event.error}", code="server_error", kind="server_error")
                        out.append(_sse(error))
                    else:
                        out.extend(_sse(chunk) for chunk in answer.chunks(event))
                    finished = bool(event.finish_reason)
                self.wfile.write(b"".join(out))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _event(self, payload: dict[str, Any]) -> None:
            self.wfile.write(_sse(payload))
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    watcher = Watcher(model.engine)
    ThreadingHTTPServer.request_queue_size = 128  # 16 clients connecting at once must not overflow the backlog
    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    httpd.model = model  # type: ignore[attr-defined]
    return httpd


class Watcher:
    """One thread that watches the connections of every request being answered (``select.poll``, every
    ``POLL_S``) and cancels the request of a client that went away, so handler threads block on their events
    instead of polling each on its own."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._watched: dict[int, tuple[socket.socket, Request]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="disconnect-watcher", daemon=True).start()

    def watch(self, sock: socket.socket, request: Request) -> None:
        with self._lock:
            self._watched[sock.fileno()] = (sock, request)

    def forget(self, sock: socket.socket) -> None:
        with self._lock:
            self._watched.pop(sock.fileno(), None)

    def _run(self) -> None:
        while True:
            time.sleep(POLL_S)
            with self._lock:
                watched = list(self._watched.values())
            if not watched:
                continue
            try:
                readable, _, _ = select.select([s for s, _ in watched], [], [], 0)
            except (OSError, ValueError):  # a socket closed meanwhile: look at each one
                readable = [s for s, _ in watched]
            for sock, request in watched:
                if sock in readable and _peer_gone(sock):
                    self.engine.cancel(request)


def _sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the client closed its side: the socket reads as end-of-file or was reset (data it sent is left)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class Answer:
    """The OpenAI-shaped answer to one request, built from its engine events (completion or chat completion)."""

    def __init__(
        self, model: Model, request: Request, *, chat: bool, stream: bool, include_usage: bool, continuous_usage: bool
    ) -> None:
        self.model, self.request, self.chat = model, request, chat
        self.include_usage, self.continuous_usage = include_usage, continuous_usage
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.text: list[str] = []
        self.tokens = 0
        self.finish: str | None = None

    def usage(self) -> dict[str, int]:
        prompt = len(self.request.prompt_ids)
        return {"prompt_tokens": prompt, "completion_tokens": self.tokens, "total_tokens": prompt + self.tokens}

    def add(self, event: Event) -> None:
        self.text.append(event.text)
        self.tokens = event.completion_tokens
        self.finish = event.finish_reason or self.finish

    def _base(self) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model.served_name}

    def _choice(self, text: str, finish: str | None) -> dict[str, Any]:
        if self.chat:
            return {"index": 0, "delta": {"content": text} if text else {}, "logprobs": None, "finish_reason": finish}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}

    def opening(self) -> list[dict[str, Any]]:
        """Chat streams start with the assistant's role, as OpenAI's do."""
        if not self.chat:
            return []
        chunk = {
            **self._base(),
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
        }
        if self.continuous_usage:
            chunk["usage"] = self.usage()
        return [chunk]

    def chunks(self, event: Event) -> list[dict[str, Any]]:
        """The chunk of one token (and the usage chunk after the last, when asked for)."""
        self.add(event)
        chunk = {**self._base(), "choices": [self._choice(event.text, event.finish_reason)]}
        if self.continuous_usage:
            chunk["usage"] = self.usage()
        out = [chunk]
        if event.finish_reason and self.include_usage:
            out.append({**self._base(), "choices": [], "usage": self.usage()})
        return out

    def whole(self) -> dict[str, Any]:
        text = "".join(self.text)
        base = {**self._base(), "object": "chat.completion" if self.chat else "text_completion"}
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": self.finish,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": self.finish}
        return {**base, "choices": [choice], "usage": self.usage()}


def serve(
    model_dir: str,
    host: str,
    port: int,
    ready_file: str | None = None,
    *,
    served_name: str | None = None,
    max_batch: int = 32,
    min_step_s: float = 0.0,
) -> None:
    """Serve until SIGTERM/SIGINT. Writes ``{"port", "pid"}`` to ``ready_file`` (atomically) once listening."""
    httpd = make_server(model_dir, host, port, served_name=served_name, max_batch=max_batch, min_step_s=min_step_s)
    bound = int(httpd.server_address[1])

    def stop(signum: int, frame: Any) -> None:
        threading.Thread(target=httpd.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ready_file:
        tmp = f"{ready_file}.tmp"
        Path(tmp).write_text(json.dumps({"port": bound, "pid": os.getpid()}))
        os.replace(tmp, ready_file)
    print(f"serving {model_dir} on http://{host}:{bound}", flush=True)
    httpd.serve_forever()
    with contextlib.suppress(Exception):
        httpd.model.engine.stop()  # type: ignore[attr-defined]
    httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instances.serving.server", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve an exported model with the OpenAI API shape (/v1/..., /health)")
    s.add_argument("--model-dir", required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080, help="0 = any free port")
    s.add_argument("--ready-file", default=None, help="written with the bound port once serving")
    s.add_argument("--served-model-name", default=None, help="the model's id in requests (default: the folder name)")
    s.add_argument("--max-batch", type=int, default=32, help="most requests generated together")
    s.add_argument(
        "--min-step-ms", type=float, default=0.0, help="each batch step lasts at least this long (tests, demos)"
    )
    args = parser.parse_args(argv)
    serve(
        args.model_dir,
        args.host,
        args.port,
        args.ready_file,
        served_name=args.served_model_name,
        max_batch=args.max_batch,
        min_step_s=args.min_step_ms / 1000.0,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
