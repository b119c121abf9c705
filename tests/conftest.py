"""Shared fixtures: the personas alice (owner), bob (member of alice's organization), charlie (outsider).

Django imports happen inside fixtures so that the pure suites (runtime, pipeline, scheduler) can run
with ``-p no:django``.
"""

from __future__ import annotations

from typing import Any

import pytest


def _make_user(email: str, name: str, *, verified: bool = True) -> Any:
    from django.utils import timezone

    from portal.services import user_signup

    user = user_signup(email=email, password="correct horse battery 9", name=name)
    if verified:
        user.email_verified_at = timezone.now()
        user.save(update_fields=["email_verified_at"])
    return user


@pytest.fixture
def alice(db: Any) -> Any:
    """Owner of the organization "alice" (her personal one), verified, no credit yet."""
    return _make_user("alice@example.com", "alice")


@pytest.fixture
def alice_org(alice: Any) -> Any:
    from portal.selectors import organization_for_user

    return organization_for_user(user=alice)


@pytest.fixture
def bob(alice_org: Any) -> Any:
    """A member (role ``member``) of alice's organization, with his own personal organization too."""
    from portal.choices import Role
    from portal.services import membership_add

    user = _make_user("bob@example.com", "bob")
    membership_add(organization=alice_org, user=user, role=Role.MEMBER, acting_user=None)
    return user


@pytest.fixture
def charlie(db: Any) -> Any:
    """An outsider: his own organization only."""
    return _make_user("charlie@example.com", "charlie")


PASSWORD = "correct horse battery 9"
