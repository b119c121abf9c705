"""Volume storage metering: one charge per started volume-hour at the price book's storage rate, exact amounts
over frozen time (time-machine), stopping when the volume is deleted; on statements and in the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from billing.choices import GrantKind, TransactionKind
from billing.models import LedgerTransaction, StoragePrice, VolumeUsage
from billing.selectors import wallet_balance
from billing.services import credit_grant_create
from billing.statements import statement_build, statement_csv
from billing.volume_metering import started_hours, volume_metering_tick

T0 = datetime(2026, 11, 2, 10, 0, 0, tzinfo=UTC)
H = timedelta(hours=1)
MIN = timedelta(minutes=1)


@pytest.fixture
def funded(alice_org, time_machine, settings, tmp_path):
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    settings.VOLUME_PRICE_PER_GB_HOUR = "0.0005"  # 500 micro-CNY per GB-hour
    time_machine.move_to(T0 - timedelta(days=5), tick=False)
    credit_grant_create(
        organization=alice_org,
        amount_micros=1_000_000,
        expires_at=T0 + timedelta(days=29),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    return alice_org


def _create(org, user, time_machine, *, at, name="data", size_gb=10):
    from instances.interactive.volumes import volume_create

    time_machine.move_to(at, tick=False)
    return volume_create(organization=org, user=user, name=name, size_gb=size_gb)


def _tick(time_machine, at):
    time_machine.move_to(at, tick=False)
    return volume_metering_tick(now=at)


def _rows(volume):
    return list(
        VolumeUsage.objects.filter(volume_id=volume.pk)
        .order_by("hour_index")
        .values_list("hour_index", "hour", "price_per_gb_hour_micros", "amount_micros", "shortfall_micros")
    )


def test_started_hours_counts_each_begun_hour() -> None:
    assert [started_hours(created_at=T0, until=T0 + d) for d in (0 * H, MIN, H, H + MIN, 2 * H + 10 * MIN)] == [
        0,
        1,
        1,
        2,
        3,
    ]


def test_a_volume_pays_each_started_gb_hour_once_and_stops_at_deletion(funded, alice, time_machine) -> None:
    from instances.interactive.volumes import volume_delete

    start = T0 + 20 * MIN
    volume = _create(funded, alice, time_machine, at=start)
    assert (r := _tick(time_machine, start)).hours == 1 and r.charged_micros == 5_000  # hour 0 has begun
    assert _tick(time_machine, start + H - timedelta(seconds=1)).hours == 0  # still hour 0
    assert _tick(time_machine, start + H).hours == 1
    assert _tick(time_machine, start + H).hours == 0  # a duplicate tick charges nothing
    time_machine.move_to(start + 2 * H + 10 * MIN, tick=False)
    volume_delete(volume=volume, user=alice)  # during hour 2
    assert _tick(time_machine, start + 5 * H).hours == 1  # hour 2 began before the deletion; nothing after
    assert _tick(time_machine, start + 50 * H).hours == 0
    assert _rows(volume) == [
        (0, start, 500, 5_000, 0),
        (1, start + H, 500, 5_000, 0),
        (2, start + 2 * H, 500, 5_000, 0),
    ]
    txns = LedgerTransaction.objects.filter(kind=TransactionKind.STORAGE).order_by("id")
    assert list(txns.values_list("idempotency_key", flat=True)) == [
        f"volume-usage:{volume.pk}:0",
        f"volume-usage:{volume.pk}:1",
        f"volume-usage:{volume.pk}:2",
    ]
    assert wallet_balance(organization=funded).total_micros == 1_000_000 - 15_000


def test_a_storage_price_change_applies_from_the_hour_that_begins_after_it(funded, alice, time_machine) -> None:
    volume = _create(funded, alice, time_machine, at=T0, size_gb=7)
    StoragePrice.objects.create(price_per_gb_hour_micros=333, effective_from=T0 + H)
    _tick(time_machine, T0 + 2 * H + MIN)  # a late tick catches up hours 0, 1 and 2
    assert [(i, p, a) for i, _, p, a, _ in _rows(volume)] == [(0, 500, 3_500), (1, 333, 2_331), (2, 333, 2_331)]
    assert wallet_balance(organization=funded).total_micros == 1_000_000 - 8_162


def test_what_the_balance_cannot_cover_is_a_shortfall_and_never_a_negative_balance(funded, alice, time_machine) -> None:
    volume = _create(funded, alice, time_machine, at=T0, size_gb=500)  # 250,000 micro-CNY an hour
    result = _tick(time_machine, T0 + 4 * H + MIN)  # 5 hours = 1,250,000; the balance holds 1,000,000
    assert (result.hours, result.charged_micros, result.shortfall_micros) == (5, 1_000_000, 250_000)
    assert [s for *_, s in _rows(volume)] == [0, 0, 0, 0, 250_000]
    assert wallet_balance(organization=funded).total_micros == 0


def test_statements_and_the_api_show_volume_storage(funded, alice, time_machine, client) -> None:
    from rest_framework.test import APIClient

    volume = _create(funded, alice, time_machine, at=T0, size_gb=10)
    _tick(time_machine, T0 + 2 * H)  # hours 0, 1, 2
    st = statement_build(organization=funded, year=2026, month=11)
    (line,) = st.volumes
    assert (line.volume_id, line.name, line.size_gb, line.hours, line.amount_micros, line.shortfall_micros) == (
        volume.pk,
        "data",
        10,
        3,
        15_000,
        0,
    )
    assert {k.kind: k.amount_micros for k in st.by_kind} == {"storage": -15_000}
    assert st.usage_uncovered_micros == 0  # storage is not GPU usage
    assert f"storage,volume {volume.pk} data,10 GB,3 h,-0.015000" in statement_csv(st)
    api = APIClient()
    api.force_authenticate(alice)
    (listed,) = api.get("/api/v1/volumes").json()["results"]
    assert (listed["cost_micros"], listed["price_per_hour_micros"]) == (15_000, 5_000)
    body = api.get("/api/v1/statements/2026/11").json()
    assert body["volumes"] == [
        {
            "volume_id": volume.pk,
            "name": "data",
            "size_gb": 10,
            "hours": 3,
            "amount_micros": 15_000,
            "shortfall_micros": 0,
        }
    ]
    client.force_login(alice)
    page = client.get(f"/o/{funded.slug}/statements/2026/11/").content.decode()
    assert f'data-testid="volume-{volume.pk}">0.015000' in page


def test_staff_add_a_storage_price_in_the_back_office_never_backdated(db, client, time_machine) -> None:
    from portal.models import AuditEvent, User

    time_machine.move_to(T0, tick=False)
    staff = User.objects.create_superuser(email="staff@example.com", password="x" * 12)
    client.force_login(staff)
    url = "/admin/billing/storageprice/add/"
    past = client.post(
        url, {"price_per_gb_hour_micros": "400", "effective_from_0": "2026-11-01", "effective_from_1": "00:00:00"}
    )
    assert (
        past.status_code == 200 and StoragePrice.objects.count() == 0
    )  # refused: a price cannot take effect in the past
    later = client.post(
        url, {"price_per_gb_hour_micros": "400", "effective_from_0": "2026-11-03", "effective_from_1": "00:00:00"}
    )
    assert later.status_code == 302
    row = StoragePrice.objects.get()
    assert (row.price_per_gb_hour_micros, row.created_by) == (400, staff)
    assert AuditEvent.objects.get(action="admin.storage_price_add").extra == {"price_per_gb_hour_micros": 400}
