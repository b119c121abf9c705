"""The one module that talks to webhook receivers: signs a body and POSTs it (tests point it at a loopback
server; nothing else in the app opens a connection to a receiver)."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

import requests

USER_AGENT = "gpu-portal-webhooks/1"
EXCERPT_BYTES = 500


def signature_header(secrets: list[str], body: bytes, timestamp: int) -> str:
    """``t=<timestamp>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` with one ``v1`` entry per secret, newest
    first — Stripe's ``Stripe-Signature`` scheme (https://docs.stripe.com/webhooks#verify-manually)."""
    signed = f"{timestamp}.".encode() + body
    macs = [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in secrets]
    return ",".join([f"t={timestamp}", *(f"v1={m}" for m in macs)])


@dataclass(frozen=True)
class SendResult:
    """What one POST got: the HTTP status (None when no answer came), milliseconds until the answer (or the
    failure), an error text ("" for a 2xx) and the first ``EXCERPT_BYTES`` of the response body."""

    status_code: int | None
    response_ms: int
    error: str
    excerpt: str

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def post(*, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> SendResult:
    """POST ``body`` to ``url`` without following redirects (a redirect is a failure: it could lead into the
    portal's own network). Never raises for network failures; they come back as ``error``."""
    started = time.perf_counter()
    try:
        with requests.post(
            url,
            data=body,
            headers={**headers, "User-Agent": USER_AGENT},
            timeout=timeout_s,
            allow_redirects=False,
            stream=True,
        ) as response:
            chunk = next(response.iter_content(chunk_size=EXCERPT_BYTES), b"")
            code = response.status_code
    except requests.Timeout:
        return SendResult(None, _ms(started), f"no answer within {timeout_s:g} s", "")
    except requests.ConnectionError as exc:
        return SendResult(None, _ms(started), f"connection failed: {type(exc).__name__}", "")
    except Exception as exc:  # any other failure (a malformed answer, an encoding error) is a failed attempt too
        return SendResult(None, _ms(started), f"request failed: {type(exc).__name__}", "")
    excerpt = chunk[:EXCERPT_BYTES].decode("utf-8", errors="replace").replace("\x00", "")
    error = "" if 200 <= code < 300 else f"HTTP {code}"
    return SendResult(code, _ms(started), error, excerpt)


def _ms(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))
