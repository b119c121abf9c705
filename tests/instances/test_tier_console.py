"""The tier and idle autostop in the console and the API: each tier's price before launch (live quote), the
tier chosen at launch, an interactive instance's idle warning with "keep it running", the costs endpoint;
charlie gets 404s; bad input is refused with nothing made."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from instances_support import FakeBackend, fund

T0 = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)
MIN = timedelta(minutes=1)


@pytest.fixture
def org(catalog: None, alice_org: Any, time_machine: Any) -> Any:
    from instances.models import GpuType, Node

    time_machine.move_to(T0, tick=False)
    fund(alice_org, 10)
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    return alice_org


def test_the_launch_quote_shows_the_price_of_each_tier_before_launch(client: Any, alice: Any, org: Any) -> None:
    client.force_login(alice)
    page = client.get(f"/o/{org.slug}/instances/new/").content.decode()
    assert 'name="tier"' in page and "Interruptible" in page
    quote = client.get(
        f"/o/{org.slug}/instances/quote/",
        {"gpu_type": "cpu-local", "gpu_count": 2, "mode": "container", "tier": "interruptible"},
    ).content.decode()
    assert '<span data-tier="on_demand">On demand 1.20 CNY / hour</span>' in quote
    assert (
        '<span data-tier="interruptible" class="selected" aria-current="true">Interruptible 0.72 CNY / hour '
        '<span class="muted">(−40 %, may be preempted)</span></span>'
    ) in quote
    assert '<span data-testid="price-per-hour">0.72</span>' in quote  # the selected tier's price and runway


def test_a_console_launch_keeps_its_tier_and_the_idle_warning_offers_keep_running(
    client: Any,
    alice: Any,
    charlie: Any,
    org: Any,
    fake_backend: FakeBackend,
    django_capture_on_commit_callbacks: Any,
    time_machine: Any,
    mailoutbox: list[Any],
) -> None:
    from instances.interactive.idle import idle_autostop_tick
    from instances.models import Instance
    from instances.services import instances_reconcile

    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        resp = client.post(
            f"/o/{org.slug}/instances/new/",
            {
                "name": "nb",
                "gpu_type": "cpu-local",
                "gpu_count": 1,
                "mode": "container",
                "tier": "interruptible",
                "command": "sleep 9999",
                "idle_autostop_minutes": 20,
            },
        )
    inst = Instance.objects.get(name="nb")
    assert resp.status_code == 302
    assert (inst.tier, inst.idle_autostop_minutes, inst.kind) == ("interruptible", 20, "interactive")
    with django_capture_on_commit_callbacks(execute=True):
        instances_reconcile(now=T0, backend=fake_backend)  # type: ignore[arg-type]
    url = f"/o/{org.slug}/instances/{inst.pk}/"
    page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert '<span data-testid="tier">Interruptible</span>' in page
    assert "the disk (workspace and volumes) is kept; running processes are not" in page
    assert "next: 2027-01-04 09:20 UTC unless it is used" in page

    time_machine.move_to(T0 + 10 * MIN, tick=False)
    assert idle_autostop_tick(now=T0 + 10 * MIN) == {"warned": 1, "stopped": 0}
    page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "this instance will be stopped at 2027-01-04 09:20 UTC (idle autostop after 20 minutes)" in page
    # charlie cannot press it (404, nothing recorded); alice can
    client.force_login(charlie)
    assert client.post(f"{url}keep-running/").status_code == 404
    inst.refresh_from_db()
    assert inst.last_activity_at is None
    client.force_login(alice)
    time_machine.move_to(T0 + 12 * MIN, tick=False)
    assert client.post(f"{url}keep-running/").status_code == 302
    inst.refresh_from_db()
    assert inst.last_activity_at == T0 + 12 * MIN
    page = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="idle-warning"' not in page
    assert "next: 2027-01-04 09:32 UTC unless it is used" in page
    assert client.get(f"{url}keep-running/").status_code == 405


def test_the_api_launches_a_tier_and_reports_its_costs_and_refuses_bad_input(
    alice: Any, charlie: Any, org: Any, fake_backend: FakeBackend
) -> None:
    from rest_framework.test import APIClient

    from instances.models import Instance

    api = APIClient()
    api.force_authenticate(alice)
    body = {"gpu_type": "cpu-local", "gpu_count": 1, "command": ["sleep", "60"]}
    for bad, field in [({"tier": "spot"}, "tier"), ({"idle_autostop_minutes": -1}, "idle_autostop_minutes")]:
        resp = api.post("/api/v1/instances", {**body, **bad}, format="json")
        assert resp.status_code == 400, resp.content
        assert field in str(resp.json()["error"])
    assert Instance.objects.count() == 0
    resp = api.post("/api/v1/instances", {**body, "tier": "interruptible", "idle_autostop_minutes": 0}, format="json")
    assert resp.status_code == 201
    data = resp.json()
    assert (data["tier"], data["idle_autostop_minutes"], data["autostopped_at"]) == ("interruptible", 0, None)
    costs = api.get(f"/api/v1/instances/{data['id']}/costs")
    assert costs.json() == {
        "tier": "interruptible",
        "preemptions": 0,
        "steps_rerun": 0,
        "minutes_rerun": 0,
        "minutes_billed": 0,
        "charged_micros": 0,
        "on_demand_micros": 0,
        "saved_micros": 0,
        "autostop_at": None,
        "idle_minutes_saved": 0,
    }
    job_body = {"gpu_type": "cpu-local", "gpu_count": 1, "dataset_version_ids": [1], "tier": "interruptible"}
    no_checkpoints = {"checkpoint_every_minutes": 0, "checkpoint_every_steps": 0}  # a CPU slot defaults to 100 steps
    refused = api.post("/api/v1/jobs", {**job_body, **no_checkpoints}, format="json")
    assert refused.status_code == 400
    assert (refused.json()["error"]["code"], refused.json()["error"]["details"]) == (
        "checkpoint_required",
        {"field": "checkpoint_every_minutes"},
    )
    assert Instance.objects.count() == 1
    outsider = APIClient()
    outsider.force_authenticate(charlie)
    assert outsider.get(f"/api/v1/instances/{data['id']}/costs").status_code == 404


def test_owners_set_the_organizations_idle_autostop_default_members_cannot_outsiders_get_404(
    client: Any, alice: Any, bob: Any, charlie: Any, org: Any, fake_backend: FakeBackend
) -> None:
    from instances.services import LaunchSpec, instance_launch
    from portal.models import AuditEvent

    url = f"/o/{org.slug}/instances/idle-autostop/"
    client.force_login(charlie)
    assert client.get(url).status_code == 404
    assert client.post(url, {"minutes": 5}).status_code == 404
    client.force_login(bob)
    assert client.post(url, {"minutes": 5}).status_code == 403
    client.force_login(alice)
    assert client.post(url, {"minutes": -1}).status_code == 400
    org.refresh_from_db()
    assert org.idle_autostop_minutes is None
    assert client.post(url, {"minutes": 45}).status_code == 302
    org.refresh_from_db()
    assert org.idle_autostop_minutes == 45
    assert list(
        AuditEvent.objects.filter(action="instances.idle_autostop_default_set").values_list("actor", "extra")
    ) == [(alice.pk, {"from": None, "to": 45})]
    assert 'value="45"' in client.get(url).content.decode()
    shell = {"gpu_type": "cpu-local", "gpu_count": 1, "kind": "interactive", "command": ["sleep", "1"]}
    inherits = instance_launch(organization=org, user=alice, spec=LaunchSpec(name="a", **shell))
    own = instance_launch(organization=org, user=alice, spec=LaunchSpec(name="b", idle_autostop_minutes=0, **shell))
    assert (inherits.idle_autostop_minutes, own.idle_autostop_minutes) == (45, 0)
    assert client.post(url, {"minutes": ""}).status_code == 302  # empty = off
    org.refresh_from_db()
    assert org.idle_autostop_minutes is None
