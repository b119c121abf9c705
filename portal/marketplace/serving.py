"""The one module that forwards app calls to serving backends.

Kinds: ``external`` — POST JSON to the publisher's HTTPS endpoint with ``X-Portal-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` (the scheme Stripe uses for webhooks, so
publishers can verify with any Stripe-style helper) and ``X-Portal-Call-Id``; ``echo`` — returns
``{"output": <input>}`` in-process (demos and the overhead benchmark); ``checkpoint`` — a model served by
an inference deployment of the instances app (``instances.serving``).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.utils.translation import gettext as _

from portal.lib import strictjson
from portal.marketplace.choices import ServingKind
from portal.marketplace.models import AppVersion


class BackendTimeout(Exception):
    """The backend did not answer within the timeout."""


class BackendError(Exception):
    """The backend answered with an error status or something that is not JSON."""


def endpoint_check(url: str) -> None:
    """Refuse endpoints whose host is, or resolves to, an address that is not globally routable
    (loopback, private, link-local such as cloud metadata 169.254.169.254, reserved): the portal must not
    be usable to reach its own network (SSRF). ``APP_ALLOW_HTTP_ENDPOINTS`` (development and tests only)
    lifts the rule. Raises ``BackendError`` naming the host."""
    if settings.APP_ALLOW_HTTP_ENDPOINTS:
        return
    host = urlsplit(url).hostname
    if not host:
        raise BackendError(_("The endpoint URL has no host."))
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as exc:
        raise BackendError(_("The endpoint host %(h)s does not resolve.") % {"h": host}) from exc
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise BackendError(
                _("The endpoint host %(h)s is not a public address (%(a)s).") % {"h": host, "a": address}
            )


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """``t=…,v1=…`` signature header for ``body``."""
    ts = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={ts},v1={mac}"


def forward(*, version: AppVersion, payload: dict[str, Any], call_id: int, timeout_s: float) -> dict[str, Any]:
    """Send ``payload`` to the version's backend and return its JSON object answer.

    Raises ``BackendTimeout`` or ``BackendError``; never returns a non-dict.
    """
    if version.kind == ServingKind.ECHO:
        return {"output": payload}
    if version.kind == ServingKind.EXTERNAL:
        endpoint_check(version.endpoint_url)  # again at call time: DNS may have changed
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Portal-Call-Id": str(call_id),
            "X-Portal-Signature": sign(version.hmac_secret, body),
        }
        try:
            response = requests.post(
                version.endpoint_url, data=body, headers=headers, timeout=timeout_s, allow_redirects=False
            )
        except requests.Timeout as exc:
            raise BackendTimeout(_("no answer within %(s)s s") % {"s": f"{timeout_s:g}"}) from exc
        except requests.RequestException as exc:
            raise BackendError(_("endpoint unreachable: %(e)s") % {"e": exc.__class__.__name__}) from exc
        if response.status_code >= 400:
            raise BackendError(_("endpoint answered HTTP %(c)d") % {"c": response.status_code})
        try:
            data = strictjson.loads(response.content)
        except (ValueError, RecursionError) as exc:
            raise BackendError(_("endpoint answered something that is not JSON")) from exc
        if not isinstance(data, dict):
            raise BackendError(_("endpoint answered JSON that is not an object"))
        return data
    if version.kind == ServingKind.CHECKPOINT:
        from instances import serving as model_serving  # the instances app's serving interface (keep lazy)

        try:
            return model_serving.generate(deployment=version.deployment, payload=payload, timeout_s=timeout_s)
        except TimeoutError as exc:
            raise BackendTimeout(f"no answer within {timeout_s:g} s") from exc
        except (OSError, ValueError, RuntimeError) as exc:
            raise BackendError(f"model server error: {exc}") from exc
    raise BackendError(f"unknown serving kind {version.kind}")
