"""Authentication of an instance's Jupyter server by portal tickets (runs inside the server; no Django).

Design (as JupyterHub's single-user servers do, with the portal as the hub): the server accepts nobody by
itself. A member of the instance's organization clicks "Open JupyterLab" in the console; the portal checks the
membership (an outsider gets a 404 there, an anonymous visitor the login page) and answers with a page that
POSTs a short-lived single-use ticket (:mod:`instances.interactive.tickets`) to this server's ``login`` URL.
:class:`TicketLoginHandler` checks it with the instance's secret and sets the server's own signed login cookie
(``httponly``, ``SameSite=Lax``, path = the server's base URL), then redirects to JupyterLab. Without that
cookie every page redirects to ``login``, which refuses (403) anything but a valid ticket; API and websocket
requests get 403. Jupyter's own token login is off (no token is ever printed into the log), so the one way in
is through the portal. The portal reads ``/api/status`` (for the progress state and idle autostop) and the
kernel and terminal lists (idle autostop) with a token derived from the secret, accepted in the
``Authorization`` header, for ``GET`` of those paths only.

Why not a portal proxy: JupyterLab needs websockets (kernels, terminals), which the portal's WSGI stack does
not carry; the ticket hand-off keeps the portal out of the data path while it stays the only door.

Configuration (environment, read once and removed from ``os.environ`` so kernels and terminals do not
inherit it): ``GPU_PORTAL_JUPYTER_SECRET`` (the per-instance secret) and ``GPU_PORTAL_JUPYTER_INSTANCE``
(the instance id the tickets must name). Start the server with
``--ServerApp.identity_provider_class=instances.interactive.jupyter_auth.PortalIdentityProvider``.
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_server.auth.decorator import allow_unauthenticated
from jupyter_server.auth.identity import IdentityProvider, User
from jupyter_server.base.handlers import JupyterHandler
from tornado import web

from instances.interactive.tickets import (
    INSTANCE_ENV,
    SECRET_ENV,
    NonceBook,
    TicketRefused,
    status_token,
    ticket_read,
)

PORTAL_USER = "gpu-portal"
# What the portal's token may read (GET only, these paths under the server's base URL exactly): the server's
# status, and the kernels' execution states and the open terminals that idle autostop counts
# (instances.interactive.jupyter.jupyter_activity).
PROBE_PATHS = ("/api/status", "/api/kernels", "/api/terminals")


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
        provider.set_login_cookie(self, User(ticket.username))
        self.redirect(self.base_url + "lab")


class PortalIdentityProvider(IdentityProvider):  # type: ignore[misc]
    """Users come only from portal tickets (see the module docstring)."""

    login_handler_class = TicketLoginHandler

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.secret = os.environ.pop(SECRET_ENV, "")
        self.instance_id = os.environ.pop(INSTANCE_ENV, "")
        if not self.secret or not self.instance_id:
            raise RuntimeError(f"{SECRET_ENV} and {INSTANCE_ENV} must be set")
        self.token = ""  # no Jupyter token login, so no token in any URL or log line
        self.nonces = NonceBook()
        self._status_token = status_token(self.secret)
        self.cookie_options = {"samesite": "Lax", "httponly": True}

    # jupyter_server declares it async but accepts a plain result too (IdentityProvider.get_user awaits only
    # an awaitable), so the override stays synchronous.
    def get_user_token(self, handler: web.RequestHandler) -> User | None:  # type: ignore[override]
        """Only the portal's probes authenticate by token (header; ``GET`` of :data:`PROBE_PATHS` only)."""
        header = handler.request.headers.get("Authorization", "")
        base = str(handler.settings.get("base_url", "/")).rstrip("/")
        probe = handler.request.method == "GET" and handler.request.path.rstrip("/") in {base + p for p in PROBE_PATHS}
        if probe and header == f"token {self._status_token}":
            return User(PORTAL_USER)
        return None

    def set_login_cookie(self, handler: web.RequestHandler, user: User) -> None:
        """Only the ticket login sets a cookie (never the status probe)."""
        if user.username != PORTAL_USER:
            super().set_login_cookie(handler, user)

    def cookie_secret_hook(self, h: Any) -> Any:
        """Cookies signed under another instance secret are invalid here."""
        h.update(self.secret.encode())
        return h
