"""Authentication of an instance's Jupyter server by portal tickets (runs inside the server; no Django).

Design (as JupyterHub's single-user servers do, with the portal as the hub): the server accepts nobody by
itself. A user who may enter the instance (``instances.interactive.access``) clicks "Open JupyterLab" in the
console; the portal checks that (another member gets a 403, an outsider a 404, an anonymous visitor the login
page) and answers with a page that POSTs a short-lived single-use ticket (:mod:`instances.interactive.tickets`)
to this server's ``login`` URL. :class:`TicketLoginHandler` checks it with the instance's secret and sets the
server's own signed login cookie (``httponly``, ``SameSite=Lax``, path = the server's base URL), naming the
portal user's id, then redirects to JupyterLab. Without that cookie every page redirects to ``login``, which
refuses (403) anything but a valid ticket; API and websocket requests get 403. Jupyter's own token login is
off (no token is ever printed into the log), so the one way in is through the portal. The portal reads
``/api/status`` (for the progress state and idle autostop) and the kernel and terminal lists (idle autostop)
with a token derived from the secret, accepted in the ``Authorization`` header, for ``GET`` of those paths only.

**The cookie is not the end of the check** (a removed, demoted or deactivated member must lose JupyterLab as
they lose their API tokens). Every request that carries the cookie is checked against the portal — JupyterHub's
``HubAuth`` again: the server POSTs ``{"user": "<id>"}`` to ``GPU_PORTAL_JUPYTER_ACCESS_URL`` (the portal's
``/api/v1/runtime/instances/<id>/jupyter-access``, authenticated by :func:`~instances.interactive.tickets.access_token`)
and trusts the answer for ``GPU_PORTAL_JUPYTER_RECHECK_S`` seconds (the portal's ``INSTANCES_JUPYTER_RECHECK_S``,
default 60; at most that long, whatever happened, before a request of a user who may no longer enter is
refused: the cookie is cleared, the API answers 403, pages go to ``login``). The server also re-asks, every
``RECHECK_S`` seconds, about each user with an open websocket (kernels, terminals) and closes the sockets of a
refused one. And the portal does not wait for that: when a membership, a role, a user, a share or the
organization's setting changes, it POSTs to this server's ``api/gpu-portal/recheck``
(:func:`~instances.interactive.tickets.recheck_token`), which forgets every cached answer and re-asks about
every open websocket at once — so on the portal's own paths access ends within a request's time, and the
``RECHECK_S`` delay bounds only a change the portal could not announce (the server unreachable at that moment,
a row updated behind the portal's back). A portal that cannot be reached gives 503 (the cookie stays, the user
carries on once it answers again); open websockets stay open while it cannot be asked.

Why not a portal proxy: JupyterLab needs websockets (kernels, terminals), which the portal's WSGI stack does
not carry; the ticket hand-off keeps the portal out of the data path while it stays the only door.

Configuration (environment, read once and removed from ``os.environ`` so kernels and terminals do not
inherit it): ``GPU_PORTAL_JUPYTER_SECRET`` (the per-instance secret), ``GPU_PORTAL_JUPYTER_INSTANCE`` (the
instance id the tickets must name), ``GPU_PORTAL_JUPYTER_ACCESS_URL`` and ``GPU_PORTAL_JUPYTER_RECHECK_S``.
Start the server with
``--ServerApp.identity_provider_class=instances.interactive.jupyter_auth.PortalIdentityProvider``.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import os
import time
import weakref
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.base.handlers import JupyterHandler
from tornado import httpclient, ioloop, web, websocket

from instances.interactive.tickets import (
    ACCESS_URL_ENV,
    INSTANCE_ENV,
    RECHECK_S_ENV,
    SECRET_ENV,
    NonceBook,
    TicketRefused,
    access_token,
    recheck_token,
    status_token,
    ticket_read,
)

PORTAL_USER = "gpu-portal"
# What the portal's token may read (GET only, these paths under the server's base URL exactly): the server's
# status, and the kernels' execution states and the open terminals that idle autostop counts
# (instances.interactive.jupyter.jupyter_activity).
PROBE_PATHS = ("/api/status", "/api/kernels", "/api/terminals")
DEFAULT_RECHECK_S = 60.0
ASK_TIMEOUT_S = 5.0


class PortalUnreachable(Exception):
    """The portal did not give an answer (down, timed out, an unexpected status)."""


class PortalAccess:
    """The portal's answers to "may user ``id`` still enter this instance?", each trusted ``recheck_s``
    seconds; the open websockets of each user (closed when the answer turns to no)."""

    def __init__(self, *, url: str, token: str, recheck_s: float, log: Any) -> None:
        self.url, self.token, self.recheck_s, self.log = url, token, recheck_s, log
        self._answers: dict[str, tuple[bool, float]] = {}  # user id -> (allowed, monotonic time asked)
        self._asking: dict[str, asyncio.Future[bool]] = {}
        self._sockets: dict[str, weakref.WeakSet[websocket.WebSocketHandler]] = {}
        self._timer: ioloop.PeriodicCallback | None = None
        self._sweeps: set[asyncio.Future[None]] = set()  # running sweeps (a reference keeps them alive)

    def remember(self, user_id: str, allowed: bool) -> None:
        """Record an answer known without asking (the portal minted a ticket for the user just now)."""
        self._answers[user_id] = (allowed, time.monotonic())

    def forget(self) -> None:
        self._answers.clear()

    async def allowed(self, user_id: str, *, fresh: bool = False) -> bool:
        """The portal's answer for ``user_id``: the cached one unless older than ``recheck_s`` (or
        ``fresh``). Raises :class:`PortalUnreachable`."""
        known = self._answers.get(user_id)
        if known is not None and not fresh and time.monotonic() - known[1] < self.recheck_s:
            return known[0]
        pending = self._asking.get(user_id)
        if pending is None:  # one question per user at a time; concurrent requests share its answer
            pending = asyncio.ensure_future(self._ask(user_id))
            self._asking[user_id] = pending
            pending.add_done_callback(lambda _f: self._asking.pop(user_id, None))
        return await asyncio.shield(pending)

    async def _ask(self, user_id: str) -> bool:
        asked = time.monotonic()
        request = httpclient.HTTPRequest(
            self.url,
            method="POST",
            body=json.dumps({"user": user_id}),
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            connect_timeout=ASK_TIMEOUT_S,
            request_timeout=ASK_TIMEOUT_S,
            follow_redirects=False,
        )
        try:
            response = await httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
        except OSError as exc:
            raise PortalUnreachable(str(exc)) from exc
        if response.code in (401, 403):  # the portal does not know this server (any more): nobody enters
            allowed = False
        elif response.code == 200:
            try:
                allowed = json.loads(response.body).get("allowed") is True
            except (ValueError, AttributeError) as exc:
                raise PortalUnreachable(f"unreadable answer: {exc}") from exc
        else:
            raise PortalUnreachable(f"HTTP {response.code}")
        self._answers[user_id] = (allowed, asked)
        if not allowed:
            self.log.warning("the portal refuses user %s now: closing their sessions", user_id)
            self._close(user_id)
        return allowed

    def track(self, user_id: str, handler: websocket.WebSocketHandler) -> None:
        """Remember an open websocket of ``user_id``; start the periodic re-check on first use."""
        self._sockets.setdefault(user_id, weakref.WeakSet()).add(handler)
        if self._timer is None:
            self._timer = ioloop.PeriodicCallback(self._sweep_soon, self.recheck_s * 1000)
            self._timer.start()

    def _close(self, user_id: str) -> None:
        for handler in list(self._sockets.pop(user_id, ())):
            handler.close(code=4403, reason="access ended")

    def _sweep_soon(self) -> None:
        task = asyncio.ensure_future(self.sweep())
        self._sweeps.add(task)
        task.add_done_callback(self._sweeps.discard)

    async def sweep(self) -> None:
        """Ask afresh about every user with an open websocket; close the sockets of those refused."""
        for user_id in [u for u, s in self._sockets.items() if len(s)]:
            try:
                await self.allowed(user_id, fresh=True)
            except PortalUnreachable as exc:
                self.log.warning("cannot re-check user %s with the portal: %s", user_id, exc)


class TicketLoginHandler(JupyterHandler):
    """``GET login``: 403 with a pointer to the console. ``POST login`` (form field ``ticket``): a valid,
    unused ticket sets the login cookie and redirects to ``lab``; anything else is a 403."""

    def check_xsrf_cookie(self) -> None:
        """The ticket (signed, single-use, minted for this instance) is the cross-site proof here."""

    @allow_unauthenticated
    def get(self) -> None:
        raise web.HTTPError(403, "Open JupyterLab from the GPU portal's instance page.")

    @allow_unauthenticated
    def post(self) -> None:
        provider: PortalIdentityProvider = self.identity_provider  # type: ignore[assignment]
        try:
            raw = self.get_body_argument("ticket", "")
            ticket = ticket_read(raw, secret=provider.secret, instance_id=provider.instance_id)
            provider.nonces.use(ticket)
        except TicketRefused as exc:
            self.log.warning("refused a Jupyter login ticket: %s", exc)
            raise web.HTTPError(403, "Expired or used link: open JupyterLab from the portal again.") from None
        provider.access.remember(ticket.username, True)  # the portal checked the user to mint the ticket
        name = ticket.display_name or ticket.username
        provider.set_login_cookie(self, User(ticket.username, name=name, display_name=name))
        self.redirect(self.base_url + "lab")


class RecheckHandler(JupyterHandler):
    """``POST api/gpu-portal/recheck`` (the portal, with its recheck token): forget every cached answer and
    re-check every open websocket now; 204. Anything else: 403."""

    def check_xsrf_cookie(self) -> None:
        """Authenticated by the header token, not a cookie: no cross-site request can carry it."""

    @allow_unauthenticated
    async def post(self) -> None:
        provider: PortalIdentityProvider = self.identity_provider  # type: ignore[assignment]
        header = self.request.headers.get("Authorization", "")
        if not hmac.compare_digest(header, f"token {provider._recheck_token}"):
            raise web.HTTPError(403)
        provider.access.forget()
        await provider.access.sweep()
        self.set_status(204)
        self.finish()


class PortalIdentityProvider(IdentityProvider):  # type: ignore[misc]
    """Users come only from portal tickets and stay only while the portal says so (see the module docstring)."""

    login_handler_class = TicketLoginHandler

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secret = os.environ.pop(SECRET_ENV, "")
        self.instance_id = os.environ.pop(INSTANCE_ENV, "")
        access_url = os.environ.pop(ACCESS_URL_ENV, "")
        recheck_s = float(os.environ.pop(RECHECK_S_ENV, "") or DEFAULT_RECHECK_S)
        if not self.secret or not self.instance_id or not access_url:
            raise RuntimeError(f"{SECRET_ENV}, {INSTANCE_ENV} and {ACCESS_URL_ENV} must be set")
        self.token = ""  # no Jupyter token login, so no token in any URL or log line
        self.nonces = NonceBook()
        self._status_token = status_token(self.secret)
        self._recheck_token = recheck_token(self.secret)
        self.access = PortalAccess(
            url=access_url, token=access_token(self.secret), recheck_s=max(1.0, recheck_s), log=self.log
        )
        self.cookie_options = {"samesite": "Lax", "httponly": True}

    def get_handlers(self) -> list[tuple[str, object]]:
        return [*super().get_handlers(), (r"/api/gpu-portal/recheck", RecheckHandler)]

    # jupyter_server declares it async but accepts a plain result too (IdentityProvider.get_user awaits only
    # an awaitable), so the override stays synchronous.
    def get_user_token(self, handler: web.RequestHandler) -> User | None:  # type: ignore[override]
        """Only the portal's probes authenticate by token (header; ``GET`` of :data:`PROBE_PATHS` only)."""
        header = handler.request.headers.get("Authorization", "")
        base = str(handler.settings.get("base_url", "/")).rstrip("/")
        probe = handler.request.method == "GET" and handler.request.path.rstrip("/") in {base + p for p in PROBE_PATHS}
        if probe and hmac.compare_digest(header, f"token {self._status_token}"):
            return User(PORTAL_USER)
        return None

    async def get_user_cookie(self, handler: web.RequestHandler) -> User | None:  # type: ignore[override]
        """The cookie's user while the portal still lets them in (see the module docstring); ``None`` (the
        cookie is cleared) once it does not. Raises 503 while the portal cannot be asked."""
        user = super().get_user_cookie(handler)
        if inspect.isawaitable(user):
            user = await user
        if user is None or user.username == PORTAL_USER:
            return None
        try:
            allowed = await self.access.allowed(user.username)
        except PortalUnreachable as exc:
            self.log.warning("cannot check user %s with the portal: %s", user.username, exc)
            raise web.HTTPError(503, "The GPU portal cannot be reached to check your access; try again.") from None
        if not allowed:
            return None
        if isinstance(handler, websocket.WebSocketHandler):
            self.access.track(user.username, handler)
        return user  # type: ignore[no-any-return]

    def set_login_cookie(self, handler: web.RequestHandler, user: User) -> None:
        """Only the ticket login sets a cookie (never the status probe)."""
        if user.username != PORTAL_USER:
            super().set_login_cookie(handler, user)

    def cookie_secret_hook(self, h: Any) -> Any:
        """Cookies signed under another instance secret are invalid here."""
        h.update(self.secret.encode())
        return h
