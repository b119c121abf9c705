"""Typed requests of signed-in users, so views pass ``request.user`` to services typed ``User`` without a
``# type: ignore``: a view behind ``login_required`` (or the admin, or a DRF view whose permission classes
require authentication) annotates its request with one of these. Types only: at run time they are Django's
``HttpRequest`` and DRF's ``Request``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import HttpRequest
from rest_framework.request import Request

if TYPE_CHECKING:
    from portal.models import User


class AuthedHttpRequest(HttpRequest):
    """An ``HttpRequest`` whose ``user`` is a signed-in ``User`` (never ``AnonymousUser``)."""

    user: User


if TYPE_CHECKING:

    class AuthedRequest(Request):
        """A DRF ``Request`` whose ``user`` is a signed-in ``User``."""

        @property
        def user(self) -> User: ...

        @user.setter
        def user(self, value: User) -> None: ...

else:
    AuthedRequest = Request
