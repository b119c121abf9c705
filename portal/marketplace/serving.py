"""The one module that forwards app calls to serving backends.

Kinds: ``external`` — POST JSON to the publisher's HTTPS endpoint with ``X-Portal-Signature:
t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`` (the scheme Stripe uses for webhooks, so
publishers can verify with any Stripe-style helper) and ``X-Portal-Call-Id``, through the portal's one door
for outgoing calls (``portal.lib.egress``: the address checked at every call and connected to as checked,
redirects not followed, one deadline of ``APP_CALL_TIMEOUT_S`` for the whole call, at most
``APP_MAX_RESPONSE_BYTES`` of the answer read); ``echo`` — returns
``{"output": <input>}`` in-process (demos and the overhead benchmark); ``checkpoint`` — a model served by
an inference deployment of the instances app (``instances.serving``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from portal.lib import egress, strictjson
from portal.marketplace.choices import ServingKind
from portal.marketplace.models import AppVersion


class BackendTimeout(Exception):
    """The backend did not answer within the timeout."""


class BackendError(Exception):
    """The backend answered with an error status or something that is not JSON."""


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
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
        headers = {
            "Content-Type": "application/json",
            "X-Portal-Call-Id": str(call_id),
            "X-Portal-Signature": sign(version.hmac_secret, body),
        }
        limit = int(settings.APP_MAX_RESPONSE_BYTES)
        try:  # the guard again at call time (DNS may have changed), then the checked address, one deadline
            answer = egress.post(
                version.endpoint_url, body=body, headers=headers, timeout_s=timeout_s, max_body_bytes=limit + 1
            )
        except egress.EgressRefused as exc:
            raise BackendError(_("could not reach the app's endpoint: its address is not allowed")) from exc
        except egress.EgressFailed as exc:  # refused, reset, silent or trickling: one text for all
            raise BackendTimeout(_("no complete answer within %(s)s s") % {"s": f"{timeout_s:g}"}) from exc
        if 300 <= answer.status < 400:
            raise BackendError(
                _("the endpoint answered a redirect (HTTP %(c)d), which is not followed") % {"c": answer.status}
            )
        if not 200 <= answer.status < 300:
            raise BackendError(_("endpoint answered HTTP %(c)d") % {"c": answer.status})
        if len(answer.body) > limit:
            raise BackendError(_("the endpoint's answer is larger than %(n)d bytes") % {"n": limit})
        try:
            data = strictjson.loads(answer.body)
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
