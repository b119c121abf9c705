"""Signup, e-mail verification and the trial credit grant."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail, signing
from django.urls import reverse
from django.utils import timezone

from billing.models import CreditGrant, LedgerTransaction
from billing.selectors import wallet_balance
from portal.models import Organization, TrialClaim, User
from portal.selectors import organization_for_user
from portal.services import VERIFY_SALT, email_verify, verification_token

pytestmark = pytest.mark.django_db(transaction=True)
LINK = re.compile(r"http://[^\s]+/verify/[^\s/]+/")


def _signup(client, email="dora@example.com", password="correct horse battery 9", **extra):
    data = {"email": email, "name": "Dora", "password1": password, "password2": password, **extra}
    return client.post(reverse("signup"), data)


def _link_from_outbox() -> str:
    match = LINK.search(mail.outbox[-1].body)
    assert match, mail.outbox[-1].body
    return match.group(0).split("testserver", 1)[-1].replace("http://127.0.0.1:8000", "")


def test_signup_creates_an_unverified_user_with_a_personal_org_and_mails_a_link(client):
    response = _signup(client)
    assert response.status_code == 302
    user = User.objects.get(email="dora@example.com")
    assert user.email_verified_at is None
    org = organization_for_user(user=user)
    assert org.personal is True
    assert list(org.memberships.values_list("user__email", "role")) == [("dora@example.com", "owner")]
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["dora@example.com"]
    assert wallet_balance(organization=org).total_micros == 0


def test_verifying_grants_ten_cny_once_even_when_clicked_twice(client):
    _signup(client)
    path = _link_from_outbox()
    first = client.get(path)
    second = client.get(path)
    assert first.status_code == 302 and second.status_code == 302
    user = User.objects.get(email="dora@example.com")
    assert user.email_verified_at is not None
    org = organization_for_user(user=user)
    bal = wallet_balance(organization=org)
    assert bal.trial_micros == 10_000_000 and bal.paid_micros == 0
    grant = CreditGrant.objects.get(wallet__organization=org)
    assert grant.amount_micros == 10_000_000
    assert grant.expires_at - grant.granted_at == pytest.approx(timedelta(days=30), abs=timedelta(seconds=5))
    assert LedgerTransaction.objects.filter(kind="credit_grant").count() == 1


def test_a_recreated_account_with_the_same_address_gets_no_second_trial(client):
    _signup(client)
    client.get(_link_from_outbox())
    user = User.objects.get(email="dora@example.com")
    org = organization_for_user(user=user)
    # Deleting an account keeps its organization's ledger; detach and delete the user.
    user.memberships.all().delete()
    user.delete()
    client.logout()
    _signup(client)
    client.get(_link_from_outbox())
    new_user = User.objects.get(email="dora@example.com")
    new_org = organization_for_user(user=new_user)
    assert new_org.pk != org.pk
    assert new_user.email_verified_at is not None
    assert wallet_balance(organization=new_org).total_micros == 0
    assert TrialClaim.objects.filter(email="dora@example.com").count() == 1
    assert LedgerTransaction.objects.filter(kind="credit_grant").count() == 1


def test_a_tampered_link_is_refused_and_nothing_is_granted(client):
    _signup(client)
    path = _link_from_outbox()
    token = path.rstrip("/").split("/")[-1]
    tampered = path.replace(token, token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    response = client.get(tampered)
    assert response.status_code == 400
    assert "not valid" in response.content.decode()
    assert User.objects.get(email="dora@example.com").email_verified_at is None
    assert CreditGrant.objects.count() == 0


def test_an_expired_link_is_refused_with_a_clear_message(client, time_machine):
    _signup(client)
    path = _link_from_outbox()
    time_machine.move_to(timezone.now() + timedelta(days=4))
    response = client.get(path)
    assert response.status_code == 400
    assert "expired" in response.content.decode()
    assert CreditGrant.objects.count() == 0


def test_a_link_for_an_address_that_changed_is_refused(alice):
    token = verification_token(alice)
    alice.email = "alice2@example.com"
    alice.save()
    with pytest.raises(Exception, match="not valid"):
        email_verify(token=token)
    assert signing.loads(token, salt=VERIFY_SALT)["e"] == "alice@example.com"


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"email": "not-an-address"}, "email", "Enter a valid email address."),
        ({"email": "alice@example.com"}, "email", "already exists"),
        ({"password1": "short", "password2": "short"}, "password1", "too short"),
        ({"password2": "something else 99"}, "password2", "differ"),
        ({"email": ""}, "email", "This field is required."),
    ],
)
def test_malformed_signups_get_a_clear_message_and_write_nothing(client, alice, data, field, message):
    before = (User.objects.count(), Organization.objects.count())
    mail.outbox.clear()
    response = _signup(client, **{"email": "new@example.com", **data})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert f'data-field="{field}"' in response.content.decode()
    assert (User.objects.count(), Organization.objects.count()) == before
    assert mail.outbox == []


def test_a_wrong_password_is_refused_and_repeated_failures_lock_out(client, alice):
    url = reverse("login")
    response = client.post(url, {"username": "alice@example.com", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct e-mail address and password" in response.content.decode()
    assert "_auth_user_id" not in client.session
    for _ in range(5):
        response = client.post(url, {"username": "alice@example.com", "password": "wrong"})
    assert response.status_code == 429
    assert "Too many failed logins" in response.content.decode()
    # Even the right password is refused while locked out.
    response = client.post(url, {"username": "alice@example.com", "password": "correct horse battery 9"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_login_with_the_right_password_reaches_the_dashboard(client, alice):
    response = client.post(
        reverse("login"), {"username": "alice@example.com", "password": "correct horse battery 9"}, follow=True
    )
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == reverse("dashboard", args=[organization_for_user(user=alice).slug])


def test_password_reset_mails_a_working_link(client, alice):
    mail.outbox.clear()
    client.post(reverse("password_reset"), {"email": "alice@example.com"})
    assert len(mail.outbox) == 1
    path = re.search(r"http://[^\s]+(/password-reset/[^\s]+/)", mail.outbox[0].body).group(1)
    response = client.get(path, follow=True)
    form_url = response.redirect_chain[-1][0]
    client.post(form_url, {"new_password1": "another fine pass 42", "new_password2": "another fine pass 42"})
    alice.refresh_from_db()
    assert alice.check_password("another fine pass 42")


def test_a_post_without_csrf_is_refused_and_writes_nothing():
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    response = csrf_client.post(
        reverse("signup"),
        {"email": "eve@example.com", "password1": "correct horse battery 9", "password2": "correct horse battery 9"},
    )
    assert response.status_code == 403
    assert not User.objects.filter(email="eve@example.com").exists()


def test_login_and_lockout_ignore_the_case_of_the_address(client, alice):
    url = reverse("login")
    response = client.post(url, {"username": "ALICE@Example.com", "password": "correct horse battery 9"})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(alice.pk)
    client.logout()
    for variant in [
        "Alice@example.com",
        "ALICE@EXAMPLE.COM",
        "alice@example.com",
        "aLiCe@example.com",
        "alice@EXAMPLE.com",
    ]:
        client.post(url, {"username": variant, "password": "wrong"})
    assert client.post(url, {"username": "Alice@Example.com", "password": "wrong"}).status_code == 429
    locked = client.post(url, {"username": "ALICE@example.com", "password": "correct horse battery 9"})
    assert locked.status_code == 429
    assert "_auth_user_id" not in client.session


def test_plus_addresses_sign_up(client):
    response = _signup(client, email="dora+ml@example.com")
    assert response.status_code == 302
    assert User.objects.filter(email="dora+ml@example.com").exists()


def test_a_member_invited_into_another_personal_organization_keeps_his_own_as_home_and_trial_target(alice):
    """Bob signs up (unverified), is added to alice's personal organization (also ``personal``, and sorting
    before his by name), then verifies: his home is his own organization and the trial credit lands there,
    never in alice's."""
    from portal.choices import Role
    from portal.services import membership_add, user_signup

    bob = user_signup(email="bob@example.com", password="correct horse battery 9", name="bob")
    alice_org = organization_for_user(user=alice)
    membership_add(organization=alice_org, user=bob, role=Role.MEMBER, acting_user=None)
    own = Organization.objects.get(memberships__user=bob, memberships__role="owner")
    assert (alice_org.slug < own.slug, alice_org.personal, own.personal) == (True, True, True)
    assert organization_for_user(user=bob) == own

    email_verify(token=verification_token(bob))
    assert wallet_balance(organization=own).trial_micros == 10_000_000
    assert wallet_balance(organization=alice_org).total_micros == 0
    assert list(TrialClaim.objects.values_list("email", "organization__slug")) == [("bob@example.com", own.slug)]
