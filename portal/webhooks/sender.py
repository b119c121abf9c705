"""The one module that talks to webhook receivers: signs a body and POSTs it through the portal's one door for
outgoing calls (``portal.lib.egress``: the address checked at every attempt and connected to as checked,
redirects not followed, one deadline for the whole attempt). Tests point it at loopback servers; nothing else
in the app opens a connection to a receiver."""

from __future__ import annotations

import hashlib
import hmac
import time
from dataclasses import dataclass

from portal.lib import egress

USER_AGENT = "gpu-portal-webhooks/1"
EXCERPT_BYTES = 500

# What a failed attempt records (English, shown as technical text): the same words whatever went wrong on the
# way, so that the delivery log cannot be used to tell an open port from a closed one, or to map a network.
REFUSED = "could not deliver: the endpoint's address is not allowed"
NO_ANSWER = "could not deliver: no complete answer within {s:g} s"
HTTP_ERROR = "could not deliver: HTTP {c}"
REDIRECT = "could not deliver: HTTP {c} (redirects are not followed)"


def signature_header(secrets: list[str], body: bytes, timestamp: int) -> str:
    """``t=<timestamp>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` with one ``v1`` entry per secret, newest
    first — Stripe's ``Stripe-Signature`` scheme (https://docs.stripe.com/webhooks#verify-manually)."""
    signed = f"{timestamp}.".encode() + body
    macs = [hmac.new(s.encode(), signed, hashlib.sha256).hexdigest() for s in secrets]
    return ",".join([f"t={timestamp}", *(f"v1={m}" for m in macs)])


@dataclass(frozen=True)
class SendResult:
    """What one POST got: the HTTP status (None when no complete answer came), milliseconds from the start of
    the attempt to its end (0 when the address was refused and nothing was sent), an error text ("" for a 2xx;
    one of the texts above otherwise) and the first ``EXCERPT_BYTES`` of the response body."""

    status_code: int | None
    response_ms: int
    error: str
    excerpt: str

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300 and not self.error


def post(
    *, url: str, body: bytes, headers: dict[str, str], timeout_s: float, started: float | None = None
) -> SendResult:
    """POST ``body`` to ``url`` so that the attempt ends ``timeout_s`` seconds after ``started``
    (``time.perf_counter()``; default now) whatever happens: lookup, connect, headers and the first
    ``EXCERPT_BYTES`` of the body together; a receiver still sending then is cut, and nothing is sent once that
    time has passed. Never raises for network failures: they come back as ``error``."""
    started = time.perf_counter() if started is None else started
    remaining = timeout_s - (time.perf_counter() - started)
    if remaining <= 0:
        return SendResult(None, _ms(started), NO_ANSWER.format(s=timeout_s), "")
    try:
        answer = egress.post(
            url,
            body=body,
            headers={**headers, "User-Agent": USER_AGENT},
            timeout_s=remaining,
            max_body_bytes=EXCERPT_BYTES,
        )
    except egress.EgressRefused:
        return SendResult(None, 0, REFUSED, "")
    except egress.EgressFailed:
        return SendResult(None, _ms(started), NO_ANSWER.format(s=timeout_s), "")
    code = answer.status
    excerpt = answer.body[:EXCERPT_BYTES].decode("utf-8", errors="replace").replace("\x00", "")
    if 200 <= code < 300:
        error = ""
    elif 300 <= code < 400:
        error = REDIRECT.format(c=code)
    else:
        error = HTTP_ERROR.format(c=code)
    return SendResult(code, _ms(started), error, excerpt)


def _ms(started: float) -> int:
    return max(0, round((time.perf_counter() - started) * 1000))
