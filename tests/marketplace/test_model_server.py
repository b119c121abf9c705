"""The local model server (``instances.serving.server``) as a client sees it: the OpenAI API shape vLLM serves,
requests batched (continuous batching with a KV cache), streamed token by token, and cancelled when the client
goes away. A real server process (``LocalDeployments``) of the tiny model the runtime trained on the legal
corpus; the clients are plain HTTP on loopback. Throughput is measured by ``benchmarks/serving_bench.py``, not
here (no timed assertion)."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

pytestmark = pytest.mark.slow
PROMPTS = ["第一条 为了规范合同行为", "第二条 本法所称", "中华人民共和国", "第十条 当事人订立合同，有书面形式"]


@pytest.fixture(scope="module")
def server(tiny_model: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Any:
    from instances.serving import LocalDeployments

    backend = LocalDeployments(tmp_path_factory.mktemp("server"))
    deployment = backend.start(name="legal", model_dir=tiny_model["export"])
    yield deployment
    backend.stop(deployment)


def call(deployment: dict[str, Any], path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    url = f"{deployment['url']}{path}"
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})  # noqa: S310
    with urllib.request.urlopen(request, timeout=120) as r:  # noqa: S310 - our own server on loopback
        raw = r.read()
    return json.loads(raw) if not raw.startswith(b"data:") else raw


def events(raw: bytes) -> list[Any]:
    out = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            out.append(block[6:] if block[6:] == "[DONE]" else json.loads(block[6:]))
    return out


def test_sixteen_concurrent_streams_are_batched_and_each_equals_its_answer_alone(server: Any) -> None:
    body = {"model": "legal", "max_tokens": 24, "temperature": 0}
    alone = [call(server, "/v1/completions", {**body, "prompt": p})["choices"][0]["text"] for p in PROMPTS]
    before = call(server, "/stats")["steps"]
    results: dict[int, list[Any]] = {}

    def client(i: int) -> None:
        raw = call(server, "/v1/completions", {**body, "prompt": PROMPTS[i % 4], "stream": True,
                                               "stream_options": {"include_usage": True}})  # fmt: skip
        results[i] = events(raw)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(results) == list(range(16))
    for i, stream in results.items():
        assert stream[-1] == "[DONE]" and stream[-2]["choices"] == []
        tokens = stream[:-2]
        assert len(tokens) == stream[-2]["usage"]["completion_tokens"]  # one chunk per token
        assert "".join(e["choices"][0]["text"] for e in tokens) == alone[i % 4]
    stats = call(server, "/stats")
    assert stats["largest_batch"] >= 8  # the requests were generated together, not one after another
    assert stats["steps"] - before < 16 * 24  # fewer steps than tokens: one step served many requests


def test_a_client_that_goes_away_is_cancelled_within_one_batch_step(tiny_model: Any, tmp_path: Any) -> None:
    from instances.serving import LocalDeployments

    backend = LocalDeployments(tmp_path, min_step_ms=300)
    deployment = backend.start(name="paced", model_dir=tiny_model["export"])
    try:
        port = deployment["port"]
        body = json.dumps({"prompt": PROMPTS[0], "max_tokens": 100, "temperature": 0, "stream": True}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"X-Request-Id: gone-after-3\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
                         + body)  # fmt: skip
            received = b""
            while received.count(b"data: {") < 3:
                chunk = sock.recv(65536)
                assert chunk, received
                received += chunk
        deadline = time.monotonic() + 10
        while True:
            seen = [r for r in call(deployment, "/stats")["requests"] if r["id"] == "gone-after-3"]
            if seen or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(seen) == 1 and seen[0]["finish_reason"] == "cancelled"
        assert seen[0]["cancelled_at_tokens"] >= 3 and seen[0]["tokens_after_cancel"] <= 1
        assert seen[0]["completion_tokens"] <= 4
    finally:
        backend.stop(deployment)


def test_it_speaks_the_openai_shape_and_refuses_bad_requests_with_openai_errors(server: Any) -> None:
    assert call(server, "/health")["ok"] is True
    models = call(server, "/v1/models")
    assert [m["id"] for m in models["data"]] == ["legal"] and models["data"][0]["max_model_len"] == 2048
    chat = call(server, "/v1/chat/completions", {"model": "legal", "messages": [{"role": "user", "content": "合同"}],
                                                 "max_tokens": 5, "temperature": 0})  # fmt: skip
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] <= 5 and chat["usage"]["prompt_tokens"] > 0
    stopped = call(server, "/v1/completions", {"prompt": PROMPTS[0], "max_tokens": 20, "temperature": 0,
                                               "stop": ["、"]})  # fmt: skip
    assert "、" not in stopped["choices"][0]["text"]
    for body, status, code, param in (
        ({"model": "other", "prompt": "a"}, 404, "model_not_found", "model"),
        ({"prompt": "a", "n": 2}, 400, "invalid_request", "n"),
        ({"prompt": [5] * 2048}, 400, "context_length_exceeded", "prompt"),
        ({"prompt": "a", "max_tokens": 0}, 400, "invalid_request", "max_tokens"),
        ({"messages": [{"role": "robot", "content": "x"}]}, 400, "invalid_request", "messages[0].role"),
    ):
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        with pytest.raises(urllib.error.HTTPError) as refused:
            call(server, path, body)
        error = json.loads(refused.value.read())["error"]
        assert (refused.value.code, error["code"], error["param"]) == (status, code, param), error
