"""Calling a deployment: ``generate`` POSTs a request to its URL, ``healthy`` asks ``/healthz``."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


def generate(*, deployment: dict[str, Any], payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """POST ``payload`` to ``<deployment["url"]>/generate`` and return the server's JSON object.

    Raises ``TimeoutError`` when no answer comes within ``timeout_s`` seconds, ``RuntimeError`` for an error
    status or an answer that is not a JSON object (message carries the server's error), ``OSError`` when the
    server cannot be reached, ``ValueError`` for a deployment without a URL.
    """
    url = str(deployment.get("url") or "")
    if not url:
        raise ValueError("the deployment has no URL (not started)")
    body = json.dumps(payload, ensure_ascii=False).encode()
    request = urllib.request.Request(  # noqa: S310 - an http:// URL of our own deployment
        f"{url.rstrip('/')}/generate", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - our own server
            raw = response.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read()[:500].decode(errors="replace")
        raise RuntimeError(f"model server answered HTTP {exc.code}: {detail}") from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise TimeoutError(f"no answer within {timeout_s:g} s") from exc
        raise OSError(f"model server unreachable: {exc.reason}") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise RuntimeError("model server answered something that is not JSON") from exc
    if not isinstance(data, dict):
        raise RuntimeError("model server answered JSON that is not an object")
    return data


def healthy(deployment: dict[str, Any], timeout_s: float = 2.0) -> bool:
    """True when ``GET <url>/healthz`` answers 200 within ``timeout_s``."""
    url = str(deployment.get("url") or "")
    if not url:
        return False
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/healthz", timeout=timeout_s) as r:  # noqa: S310
            return r.status == 200
    except (OSError, ValueError):
        return False
