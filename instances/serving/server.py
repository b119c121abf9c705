"""The model server: ``python -m instances.serving.server serve --model-dir D --port P`` serves an export over
HTTP (``GET /healthz``; ``POST /generate`` ``{"text": str, "max_new_tokens": int}`` → ``{"output": <generated
continuation>, "tokens": n}``, greedy decoding, one generation at a time). Started by module name by both
deployment backends (a local process, a Kubernetes pod). Never imports Django (a test checks it)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from instances.serving.base import DEFAULT_NEW_TOKENS, EXPORT_INFO, MAX_BODY_BYTES, MAX_NEW_TOKENS, TOKENIZER_FILE

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


REPETITION_PENALTY = 1.3  # CTRL's penalty (Keskar et al., 2019); 1.0 = plain greedy, which loops on small models


class Generator:
    """A loaded export: ``generate(text, max_new_tokens) -> (output text, new token count)``.

    Decoding is greedy (deterministic) over logits with a repetition penalty (``REPETITION_PENALTY``). The
    prompt is cut to its last ``max_position_embeddings - max_new_tokens`` tokens. Calls are serialized
    (one model, one generation at a time). Raises ``ValueError`` for an empty text or a bad token count.

    ``device``: ``cpu``, ``cuda`` or ``cuda:<n>``; by default ``INFERENCE_DEVICE`` from the environment, else
    the first GPU when PyTorch sees one (a pod that requests ``nvidia.com/gpu`` uses it), else the CPU. Weights
    stay float32 on every device, so a GPU answers with the same greedy text as the CPU (seen on an H200:
    ``benchmarks/gpu_check.py``).
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str],
        repetition_penalty: float = REPETITION_PENALTY,
        device: str | None = None,
    ) -> None:
        import torch
        from tokenizers import Tokenizer
        from transformers import AutoModelForCausalLM

        self.dir = Path(model_dir)
        self.info = json.loads((self.dir / EXPORT_INFO).read_text(encoding="utf-8"))
        self.tokenizer = Tokenizer.from_file(str(self.dir / TOKENIZER_FILE))
        self.device = torch.device(
            device or os.environ.get("INFERENCE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
        )
        model: Any = AutoModelForCausalLM.from_pretrained(self.dir, local_files_only=True, dtype=torch.float32)
        model.to(self.device)
        model.eval()
        self.model = model
        self.torch = torch
        self.lock = threading.Lock()
        self.repetition_penalty = repetition_penalty

    def generate(self, text: Any, max_new_tokens: Any) -> tuple[str, int]:
        """Checks its arguments itself: they come straight from a request body."""
        if not isinstance(text, str) or not text:
            raise ValueError("text must be a non-empty string")
        if (
            isinstance(max_new_tokens, bool)
            or not isinstance(max_new_tokens, int)
            or not (1 <= max_new_tokens <= MAX_NEW_TOKENS)
        ):
            raise ValueError(f"max_new_tokens must be an integer from 1 to {MAX_NEW_TOKENS}")
        ids = self.tokenizer.encode(text).ids
        room = int(self.info["max_position_embeddings"]) - max_new_tokens
        ids = ids[-room:] or [int(self.info.get("eos_id") or 0)]
        with self.lock, self.torch.no_grad():
            inputs = self.torch.tensor([ids], dtype=self.torch.long, device=self.device)
            out = self.model.generate(
                inputs,
                attention_mask=self.torch.ones_like(inputs),
                do_sample=False,
                max_new_tokens=max_new_tokens,
                min_new_tokens=1,
                repetition_penalty=self.repetition_penalty,
            )
        new = out[0, len(ids) :].tolist()
        eos = self.info.get("eos_id")
        if eos is not None and eos in new:
            new = new[: new.index(eos)]
        return self.tokenizer.decode(new), len(new)


def make_server(model_dir: str, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP server for ``model_dir`` bound to ``host:port`` (0 = any free port); not yet serving."""
    gen = Generator(model_dir)

    class Handler(BaseHTTPRequestHandler):
        server_version = "gpu-portal-inference/1"

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path != "/healthz":
                self._send(404, {"error": "not found"})
                return
            self._send(
                200,
                {"ok": True, "step": gen.info.get("step"), "model": gen.info.get("model"), "device": str(gen.device)},
            )

        def do_POST(self) -> None:
            if self.path != "/generate":
                self._send(404, {"error": "not found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, {"error": f"body larger than {MAX_BODY_BYTES} bytes"})
                return
            try:
                body = json.loads(self.rfile.read(length) or b"null")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                text, n = gen.generate(body.get("text"), body.get("max_new_tokens", DEFAULT_NEW_TOKENS))
            except ValueError as exc:
                self._send(400, {"error": str(exc)})
                return
            except Exception as exc:
                self._send(500, {"error": f"{type(exc).__name__}: {exc}"})
                return
            self._send(200, {"output": text, "tokens": n})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ThreadingHTTPServer((host, port), Handler)


def serve(model_dir: str, host: str, port: int, ready_file: str | None = None) -> None:
    """Serve until SIGTERM/SIGINT. Writes ``{"port", "pid"}`` to ``ready_file`` (atomically) once listening."""
    httpd = make_server(model_dir, host, port)
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
    httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m instances.serving.server", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="serve an exported model over HTTP (POST /generate, GET /healthz)")
    s.add_argument("--model-dir", required=True)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8080, help="0 = any free port")
    s.add_argument("--ready-file", default=None, help="written with the bound port once serving")
    args = parser.parse_args(argv)
    serve(args.model_dir, args.host, args.port, args.ready_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
