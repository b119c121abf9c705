"""Agreements: what they record, immutability, paid licenses charged once, refused without funds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from tests.datasets.factories import make_license_version, make_version


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path


def _accept(org: Any, user: Any, lv: Any, dataset: Any = None, sha: str | None = None) -> Any:
    from datasets.services import agreement_accept

    return agreement_accept(
        organization=org,
        user=user,
        license_version=lv,
        shown_text_sha256=sha or lv.text_sha256,
        ip="198.51.100.7",
        user_agent="Mozilla/5.0 (test)",
        dataset=dataset,
    )


def _fund(org: Any, micros: int) -> None:
    from billing.services import wallet_top_up

    wallet_top_up(organization=org, amount_micros=micros, idempotency_key=f"top:{org.pk}:{micros}")


def test_an_agreement_records_who_what_when_where(alice: Any, alice_org: Any) -> None:
    import hashlib

    from portal.models import AuditEvent

    version = make_version()
    before = timezone.now()
    agreement = _accept(alice_org, alice, version.license_version, version.dataset)
    lv = version.license_version
    assert (agreement.organization, agreement.user, agreement.license_version, agreement.dataset) == (
        alice_org,
        alice,
        lv,
        version.dataset,
    )
    assert agreement.text_sha256 == lv.text_sha256 == hashlib.sha256(lv.text.encode()).hexdigest()
    assert (agreement.ip, agreement.user_agent, agreement.charge_transaction_id) == (
        "198.51.100.7",
        "Mozilla/5.0 (test)",
        None,
    )
    assert before <= agreement.accepted_at <= timezone.now()
    event = AuditEvent.objects.get(action="datasets.agreement_accept")
    assert (event.actor, event.organization, event.object_id) == (alice, alice_org, str(agreement.pk))


def test_an_agreement_cannot_be_edited_or_deleted(alice: Any, alice_org: Any) -> None:
    from datasets.models import Agreement, ImmutableRecord

    version = make_version()
    agreement = _accept(alice_org, alice, version.license_version, version.dataset)
    agreement.ip = "10.0.0.1"
    with pytest.raises(ImmutableRecord):
        agreement.save()
    with pytest.raises(ImmutableRecord):
        agreement.delete()
    with pytest.raises(ImmutableRecord):
        Agreement.objects.filter(pk=agreement.pk).update(ip="10.0.0.1")
    with pytest.raises(ImmutableRecord):
        Agreement.objects.filter(pk=agreement.pk).delete()
    assert Agreement.objects.get(pk=agreement.pk).ip == "198.51.100.7"


def test_the_admin_shows_agreements_read_only(admin_client: Any, alice: Any, alice_org: Any) -> None:
    version = make_version()
    agreement = _accept(alice_org, alice, version.license_version, version.dataset)
    assert admin_client.get("/admin/datasets/agreement/").status_code == 200
    assert admin_client.get("/admin/datasets/agreement/add/").status_code == 403
    response = admin_client.get(f"/admin/datasets/agreement/{agreement.pk}/change/")
    assert response.status_code == 200 and b'name="_save"' not in response.content
    assert admin_client.post(f"/admin/datasets/agreement/{agreement.pk}/delete/", {"post": "yes"}).status_code == 403
    admin_client.post(f"/admin/datasets/agreement/{agreement.pk}/change/", {"ip": "10.0.0.1"})
    before = (agreement.ip, agreement.text_sha256, agreement.accepted_at)
    agreement.refresh_from_db()
    assert (agreement.ip, agreement.text_sha256, agreement.accepted_at) == before
    assert type(agreement).objects.filter(pk=agreement.pk).exists()


def test_staff_revoke_access_by_adding_an_audited_row(
    admin_client: Any, admin_user: Any, alice: Any, alice_org: Any
) -> None:
    from datasets.models import AccessRevocation
    from portal.models import AuditEvent

    version = make_version()
    response = admin_client.post(
        "/admin/datasets/accessrevocation/add/",
        {"organization": alice_org.pk, "dataset": version.dataset.pk, "reason": "licence breach"},
    )
    assert response.status_code == 302
    revocation = AccessRevocation.objects.get()
    assert (revocation.organization, revocation.dataset, revocation.revoked_by, revocation.reason) == (
        alice_org,
        version.dataset,
        admin_user,
        "licence breach",
    )
    event = AuditEvent.objects.get(action="datasets.access_revoke")
    assert (event.actor, event.staff, event.object_id) == (admin_user, True, str(revocation.pk))


def test_a_text_other_than_the_current_one_is_refused(alice: Any, alice_org: Any) -> None:
    from datasets.models import Agreement
    from datasets.services import AgreementTextMismatch, LicenseVersionOutdated

    version = make_version()
    with pytest.raises(AgreementTextMismatch):
        _accept(alice_org, alice, version.license_version, sha="0" * 64)
    make_license_version(text="A newer text.")
    with pytest.raises(LicenseVersionOutdated, match="has been replaced by version 2"):
        _accept(alice_org, alice, version.license_version)
    assert Agreement.objects.count() == 0


def test_a_paid_license_with_too_little_balance_is_refused_and_nothing_is_charged(alice: Any, alice_org: Any) -> None:
    from billing.models import LedgerTransaction
    from billing.selectors import wallet_balance
    from datasets.models import Agreement
    from datasets.services import LicenseFeeUnpaid

    lv = make_license_version(slug="paid", price_micros=50_000_000)
    version = make_version(license_version=lv)
    _fund(alice_org, 20_000_000)
    with pytest.raises(LicenseFeeUnpaid) as exc:
        _accept(alice_org, alice, lv, version.dataset)
    assert str(exc.value) == (
        "The license fee of 50.00 CNY for License paid v1 cannot be paid: the wallet holds 20.00 CNY. "
        "Top up the wallet, then accept again. Nothing was charged."
    )
    assert Agreement.objects.count() == 0
    assert wallet_balance(organization=alice_org).total_micros == 20_000_000
    assert not LedgerTransaction.objects.filter(kind="license_fee").exists()


def test_a_paid_license_is_charged_once_even_when_accepted_twice(alice: Any, alice_org: Any, bob: Any) -> None:
    from billing.models import LedgerTransaction
    from billing.selectors import wallet_balance
    from datasets.models import Agreement

    lv = make_license_version(slug="paid", price_micros=50_000_000)
    version = make_version(license_version=lv)
    _fund(alice_org, 80_000_000)
    first = _accept(alice_org, alice, lv, version.dataset)
    second = _accept(alice_org, bob, lv, version.dataset)
    fees = LedgerTransaction.objects.filter(kind="license_fee")
    assert fees.count() == 1
    assert fees.get().idempotency_key == f"license:{alice_org.pk}:{lv.pk}"
    assert first.charge_transaction_id == second.charge_transaction_id == fees.get().pk
    # the second acceptance finds the agreement that still holds: one agreement (issue 18)
    assert second.pk == first.pk and Agreement.objects.count() == 1
    assert wallet_balance(organization=alice_org).total_micros == 30_000_000


def test_an_agreement_lapses_after_the_license_term(alice: Any, alice_org: Any) -> None:
    from datasets.selectors import agreement_current, versions_mountable_by

    lv = make_license_version(slug="term", term_days=30)
    version = make_version(license_version=lv)
    agreement = _accept(alice_org, alice, lv, version.dataset)
    assert agreement_current(alice_org, lv, dataset=version.dataset) == agreement
    import time_machine

    with time_machine.travel(timezone.now() + timedelta(days=31)):
        assert agreement_current(alice_org, lv, dataset=version.dataset) is None
        assert list(versions_mountable_by(alice_org)) == []
