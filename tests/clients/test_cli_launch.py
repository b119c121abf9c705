"""The CLI's launch commands take everything the API takes for a launch (issue 24): ``instances launch`` opts out
of idle autostop with ``--idle-minutes 0``, picks the tier and attaches volumes; ``jobs launch`` the tier and
volumes. The full-circle test runs the CLI as a subprocess against the end-to-end tests' pumped portal with the
real local backend and reads back what was stored."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest
from clients_support import cli_env_vars
from test_cli import Cli


def _parse(*argv: str) -> Any:
    from gpu_portal_cli.main import build_parser

    return build_parser().parse_args(list(argv))


def test_instances_launch_sends_every_field_the_api_takes() -> None:
    from gpu_portal_cli.main import instance_launch_body

    from instances.api.serializers import InstanceLaunchSerializer

    args = _parse(
        "instances", "launch", "--gpu-type", "cpu-local", "--gpu-count", "2", "--mode", "bare_metal",
        "--image", "pytorch-2.13", "--name", "box", "--idle-minutes", "0", "--tier", "interruptible",
        "--volume", "v", "--volume", "w", "--", "python", "train.py",
    )  # fmt: skip
    body = instance_launch_body(args)
    assert body == {
        "name": "box",
        "gpu_type": "cpu-local",
        "gpu_count": 2,
        "mode": "bare_metal",
        "image": "pytorch-2.13",
        "command": ["python", "train.py"],
        "volumes": ["v", "w"],
        "tier": "interruptible",
        "idle_autostop_minutes": 0,
    }
    assert set(body) == set(InstanceLaunchSerializer().fields)  # a field the API adds must reach the CLI
    # without the options: the organization's idle default (field left out), on demand, no volumes
    plain = instance_launch_body(_parse("instances", "launch", "--gpu-type", "cpu-local", "--", "sleep", "9"))
    assert "idle_autostop_minutes" not in plain
    assert (plain["tier"], plain["volumes"]) == ("on_demand", [])


def test_jobs_launch_sends_every_field_the_api_takes() -> None:
    from gpu_portal_cli.main import job_launch_body

    from instances.api.serializers import JobLaunchSerializer

    args = _parse(
        "jobs", "launch", "--gpu-type", "cpu-local", "--dataset", "3", "--preset", "tiny", "--engine", "ddp",
        "--hp", "max_steps=10", "--checkpoint-every-minutes", "5", "--checkpoint-every-steps", "0",
        "--keep-last", "2", "--tier", "interruptible", "--volume", "v", "--name", "j", "--image", "",
    )  # fmt: skip
    body = job_launch_body(args)
    assert (body["tier"], body["volumes"], body["hyperparameters"]) == ("interruptible", ["v"], {"max_steps": 10})
    assert set(body) == set(JobLaunchSerializer().fields)


def test_a_tier_the_api_does_not_offer_is_refused_by_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        _parse("instances", "launch", "--gpu-type", "cpu-local", "--tier", "spot", "--", "sleep", "9")
    assert exc.value.code == 2
    assert "invalid choice: 'spot'" in capsys.readouterr().err


@pytest.mark.slow
def test_the_cli_launches_with_idle_autostop_off_on_the_interruptible_tier_with_a_volume(
    portal: Any, funded: Any, alice: Any, alice_token: str, cli_env: dict[str, str], settings: Any, tmp_path: Any
) -> None:
    """Real local backend (a sleeping command); the values are read back from the database and the API."""
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from instances.interactive.volumes import volume_create
    from instances.models import Instance, VolumeAttachment
    from instances.services import instance_stop, instances_reconcile, nodes_sync

    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    settings.INSTANCES_STOP_GRACE_S = 5
    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    funded.idle_autostop_minutes = 30  # the organization's default, which the launch opts out of
    funded.save(update_fields=["idle_autostop_minutes"])
    volume = volume_create(organization=funded, user=alice, name="v", size_gb=1)
    cli = Cli(portal, cli_env_vars({**cli_env, "GPU_PORTAL_URL": portal.url, "GPU_PORTAL_TOKEN": alice_token}))

    res = cli(
        "--json", "instances", "launch", "--gpu-type", "cpu-local", "--name", "notebook", "--idle-minutes", "0",
        "--tier", "interruptible", "--volume", "v", "--no-wait", "--",
        sys.executable, "-c", "import time; time.sleep(600)",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    launched = json.loads(res.stdout)
    inst = Instance.objects.get(pk=launched["id"])
    assert (inst.name, inst.kind, inst.tier, inst.idle_autostop_minutes) == (
        "notebook",
        "interactive",
        "interruptible",
        0,
    )
    assert (launched["tier"], launched["idle_autostop_minutes"]) == ("interruptible", 0)
    assert list(VolumeAttachment.objects.filter(instance=inst).values_list("volume__name", flat=True)) == ["v"]

    api = APIClient()
    api.force_authenticate(alice)
    assert api.get(f"/api/v1/volumes/{volume.pk}").json()["attached_to"] == inst.pk
    shown = api.get(f"/api/v1/instances/{inst.pk}").json()
    assert (shown["tier"], shown["idle_autostop_minutes"]) == ("interruptible", 0)

    # a bad idle value is refused by the API, printed by the CLI, and nothing is launched
    res = cli("instances", "launch", "--gpu-type", "cpu-local", "--idle-minutes", "-1", "--no-wait", "--", "sleep", "9")
    assert res.returncode == 1
    assert res.stderr.splitlines()[0] == "gpu-portal: error: The request is not valid. (invalid, HTTP 400)"
    assert res.stderr.splitlines()[1].startswith("  idle_autostop_minutes: ")
    assert Instance.objects.count() == 1

    deadline = time.monotonic() + 60  # bounds a hung test
    while Instance.objects.get(pk=inst.pk).status != "running":
        assert time.monotonic() < deadline, Instance.objects.get(pk=inst.pk).status_reason
        portal.pump(0.2)
        instances_reconcile()
    instance_stop(instance=inst, reason="done", acting_user=alice)
    assert Instance.objects.get(pk=inst.pk).status == "stopped"
