"""The license dialog opens in the viewport and names every dataset its license version covers; accepting
says so once; accepting twice records one agreement and says it was already accepted (issue 18)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.datasets.factories import make_license_version, make_version


@pytest.fixture(autouse=True)
def _data_dir(settings: Any, tmp_path: Any) -> None:
    settings.DATA_DIR = tmp_path


@pytest.fixture
def three(alice_org: Any) -> list[Any]:
    """Two public datasets under one license, a third under another, and alice's private one under the
    first license (visible to her organization only)."""
    lv = make_license_version(slug="cn-law")
    other = make_license_version(slug="other")
    return [
        make_version(slug="statutes", license_version=lv),
        make_version(slug="cases", license_version=lv),
        make_version(slug="medical", license_version=other),
        make_version(slug="own", license_version=lv, publisher=alice_org, visibility="private"),
    ]


def _post(client: Any, base: str, lv: Any, **extra: Any) -> Any:
    return client.post(f"{base}/agreement/", {"license_version": lv.pk, "text_sha256": lv.text_sha256}, **extra)


def test_the_dialog_is_a_modal_naming_every_dataset_its_license_version_covers(
    client: Any, alice: Any, alice_org: Any, three: list[Any]
) -> None:
    statutes = three[0]
    client.force_login(alice)
    html = client.get(
        f"/o/{alice_org.slug}/datasets/{statutes.dataset.pk}/agreement/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert '<dialog open class="modal" data-modal aria-modal="true" data-testid="agreement-modal">' in html
    covered = re.search(r'<p data-testid="covered-datasets">(.*?)</p>', html, re.S)
    assert covered is not None
    names = re.findall(r'<a href="/o/[^/]+/datasets/(\d+)/">([^<]+)</a>', covered.group(1))
    assert names == [
        (str(three[1].dataset.pk), "Set cases"),
        (str(three[3].dataset.pk), "Set own"),
        (str(statutes.dataset.pk), "Set statutes"),
    ]
    assert "This agreement covers 3 datasets:" in covered.group(1)


def test_the_dialog_of_charlie_names_only_what_his_organization_sees(
    client: Any, charlie: Any, three: list[Any]
) -> None:
    from portal.models import Membership

    org = Membership.objects.filter(user=charlie).get().organization
    client.force_login(charlie)
    html = client.get(
        f"/o/{org.slug}/datasets/{three[0].dataset.pk}/agreement/", HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "This agreement covers 2 datasets:" in html and "Set own" not in html


def test_the_dialog_stays_in_the_viewport(client: Any) -> None:
    from django.contrib.staticfiles import finders

    css = open(finders.find("portal/app.css"), encoding="utf-8").read()  # noqa: SIM115
    js = open(finders.find("portal/app.js"), encoding="utf-8").read()  # noqa: SIM115
    rule = re.search(r"dialog\.modal\[data-modal\] \{([^}]*)\}", css)
    assert rule is not None and "position: fixed" in rule.group(1) and "max-height: 90vh" in rule.group(1)
    assert 'querySelectorAll("dialog[data-modal]")' in js and "dialog.showModal()" in js


def test_accepting_says_so_once_and_names_the_datasets_now_mountable(
    client: Any, alice: Any, alice_org: Any, three: list[Any]
) -> None:
    from datasets.models import Agreement
    from datasets.selectors import versions_mountable_by

    statutes = three[0]
    client.force_login(alice)
    base = f"/o/{alice_org.slug}/datasets/{statutes.dataset.pk}"
    resp = _post(client, base, statutes.license_version, follow=True)
    html = resp.content.decode()
    assert html.count("Agreement recorded.") == 1
    assert "Agreement recorded. You can now mount Set cases, Set own, Set statutes." in html
    assert Agreement.objects.count() == 1
    assert sorted(v.dataset.slug for v in versions_mountable_by(alice_org)) == ["cases", "own", "statutes"]


def test_accepting_twice_records_one_agreement_and_says_it_was_already_accepted(
    client: Any, alice: Any, bob: Any, alice_org: Any, three: list[Any]
) -> None:
    from datasets.models import Agreement
    from portal.models import AuditEvent

    statutes, cases = three[0], three[1]
    client.force_login(alice)
    _post(client, f"/o/{alice_org.slug}/datasets/{statutes.dataset.pk}", statutes.license_version, follow=True)
    first = Agreement.objects.get()
    # a double click, then a teammate from the other dataset of the same license version
    again = _post(client, f"/o/{alice_org.slug}/datasets/{statutes.dataset.pk}", statutes.license_version, follow=True)
    html = again.content.decode()
    assert "License cn-law v1 is already accepted for your organization; nothing was recorded again." in html
    assert "Agreement recorded." not in html
    client.force_login(bob)
    _post(client, f"/o/{alice_org.slug}/datasets/{cases.dataset.pk}", cases.license_version)
    assert list(Agreement.objects.values_list("pk", flat=True)) == [first.pk]
    assert AuditEvent.objects.filter(action="datasets.agreement_accept").count() == 1


def test_the_api_answers_a_second_acceptance_with_the_same_agreement(
    alice: Any, alice_org: Any, three: list[Any]
) -> None:
    from rest_framework.test import APIClient

    from datasets.models import Agreement

    api = APIClient()
    api.force_authenticate(alice)
    url = f"/api/v1/datasets/{three[0].dataset.pk}/agreements"
    body = {"text_sha256": three[0].license_version.text_sha256}
    first = api.post(url, body, format="json")
    second = api.post(url, body, format="json")
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"] == Agreement.objects.get().pk


def test_a_wrong_text_hash_is_refused_and_records_nothing(
    client: Any, alice: Any, alice_org: Any, three: list[Any]
) -> None:
    from datasets.models import Agreement

    client.force_login(alice)
    resp = client.post(
        f"/o/{alice_org.slug}/datasets/{three[0].dataset.pk}/agreement/",
        {"license_version": three[0].license_version.pk, "text_sha256": "0" * 64},
    )
    assert resp.status_code == 400
    assert "The text you accepted is not the current text of License cn-law v1" in resp.content.decode()
    assert Agreement.objects.count() == 0
