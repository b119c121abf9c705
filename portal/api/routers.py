"""The one router class of the API."""

from __future__ import annotations

from rest_framework.routers import DefaultRouter


class ApiRouter(DefaultRouter):
    """``DefaultRouter`` without a trailing slash, a root view or ``.json``-style format suffixes.

    Format suffixes would route ``/jobs/1/stop.json`` to action methods that take no ``format`` argument
    (a ``TypeError``, so a 500); the API speaks JSON only, so the suffix routes are not made at all and
    such a URL is a 404 in the error envelope.
    """

    include_root_view = False
    include_format_suffixes = False

    def __init__(self) -> None:
        super().__init__(trailing_slash=False)
