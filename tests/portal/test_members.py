"""Team organizations and their members."""

from __future__ import annotations

import pytest
from django.urls import reverse

from portal.models import Membership, Organization
from portal.services import organization_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(alice):
    return organization_create(name="Alice Lab", owner=alice)


def test_an_owner_creates_a_team_and_adds_an_existing_account(client, alice, charlie):
    client.force_login(alice)
    response = client.post(reverse("organization_new"), {"name": "Law Models"})
    team = Organization.objects.get(name="Law Models")
    assert response.status_code == 302 and team.personal is False
    assert team.wallet.paid_account.balance_micros == 0
    client.post(reverse("members", args=[team.slug]), {"email": "Charlie@Example.com", "role": "member"})
    assert list(team.memberships.order_by("role").values_list("user__email", "role")) == [
        ("charlie@example.com", "member"),
        ("alice@example.com", "owner"),
    ]


def test_unknown_addresses_personal_orgs_and_non_managers_are_refused(client, alice, alice_org, team, bob, charlie):
    client.force_login(alice)
    response = client.post(reverse("members", args=[team.slug]), {"email": "nobody@example.com", "role": "member"})
    assert response.status_code == 400 and "No account uses nobody@example.com" in response.content.decode()
    response = client.post(
        reverse("members", args=[alice_org.slug]), {"email": "charlie@example.com", "role": "member"}
    )
    assert "A personal organization has only its owner" in response.content.decode()
    client.post(reverse("members", args=[team.slug]), {"email": "bob@example.com", "role": "member"})
    client.force_login(bob)
    response = client.post(reverse("members", args=[team.slug]), {"email": "charlie@example.com", "role": "admin"})
    assert "Only owners and admins can manage members." in response.content.decode()
    assert not Membership.objects.filter(organization=team, user=charlie).exists()


def test_the_last_owner_cannot_leave_and_a_member_can(client, alice, team, bob):
    client.force_login(alice)
    client.post(reverse("members", args=[team.slug]), {"email": "bob@example.com", "role": "member"})
    own = team.memberships.get(user=alice)
    response = client.post(reverse("member_remove", args=[team.slug, own.pk]), follow=True)
    assert "The last owner cannot leave" in response.content.decode()
    client.force_login(bob)
    mine = team.memberships.get(user=bob)
    client.post(reverse("member_remove", args=[team.slug, mine.pk]))
    assert list(team.memberships.values_list("user__email", flat=True)) == ["alice@example.com"]


def test_charlie_gets_404_on_alices_team_members(client, alice, team, charlie):
    client.force_login(charlie)
    own = team.memberships.get(user=alice)
    assert client.get(reverse("members", args=[team.slug])).status_code == 404
    assert client.post(reverse("member_remove", args=[team.slug, own.pk])).status_code == 404
    assert team.memberships.count() == 1
