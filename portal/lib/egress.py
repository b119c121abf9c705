"""The one door for calls to URLs that users give the portal: webhook receivers (``portal.webhooks.sender``) and
external app endpoints (``portal.marketplace.serving``). The portal must not be a way into its own network
(SSRF; the rules follow OWASP's "Server-Side Request Forgery Prevention Cheat Sheet").

- ``url_check`` (at registration and again inside every call): the URL is ``https://`` (``http://`` too with
  ``APP_ALLOW_HTTP_ENDPOINTS``), has a host, and a numeric host is written in the standard form (``a.b.c.d`` or
  IPv6): ``2130706433``, ``0177.0.0.1``, ``0x7f.1`` and ``127.1`` are refused, because ``inet_aton`` and
  therefore ``getaddrinfo`` read them as ``127.0.0.1``. Every address the host resolves to (all A and AAAA
  answers of one lookup) must pass ``address_allowed``; one bad answer refuses the URL.
- ``post`` makes one attempt: the lookup above, then a connection to exactly the addresses that were checked
  (aiohttp's connector with a resolver that answers only those: no second lookup, so a name that answers
  differently the next time — DNS rebinding — changes nothing), with the URL's host name as the ``Host``
  header, TLS SNI and the name the certificate is checked against (``OUTGOING_CA_BUNDLE`` or certifi's
  bundle). Redirects are never followed: a 3xx is an answer like any other and callers count it a failure.
  One deadline covers the whole attempt — lookup, connect, TLS, sending, the status line, headers and body
  (aiohttp's ``ClientTimeout.total``, not a per-read timeout) — and at most ``max_body_bytes`` of the body are
  read. No proxy from the environment, no cookies, no decompression (``Accept-Encoding: identity``).
- ``APP_ALLOW_HTTP_ENDPOINTS`` (development and tests only) lifts the address rule; ``OUTGOING_ALLOWED_NETWORKS``
  (CIDRs) lets an operator allow networks of their own (an on-premises receiver), nothing else.

Errors: ``EgressRefused`` (the URL or an address is not allowed; nothing was sent) and ``EgressFailed`` (no
complete answer within the deadline, whatever the reason: refused or reset connection, silence, a trickle, a
bad certificate). Their messages are for the person who registers a URL; what is recorded after a call
must not tell an open port from a closed one, so callers record fixed texts instead.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import math
import os
import socket
import ssl
import time
from collections.abc import Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import certifi
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult
from django.conf import settings
from django.utils.translation import gettext as _

log = logging.getLogger(__name__)
_T = TypeVar("_T")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix: the last 32 bits are IPv4
LOOKUP_TIMEOUT_S = 10.0  # a registration's lookup; a call's lookup shares the call's deadline
_lookups: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): getaddrinfo cannot be cut, so it runs there


class EgressError(Exception):
    """Base of the two outcomes below; the message is for the person who registers the URL."""


class EgressRefused(EgressError):
    """The URL, or an address its host resolves to, may not be called; nothing was sent."""


class EgressFailed(EgressError):
    """No complete answer within the deadline (any reason; deliberately not told apart)."""


@dataclass(frozen=True)
class Target:
    """A checked URL: ``url`` as parsed once (the same object goes to the client, so both read one host),
    ``host`` as looked up (IDNA, lower case), ``addresses``: every address of the lookup, all allowed, in the
    resolver's order."""

    url: yarl.URL
    host: str
    addresses: tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    """What came back: the HTTP status, the headers, at most ``max_body_bytes`` of the body, and milliseconds
    from the start of the attempt (lookup included) to the end of the read."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    elapsed_ms: int


def address_allowed(address: IPAddress) -> bool:
    """True for an address the portal may call: in ``OUTGOING_ALLOWED_NETWORKS``, or globally reachable and
    not loopback, private, link-local (cloud metadata 169.254.169.254), multicast, reserved, unspecified,
    carrier-grade NAT (100.64.0.0/10, not ``is_global``) or site-local — the properties of ``ipaddress``,
    which follow IANA's special-purpose registries. An IPv6 address that carries an IPv4 one (IPv4-mapped
    ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``, 6to4 ``2002:…``) is judged by that IPv4 address, where its
    packets end up; Teredo and the deprecated IPv4-compatible ``::a.b.c.d`` are refused."""
    allowed = [ipaddress.ip_network(n) for n in settings.OUTGOING_ALLOWED_NETWORKS]
    if any(address.version == n.version and address in n for n in allowed):
        return True
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and address in NAT64:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None:
            return address_allowed(embedded)
        if address.teredo is not None or address.is_site_local:
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_unspecified
    )


def url_parse(url: str) -> yarl.URL:
    """``url`` parsed, if its scheme and host may be called (see the module docstring); else ``EgressRefused``.
    The address rule is ``url_check``'s."""
    try:
        parsed = yarl.URL(url or "")
        host = parsed.raw_host
    except (ValueError, UnicodeError) as exc:
        raise EgressRefused(_("%(u)s is not a valid https:// URL.") % {"u": (url or "")[:100]}) from exc
    schemes = ("https", "http") if settings.APP_ALLOW_HTTP_ENDPOINTS else ("https",)
    if parsed.scheme not in schemes:
        if parsed.scheme == "http":
            raise EgressRefused(_("The endpoint must be an https:// URL."))
        raise EgressRefused(_("%(u)s is not a valid https:// URL.") % {"u": url[:100]})
    if not host:
        raise EgressRefused(_("The endpoint URL has no host."))
    if _literal(host) is None and _legacy_ipv4(host):
        raise EgressRefused(
            _("The endpoint host %(h)s is a number in a non-standard form; write an IPv4 address as a.b.c.d.")
            % {"h": host[:100]}
        )
    return parsed


def url_check(url: str, *, deadline: float | None = None) -> Target:
    """``url`` parsed (``url_parse``) with every address of its host looked up and allowed; the lookup must end
    before ``deadline`` (``time.monotonic()`` seconds; default ``LOOKUP_TIMEOUT_S`` from now). Raises
    ``EgressRefused`` (with the host, never the addresses a name resolved to: they may be the portal's own
    network's) or ``EgressFailed`` (the lookup did not end in time)."""
    parsed = url_parse(url)
    host = (parsed.raw_host or "").rstrip(".") or (parsed.raw_host or "")
    literal = _literal(host)
    if literal is not None:
        if not (settings.APP_ALLOW_HTTP_ENDPOINTS or address_allowed(literal)):
            raise EgressRefused(_("The endpoint address %(a)s is not a public address.") % {"a": literal})
        return Target(url=parsed, host=host, addresses=(str(literal),))
    deadline = time.monotonic() + LOOKUP_TIMEOUT_S if deadline is None else deadline
    addresses = _lookup(host, parsed.port or 0, deadline)
    no_public = _("The endpoint host %(h)s does not resolve to a public address.") % {"h": host[:100]}
    if not addresses:
        raise EgressRefused(no_public)
    if not settings.APP_ALLOW_HTTP_ENDPOINTS and not all(address_allowed(ipaddress.ip_address(a)) for a in addresses):
        raise EgressRefused(no_public)
    return Target(url=parsed, host=host, addresses=addresses)


def post(url: str, *, body: bytes, headers: Mapping[str, str], timeout_s: float, max_body_bytes: int) -> Answer:
    """POST ``body`` to ``url`` once, under one deadline of ``timeout_s`` seconds for everything (see the module
    docstring), reading at most ``max_body_bytes`` of the answer's body. Returns the ``Answer`` whatever its
    status (a 3xx is not followed). Raises ``EgressRefused`` (nothing sent) or ``EgressFailed``."""
    started = time.monotonic()
    deadline = started + timeout_s
    target = url_check(url, deadline=deadline)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise EgressFailed(_("No complete answer within %(s)s s.") % {"s": f"{timeout_s:g}"})
    try:
        status, answer_headers, answer_body = _run(_post(target, body, headers, remaining, max_body_bytes))
    except Exception as exc:  # every transport failure is the same failure to the caller
        log.info("egress: no complete answer from %s: %s", target.host, type(exc).__name__)
        raise EgressFailed(_("No complete answer within %(s)s s.") % {"s": f"{timeout_s:g}"}) from exc
    return Answer(status, answer_headers, answer_body, max(0, round((time.monotonic() - started) * 1000)))


# --- inside -----------------------------------------------------------------------------------------------------
def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _legacy_ipv4(host: str) -> bool:
    """True for the numeric forms ``inet_aton`` accepts beside ``a.b.c.d`` (decimal, octal, hex, short)."""
    try:
        socket.inet_aton(host)
    except (OSError, ValueError):
        return False
    return True


def _lookup(host: str, port: int, deadline: float) -> tuple[str, ...]:
    """Every address ``getaddrinfo`` gives for ``host`` (both families), first-seen order, duplicates dropped;
    ``EgressFailed`` when the lookup has not ended by ``deadline``."""
    future = _lookup_pool().submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    try:
        infos = future.result(timeout=max(0.0, deadline - time.monotonic()))
    except FutureTimeout as exc:
        raise EgressFailed(_("The endpoint host %(h)s did not resolve in time.") % {"h": host[:100]}) from exc
    except (OSError, UnicodeError):
        return ()
    seen: dict[str, None] = {}
    for info in infos:
        seen.setdefault(str(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])), None)
    return tuple(seen)


def _lookup_pool() -> ThreadPoolExecutor:
    """This process's lookup threads (a pool inherited through ``fork`` has no threads left in the child)."""
    global _lookups
    if _lookups is None or _lookups[0] != os.getpid():
        _lookups = (os.getpid(), ThreadPoolExecutor(max_workers=8, thread_name_prefix="egress-lookup"))
    return _lookups[1]


class _Pinned(AbstractResolver):
    """aiohttp's resolver for one checked host: it answers the checked addresses and refuses any other name."""

    def __init__(self, target: Target) -> None:
        self._target = target

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host.rstrip(".") != self._target.host:
            raise OSError(f"{host} was not checked")
        flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": socket.IPPROTO_TCP,
                "flags": flags,
            }
            for address in self._target.addresses
        ]

    async def close(self) -> None:
        return None


@functools.lru_cache(maxsize=4)
def _tls_context(cafile: str) -> ssl.SSLContext:
    """Certificates checked against ``cafile`` and the URL's host name (``ssl.create_default_context``)."""
    return ssl.create_default_context(cafile=cafile)


async def _post(
    target: Target, body: bytes, headers: Mapping[str, str], timeout_s: float, max_body_bytes: int
) -> tuple[int, dict[str, str], bytes]:
    tls: ssl.SSLContext | bool = (
        _tls_context(settings.OUTGOING_CA_BUNDLE or certifi.where()) if target.url.scheme == "https" else False
    )
    connector = aiohttp.TCPConnector(resolver=_Pinned(target), use_dns_cache=False, force_close=True, ssl=tls)
    async with aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=timeout_s, ceil_threshold=math.inf),  # never rounded up to a second
        auto_decompress=False,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    ) as session:
        request_headers = {"Accept-Encoding": "identity", **headers}
        async with session.post(target.url, data=body, headers=request_headers, allow_redirects=False) as response:
            received = bytearray()
            while len(received) < max_body_bytes:
                chunk = await response.content.read(max_body_bytes - len(received))
                if not chunk:
                    break
                received += chunk
            return response.status, dict(response.headers), bytes(received)


def _run(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run`` here, or in a thread of its own when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
