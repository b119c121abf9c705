"""Single-use, short-lived login tickets for an instance's Jupyter server (standard library only).

The portal mints a ticket for a member of the instance's organization; the Jupyter server (which imports no
Django) checks it with the same per-instance secret and trades it for its own login cookie. A ticket is
``<payload>.<mac>``, both base64url without padding::

    payload = JSON {"i": instance id (str), "u": user name (the portal user's id), "n": nonce (32 hex chars),
                    "e": expiry (Unix s), "d": display name (optional: the e-mail address)}
    mac     = HMAC-SHA256(key=secret, msg=b"jupyter-ticket:" + payload bytes)

Single use is enforced by the server, which remembers the nonces it accepted until they expire
(:class:`NonceBook`). The instance secret never leaves the portal and the server; tickets travel in a POST
body (never in a URL, so never in an access log).

Three more keys derive from the secret, one per purpose, so that none opens another's door (each is
``HMAC-SHA256(key=secret, msg=<purpose>)`` in hex, sent as ``Authorization: token …``): :func:`status_token`
(the portal reads the server's ``api/status``), :func:`recheck_token` (the portal tells the server to re-check
its sessions now) and :func:`access_token` (the server asks the portal whether a user may still enter).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass

DEFAULT_TTL_S = 60
SECRET_ENV = "GPU_PORTAL_JUPYTER_SECRET"  # noqa: S105 - a variable name; the per-instance secret, in the Jupyter server's environment
INSTANCE_ENV = "GPU_PORTAL_JUPYTER_INSTANCE"  # the instance id tickets must name
ACCESS_URL_ENV = "GPU_PORTAL_JUPYTER_ACCESS_URL"  # where the server asks the portal "may user U still enter?"
RECHECK_S_ENV = "GPU_PORTAL_JUPYTER_RECHECK_S"  # how long the server trusts one answer (seconds)
_PREFIX = b"jupyter-ticket:"


class TicketRefused(Exception):
    """A ticket that is malformed, forged, for another instance, expired or already used."""


@dataclass(frozen=True, slots=True)
class Ticket:
    """What a valid ticket says: for which instance, which user, its nonce and expiry (Unix seconds)."""

    instance_id: str
    username: str
    nonce: str
    expires_at: int
    display_name: str = ""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def _mac(secret: str, payload: bytes) -> bytes:
    return hmac.new(secret.encode(), _PREFIX + payload, hashlib.sha256).digest()


def ticket_mint(
    *,
    secret: str,
    instance_id: str,
    username: str,
    ttl_s: int = DEFAULT_TTL_S,
    now: float | None = None,
    display_name: str = "",
) -> str:
    """A new ticket valid for ``ttl_s`` seconds from ``now`` (Unix seconds; default the clock)."""
    if not secret:
        raise ValueError("no secret")
    issued = time.time() if now is None else now
    body: dict[str, object] = {
        "i": instance_id,
        "u": username,
        "n": secrets.token_hex(16),
        "e": int(issued) + int(ttl_s),
    }
    if display_name:
        body["d"] = display_name
    payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    return f"{_b64(payload)}.{_b64(_mac(secret, payload))}"


def ticket_read(ticket: str, *, secret: str, instance_id: str, now: float | None = None) -> Ticket:
    """Check a ticket's signature, instance and expiry (not its single use: see :class:`NonceBook`).

    Raises :class:`TicketRefused` with the cause. Comparison of MACs is constant-time.
    """
    payload_b64, dot, mac_b64 = (ticket or "").partition(".")
    if not dot or len(ticket) > 1024:
        raise TicketRefused("malformed ticket")
    try:
        payload, mac = _unb64(payload_b64), _unb64(mac_b64)
    except (binascii.Error, ValueError):
        raise TicketRefused("malformed ticket") from None
    if not secret or not hmac.compare_digest(mac, _mac(secret, payload)):
        raise TicketRefused("bad signature")
    try:
        body = json.loads(payload)
        parsed = Ticket(str(body["i"]), str(body["u"]), str(body["n"]), int(body["e"]), str(body.get("d", "")))
    except (ValueError, KeyError, TypeError):
        raise TicketRefused("malformed ticket") from None
    if parsed.instance_id != instance_id:
        raise TicketRefused("ticket for another instance")
    if parsed.expires_at <= (time.time() if now is None else now):
        raise TicketRefused("ticket expired")
    return parsed


class NonceBook:
    """Nonces of accepted tickets, kept until their ticket would have expired anyway (bounded memory)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def use(self, ticket: Ticket, *, now: float | None = None) -> None:
        """Record ``ticket``'s nonce; raises :class:`TicketRefused` if it was used before."""
        clock = time.time() if now is None else now
        self._seen = {n: e for n, e in self._seen.items() if e > clock}
        if ticket.nonce in self._seen:
            raise TicketRefused("ticket already used")
        self._seen[ticket.nonce] = ticket.expires_at


def status_token(secret: str) -> str:
    """The token the portal sends (``Authorization: token …`` header only) to read ``/api/status``."""
    return hmac.new(secret.encode(), b"jupyter-portal-status", hashlib.sha256).hexdigest()


def recheck_token(secret: str) -> str:
    """The token the portal sends to the server's ``api/gpu-portal/recheck`` (forget cached answers now)."""
    return hmac.new(secret.encode(), b"jupyter-portal-recheck", hashlib.sha256).hexdigest()


def access_token(secret: str) -> str:
    """The token the server sends to the portal's access check (``…/jupyter-access``)."""
    return hmac.new(secret.encode(), b"jupyter-server-access", hashlib.sha256).hexdigest()
