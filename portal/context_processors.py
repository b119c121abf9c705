"""Template context shared by every console page: the navigation's organizations and balance."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def console(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    from portal.selectors import organizations_for_user

    orgs = list(organizations_for_user(user))  # type: ignore[arg-type]
    slug = getattr(request, "resolver_match", None) and request.resolver_match.kwargs.get("org")  # type: ignore[union-attr]
    current = next((o for o in orgs if o.slug == slug), orgs[0] if orgs else None)
    return {"nav_orgs": orgs, "current_org": current}
