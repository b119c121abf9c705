"""The one predicate that decides between a full page and its htmx partial (as NetBox does)."""

from django.http import HttpRequest


def is_partial(request: HttpRequest) -> bool:
    """True for an htmx request that swaps part of a page (not a boosted full navigation)."""
    return bool(request.htmx and not request.htmx.boosted)  # type: ignore[attr-defined]
