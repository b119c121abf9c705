"""Nothing outlives runportal (issue 18): its Ctrl-C stops the local model servers of published apps as it stops
training jobs (``local_servers_suspend``), the health check leaves them alone meanwhile, and the next start brings
them back (``local_servers_resume``) — with a real ``python -m instances.serving.server`` process on a tiny,
randomly initialised Llama export (``tiny_export`` from the health-check tests)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_deployments_health as health
from test_deployments_health import FakeDeployments, _app, _served_version

tiny_export = health.tiny_export  # the health-check tests' fixture, used here too


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_runportal_stops_a_real_model_server_and_its_next_start_brings_it_back(
    settings: Any, tmp_path: Path, tiny_export: Path, alice: Any, alice_org: Any
) -> None:
    from instances import serving as inference
    from portal.marketplace import services, tasks
    from portal.marketplace.deployments import deployment_backend, local_servers_resume, local_servers_suspend
    from portal.marketplace.models import AppVersion
    from portal.models import AuditEvent

    settings.DATA_DIR = tmp_path
    settings.APP_DEPLOYMENTS_BACKEND = "local"
    settings.APP_DEPLOYMENTS_OPTIONS = {}
    backend = deployment_backend()
    version = _served_version(_app(alice_org, alice), backend, tiny_export)
    first_pid = version.deployment["pid"]
    new_pid = 0
    payload = {"text": "第一条", "max_new_tokens": 4}
    try:
        assert _alive(first_pid)
        assert local_servers_suspend() == [version.pk]
        version.refresh_from_db()
        assert not _alive(first_pid)  # the whole process group is gone, not just marked
        assert (version.deployment["stage"], version.deployment["pid"]) == ("suspended", None)
        assert local_servers_suspend() == []  # a second Ctrl-C stops nothing twice
        # while runportal is down, a health check (a worker still running) does not start it behind its back
        assert tasks.app_deployments_check()["skipped"] == 1
        assert AppVersion.objects.get(pk=version.pk).deployment["stage"] == "suspended"

        assert local_servers_resume() == [version.pk]
        version.refresh_from_db()
        d = version.deployment
        new_pid = d["pid"]
        assert d["stage"] == "serving" and new_pid != first_pid and _alive(new_pid) and inference.healthy(d)
        answer = inference.generate(deployment=d, payload=payload, timeout_s=60)
        assert isinstance(answer["output"], str) and 1 <= answer["tokens"] <= 4
        assert local_servers_resume() == []  # nothing suspended any more
        assert AuditEvent.objects.filter(action="marketplace.version_resumed", object_id=str(version.pk)).count() == 1
    finally:
        services.app_version_undeploy(version=AppVersion.objects.get(pk=version.pk))
    assert not _alive(new_pid)


def test_a_suspended_version_no_longer_serving_is_stopped_not_started(
    settings: Any, tmp_path: Path, alice: Any, alice_org: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from portal.marketplace import deployments
    from portal.marketplace.models import AppVersion

    fake = FakeDeployments()
    monkeypatch.setattr(deployments, "deployment_backend", lambda: fake)
    settings.APP_DEPLOYMENTS_BACKEND = "local"
    old = _served_version(_app(alice_org, alice), fake, tmp_path)
    AppVersion.objects.filter(pk=old.pk).update(deployment={**old.deployment, "pid": 4242})
    assert deployments.local_servers_suspend() == [old.pk]
    AppVersion.objects.filter(pk=old.pk).update(active=False)  # superseded while runportal was down
    assert deployments.local_servers_resume() == []
    assert AppVersion.objects.get(pk=old.pk).deployment["stage"] == "stopped"
    assert fake.started == [f"app-version-{old.pk}"]  # only the first start, none after


def test_the_kubernetes_backend_is_left_alone(settings: Any, alice: Any, alice_org: Any, tmp_path: Path) -> None:
    from portal.marketplace import deployments

    settings.APP_DEPLOYMENTS_BACKEND = "kubernetes"
    assert deployments.local_servers_suspend() == [] and deployments.local_servers_resume() == []
