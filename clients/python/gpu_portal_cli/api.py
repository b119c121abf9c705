"""The CLI's connection to the portal: the authenticated client, API errors in words, and waiting on a state."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
from gpu_portal_client import AuthenticatedClient

from gpu_portal_cli import config
from gpu_portal_cli.output import StatusLine

# Instance statuses a wait ends on: "running" is reached; "stopped" and "failed" will not become running on
# their own ("preempted" may: the portal resumes it).
TERMINAL = {"stopped", "failed"}


class CliError(Exception):
    """A failure to report on stderr with exit code 1."""


# --- talking to the API ------------------------------------------------------------------------------------


def envelope_message(status: int, content: bytes) -> str:
    """The API's error envelope ``{"error": {"code", "message", "details"}}`` as text for a person:
    ``message (code, HTTP status)`` and one line per detail; a body that is not the envelope is shown raw."""
    try:
        error = json.loads(content)["error"]
        code, message, details = error.get("code", "error"), error.get("message", ""), error.get("details")
    except (ValueError, KeyError, TypeError, AttributeError):
        text = content.decode("utf-8", errors="replace").strip()[:500]
        return f"HTTP {status}" + (f": {text}" if text else "")
    lines = [f"{message} ({code}, HTTP {status})"]
    if isinstance(details, dict):
        for field, value in details.items():
            value = (
                "; ".join(str(v) for v in value)
                if isinstance(value, list)
                else json.dumps(value, default=str)
                if isinstance(value, dict)
                else str(value)
            )
            lines.append(f"  {field}: {value}")
    elif isinstance(details, list):
        lines.extend(f"  {d}" for d in details)
    elif details is not None:
        lines.append(f"  {details}")
    if status == 401:
        lines.append(f"  check {config.TOKEN_ENV} or run `gpu-portal login` again")
    return "\n".join(lines)


class Api:
    """The generated client plus the CLI's error handling: every call returns the response body as a dict
    (the typed model's ``to_dict()``) or raises ``CliError`` with the envelope's text."""

    def __init__(
        self, credentials: config.Credentials, *, organization: str | None = None, timeout_s: float = 30.0
    ) -> None:
        params = {"organization": organization} if organization else {}
        self.url = credentials.url
        self.client = AuthenticatedClient(
            base_url=credentials.url,
            token=credentials.token,
            timeout=httpx.Timeout(timeout_s),
            httpx_args={"params": params},
            headers={"User-Agent": "gpu-portal-cli/0.1"},
        )

    def __call__(self, endpoint: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            response = endpoint.sync_detailed(*args, client=self.client, **kwargs)
        except httpx.TimeoutException:
            raise CliError(f"the portal at {self.url} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise CliError(f"cannot reach the portal at {self.url}: {exc}") from None
        status = int(response.status_code)
        if status >= 400:
            raise CliError(envelope_message(status, response.content))
        if response.parsed is not None:
            parsed = response.parsed
            return parsed.to_dict() if hasattr(parsed, "to_dict") else [p.to_dict() for p in parsed]
        try:  # a 2xx the schema does not describe (yet)
            return json.loads(response.content or b"null")
        except ValueError:
            return None

    def pages(self, endpoint: Any, *, limit: int | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Rows of a cursor-paginated list, following ``next`` until the end or ``limit`` rows."""
        cursor: str | None = None
        count = 0
        while True:
            page = self(endpoint, cursor=cursor, **kwargs) if cursor else self(endpoint, **kwargs)
            for row in page.get("results", []):
                yield row
                count += 1
                if limit is not None and count >= limit:
                    return
            nxt = page.get("next")
            cursor = (parse_qs(urlsplit(nxt).query).get("cursor") or [None])[0] if nxt else None
            if not cursor:
                return


def api_from(args: argparse.Namespace) -> Api:
    try:
        credentials = config.load(url=args.url, token=None)
    except config.NotLoggedIn as exc:
        raise CliError(str(exc)) from None
    return Api(credentials, organization=args.organization)


def wait_for(fetch: Callable[[], dict[str, Any]], *, what: str, timeout_s: float, interval_s: float) -> dict[str, Any]:
    """Poll ``fetch()`` (an instance or job dict) until its ``status`` is ``running``; show each status.
    Raises ``CliError`` when it ends stopped or failed, or after ``timeout_s``."""
    line = StatusLine()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            obj = fetch()
            status = obj.get("status")
            extra = f", queue position {obj['queue_position']}" if obj.get("queue_position") else ""
            reason = f" — {obj['status_reason']}" if obj.get("status_reason") and status != "running" else ""
            line.show(f"{what}: {status}{extra}{reason}")
            if status == "running":
                return obj
            if status in TERMINAL:
                raise CliError(
                    f"{what} is {status}" + (f": {obj.get('status_reason')}" if obj.get("status_reason") else "")
                )
            if time.monotonic() > deadline:
                raise CliError(
                    f"{what} is still {status} after {timeout_s:g} s (it keeps going; check again with `list`)"
                )
            time.sleep(interval_s)
    finally:
        line.done()


def wait_until_stopped(
    fetch: Callable[[], dict[str, Any]], *, what: str, timeout_s: float, interval_s: float
) -> dict[str, Any]:
    line = StatusLine()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            obj = fetch()
            line.show(f"{what}: {obj.get('status')}")
            if obj.get("status") in TERMINAL:
                return obj
            if time.monotonic() > deadline:
                raise CliError(f"{what} is still {obj.get('status')} after {timeout_s:g} s")
            time.sleep(interval_s)
    finally:
        line.done()


# --- commands ----------------------------------------------------------------------------------------------
