"""Model servers of checkpoint app versions: the superseded version's server is stopped on activation, and the
health check (``portal.marketplace.tasks.app_deployments_check``) restarts a dead server, gives up after
``APP_SERVER_MAX_RESTARTS`` failures in a row, and is safe to run twice at once.

Most tests replace the deployment boundary (``instances.serving``'s backends) with ``FakeDeployments``; one
kills a real local model server process (``python -m instances.serving.server serve`` on a tiny, randomly
initialised Llama export — a real server, real generation; training it first would only add time) and lets
the task bring it back. A real cluster adds what ``test_kubernetes_deployments.py`` describes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_publish_checkpoint import LEGAL, _dataset_version, _job_with_checkpoint  # the publish tests' rows


class FakeDeployments:
    """Stands in for the deployment boundary: a server is an entry in ``running`` until stopped or "killed".

    ``failures``: how many next starts fail; ``during_start``: called at the start of each ``start`` (to run a
    second health check while the first one restarts); ``hung``: names whose server runs but fails /healthz;
    ``stop_errors``: how many next stops fail.
    """

    def __init__(self) -> None:
        self.running: dict[str, dict[str, Any]] = {}
        self.started: list[str] = []
        self.stopped: list[dict[str, Any]] = []
        self.failures = 0
        self.during_start: Any = None
        self.hung: set[str] = set()
        self.stop_errors = 0

    def start(self, *, name: str, model_dir: Any, deployment: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.during_start is not None:
            hook, self.during_start = self.during_start, None
            hook()
        self.started.append(name)
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the model server exited with code 1: out of memory")
        serial = len(self.started)
        dep = {
            "backend": "fake",
            "name": name,
            "url": f"http://fake/{name}/{serial}",
            "model_dir": str(model_dir),
            "serial": serial,
        }
        self.running[name] = dep
        self.hung.discard(name)
        return dep

    def alive(self, deployment: dict[str, Any]) -> bool:
        running = self.running.get(str(deployment.get("name")))
        return running is not None and running["serial"] == deployment.get("serial")

    def stop(self, deployment: dict[str, Any]) -> bool:
        if self.stop_errors:
            self.stop_errors -= 1
            raise RuntimeError("deleting Deployment apps/x: 503 Service Unavailable")
        self.stopped.append(deployment)
        if self.alive(deployment):
            del self.running[deployment["name"]]
            return True
        return False

    def healthy(self, deployment: dict[str, Any], timeout_s: float = 2.0) -> bool:
        return self.alive(deployment) and deployment["name"] not in self.hung

    def kill(self, name: str) -> None:
        del self.running[name]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeDeployments:
    from instances import serving as inference
    from portal.marketplace import deployments

    backend = FakeDeployments()
    monkeypatch.setattr(deployments, "deployment_backend", lambda: backend)
    monkeypatch.setattr(inference, "healthy", backend.healthy)
    return backend


def _app(org: Any, user: Any, name: str = "Legal drafting") -> Any:
    from portal.marketplace import services

    return services.app_create(
        publisher=org,
        user=user,
        name=name,
        category="legal",
        description="",
        input_schema=services.TEXT_INPUT_SCHEMA,
        output_schema=services.TEXT_OUTPUT_SCHEMA,
        price_per_call_micros=0,
    )


def _served_version(app: Any, backend: Any, model_dir: Path) -> Any:
    """A checkpoint version of ``app`` whose server ``backend`` started, made active the way a build does."""
    from portal.marketplace import services
    from portal.marketplace.choices import ServingKind, VersionStatus
    from portal.marketplace.deployments import checkpoint_version_activate
    from portal.marketplace.models import AppVersion

    version, _ = services.app_version_add(
        app=app,
        user=None,
        kind=ServingKind.CHECKPOINT,
        checkpoint_ref="instances.checkpoint:1",
        status=VersionStatus.BUILDING,
    )
    deployment = backend.start(name=f"app-version-{version.pk}", model_dir=model_dir)
    AppVersion.objects.filter(pk=version.pk).update(
        artifact_path=str(model_dir), deployment={**deployment, "stage": "serving"}
    )
    return checkpoint_version_activate(version_id=version.pk)


def _actions(version: Any) -> list[str]:
    from portal.models import AuditEvent

    return list(
        AuditEvent.objects.filter(object_type="marketplace.appversion", object_id=str(version.pk))
        .order_by("pk")
        .values_list("action", flat=True)
    )


# --- activation stops the superseded server ------------------------------------------------------------------


def test_publishing_a_new_checkpoint_version_stops_the_previous_versions_server_after_commit(
    settings: Any,
    tmp_path: Path,
    fake: FakeDeployments,
    alice: Any,
    alice_org: Any,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from instances import serving as inference
    from portal.marketplace import services

    def export(src: Any, out: Any, progress: Any = None, **kw: Any) -> dict[str, Any]:  # the slow test exports
        Path(out).mkdir(parents=True, exist_ok=True)
        return {}

    monkeypatch.setattr(inference, "export_checkpoint", export)
    settings.DATA_DIR = tmp_path
    cp = _job_with_checkpoint(alice_org, alice, _dataset_version(commercial_use=True), location=str(tmp_path))
    with django_capture_on_commit_callbacks(execute=True):
        app = services.app_publish_from_checkpoint(
            organization=alice_org,
            user=alice,
            job_id=cp.job_id,
            checkpoint_id=cp.pk,
            name="Legal drafting",
            category="legal",
        )
    v1 = app.versions.get()
    assert (v1.status, v1.active, v1.deployment["stage"]) == ("ready", True, "serving")

    with django_capture_on_commit_callbacks(execute=False) as enqueued:
        services.app_publish_from_checkpoint(
            organization=alice_org, user=alice, job_id=cp.job_id, checkpoint_id=cp.pk, app_slug=app.slug
        )
    with django_capture_on_commit_callbacks(execute=False) as after_activation:
        enqueued[0]()  # the build task (eager): export, start v2's server, activate v2
    assert fake.stopped == []  # nothing is stopped before the activation commits
    assert len(after_activation) == 1
    after_activation[0]()

    v1.refresh_from_db()
    v2 = app.versions.get(number=2)
    assert (v2.status, v2.active, v2.deployment["stage"]) == ("ready", True, "serving")
    assert [d["name"] for d in fake.stopped] == [f"app-version-{v1.pk}"]
    assert list(fake.running) == [f"app-version-{v2.pk}"]
    assert (v1.active, v1.status, v1.deployment["stage"], v1.deployment["pid"]) == (False, "ready", "stopped", None)
    assert v1.deployment["stopped_reason"] == "superseded by v2"
    assert _actions(v1)[-2:] == ["marketplace.version_superseded", "marketplace.version_server_stopped"]


def test_an_external_endpoint_version_has_nothing_to_stop_when_a_checkpoint_version_replaces_it(
    settings: Any,
    tmp_path: Path,
    fake: FakeDeployments,
    alice: Any,
    alice_org: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    from portal.marketplace import services
    from portal.marketplace.choices import ServingKind

    settings.APP_ALLOW_HTTP_ENDPOINTS = True
    app = _app(alice_org, alice)
    external, _ = services.app_version_add(
        app=app,
        user=alice,
        kind=ServingKind.EXTERNAL,
        endpoint_url="http://127.0.0.1:9/answer",  # never called; loopback: the dev setting allows it
    )
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        checkpoint = _served_version(app, fake, tmp_path)

    external.refresh_from_db()
    assert (external.active, checkpoint.active) == (False, True)
    assert fake.stopped == [] and callbacks == []
    assert external.deployment == {}
    assert _actions(external)[-1] == "marketplace.version_superseded"


def test_a_failed_stop_after_activation_leaves_the_new_version_active_and_the_check_stops_the_old_server(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from portal.marketplace import tasks

    app = _app(alice_org, alice)
    old = _served_version(app, fake, tmp_path)
    fake.stop_errors = 1
    with django_capture_on_commit_callbacks(execute=True):
        new = _served_version(app, fake, tmp_path)
    old.refresh_from_db()
    assert (new.active, old.active, old.deployment["stage"]) == (True, False, "serving")
    assert sorted(fake.running) == sorted([old.deployment["name"], new.deployment["name"]])

    counts = tasks.app_deployments_check()

    old.refresh_from_db()
    assert (counts["healthy"], counts["stopped"]) == (1, 1)
    assert list(fake.running) == [new.deployment["name"]]
    assert (old.deployment["stage"], old.deployment["stopped_reason"]) == ("stopped", "no longer the active version")


# --- the health check --------------------------------------------------------------------------------------------


def test_a_dead_server_is_restarted_from_the_same_export_and_the_restart_is_recorded(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from portal.marketplace import tasks

    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    name = version.deployment["name"]
    fake.kill(name)

    counts = tasks.app_deployments_check()

    version.refresh_from_db()
    d = version.deployment
    assert counts == {"healthy": 0, "restarted": 1, "restart_failed": 0, "unhealthy": 0, "skipped": 0, "stopped": 0}
    assert fake.started == [name, name]
    assert (d["stage"], d["serial"], d["url"], d["model_dir"]) == ("serving", 2, f"http://fake/{name}/2", str(tmp_path))
    assert (d["restarts"], d["restart_failures"], d["last_error"]) == (1, 0, "the model server is not running")
    assert d["last_restart_at"] and isinstance(d["last_restart_s"], float)
    assert "restart_claim" not in d and "restart_claimed_at" not in d
    assert _actions(version)[-1] == "marketplace.version_restarted"

    again = tasks.app_deployments_check()  # idempotent: a healthy server is left alone

    version.refresh_from_db()
    assert again["healthy"] == 1 and again["restarted"] == 0
    assert version.deployment == d and fake.started == [name, name]


def test_a_server_that_runs_but_fails_healthz_is_killed_and_restarted(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from portal.marketplace import tasks

    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    hung = dict(version.deployment)
    fake.hung.add(hung["name"])

    assert tasks.app_deployments_check()["restarted"] == 1

    version.refresh_from_db()
    assert fake.stopped[0]["serial"] == hung["serial"]  # the hung process was stopped first
    assert version.deployment["serial"] == 2
    assert version.deployment["last_error"] == "the model server does not answer /healthz"


def test_after_three_failed_restarts_in_a_row_the_deployment_is_unhealthy_and_left_alone(
    settings: Any, tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from portal.marketplace import tasks

    settings.APP_SERVER_MAX_RESTARTS = 3
    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    fake.kill(version.deployment["name"])
    fake.failures = 10
    error = "RuntimeError: the model server exited with code 1: out of memory"

    outcomes = [tasks.app_deployments_check() for _ in range(4)]

    version.refresh_from_db()
    d = version.deployment
    assert [(o["restart_failed"], o["unhealthy"]) for o in outcomes] == [(1, 0), (1, 0), (0, 1), (0, 1)]
    assert len(fake.started) == 1 + 3  # no fourth try
    assert (d["stage"], d["restart_failures"], d["last_error"], d.get("restarts", 0)) == ("unhealthy", 3, error, 0)
    assert d["unhealthy_reason"] == f"3 restarts in a row failed; last: {error}"
    assert (version.active, version.status) == (True, "ready")  # calls fail (nothing charged) until republished
    assert _actions(version)[-3:] == [
        "marketplace.version_restart_failed",
        "marketplace.version_restart_failed",
        "marketplace.version_unhealthy",
    ]


def test_a_good_check_resets_the_failure_streak(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from portal.marketplace import tasks

    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    fake.kill(version.deployment["name"])
    fake.failures = 1

    first, second = tasks.app_deployments_check(), tasks.app_deployments_check()

    assert [(c["restart_failed"], c["restarted"]) for c in (first, second)] == [(1, 0), (0, 1)]

    version.refresh_from_db()
    assert (version.deployment["stage"], version.deployment["restart_failures"]) == ("serving", 0)
    assert version.deployment["restarts"] == 1


def test_a_second_check_running_while_the_first_restarts_does_nothing(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    """Two beat ticks at once: the second finds the row claimed (``restarting``) and skips it. On PostgreSQL the
    claim is taken under ``SELECT … FOR UPDATE``; here the second run starts inside the first's restart."""
    from portal.marketplace import tasks

    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    fake.kill(version.deployment["name"])
    inner: list[dict[str, int]] = []
    fake.during_start = lambda: inner.append(tasks.app_deployments_check())

    outer = tasks.app_deployments_check()

    assert inner == [{"healthy": 0, "restarted": 0, "restart_failed": 0, "unhealthy": 0, "skipped": 1, "stopped": 0}]
    assert outer["restarted"] == 1
    assert len(fake.started) == 2  # the first start, one restart
    version.refresh_from_db()
    assert version.deployment["restarts"] == 1


def test_an_expired_claim_of_a_dead_worker_is_taken_over(
    settings: Any, tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from portal.marketplace import tasks
    from portal.marketplace.models import AppVersion

    settings.APP_SERVER_RESTART_LEASE_S = 900
    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    fake.kill(version.deployment["name"])
    stale = (timezone.now() - timedelta(seconds=901)).isoformat()
    AppVersion.objects.filter(pk=version.pk).update(
        deployment={
            **version.deployment,
            "stage": "restarting",
            "restart_claim": "dead-worker",
            "restart_claimed_at": stale,
        }
    )

    assert tasks.app_deployments_check()["restarted"] == 1
    version.refresh_from_db()
    assert version.deployment["stage"] == "serving" and "restart_claim" not in version.deployment


def test_suspended_apps_undeployed_versions_and_other_kinds_are_not_checked(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    from portal.marketplace import services, tasks
    from portal.marketplace.choices import AppState, ServingKind
    from portal.marketplace.models import App

    suspended = _served_version(_app(alice_org, alice, "Suspended"), fake, tmp_path)
    App.objects.filter(pk=suspended.app_id).update(state=AppState.SUSPENDED)
    undeployed = services.app_version_undeploy(version=_served_version(_app(alice_org, alice, "Off"), fake, tmp_path))
    services.app_version_add(app=_app(alice_org, alice, "Echo"), user=alice, kind=ServingKind.ECHO)
    fake.running.clear()
    started = list(fake.started)

    counts = tasks.app_deployments_check()

    assert counts == {"healthy": 0, "restarted": 0, "restart_failed": 0, "unhealthy": 0, "skipped": 1, "stopped": 0}
    assert fake.started == started
    undeployed.refresh_from_db()
    assert undeployed.deployment["stage"] == "stopped"


def test_a_superseded_version_whose_server_still_runs_is_stopped_by_the_check(
    tmp_path: Path, fake: FakeDeployments, alice: Any, alice_org: Any
) -> None:
    """Behind the stop after commit: a worker that died between the commit and the stop, or an external
    version that replaced a checkpoint version (``app_version_add``), leaves a server the check stops."""
    from portal.marketplace import services, tasks
    from portal.marketplace.choices import ServingKind

    app = _app(alice_org, alice)
    old = _served_version(app, fake, tmp_path)
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO)  # no stop on this path

    counts = tasks.app_deployments_check()

    old.refresh_from_db()
    assert counts["stopped"] == 1 and fake.running == {}
    assert (old.active, old.deployment["stage"], old.deployment["stopped_reason"]) == (
        False,
        "stopped",
        "no longer the active version",
    )
    assert tasks.app_deployments_check()["stopped"] == 0


# --- a real local model server, killed and restarted ------------------------------------------------------------


@pytest.fixture
def tiny_export(tmp_path: Path) -> Path:
    """A Hugging Face export the model server loads: the runtime's ``tiny`` Llama, randomly initialised, with a
    byte-level BPE tokenizer (300 ids) trained on ~20 kB of the legal corpus (or a fixed text without it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.model import build_model
    from instances.serving import EXPORT_FORMAT, EXPORT_INFO, TOKENIZER_FILE

    texts = ["第一条 为了规范合同行为，保护当事人的合法权益，制定本法。"] * 20
    if LEGAL.exists():
        with open(LEGAL, encoding="utf-8") as fh:
            texts = [json.loads(line)["text"][:2000] for _, line in zip(range(10), fh, strict=False)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        texts,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    out = tmp_path / "apps" / "legal" / "v1"
    model = build_model("tiny", vocab_size=tok.get_vocab_size(), seq_len=64, seed=0)
    model.save_pretrained(out, safe_serialization=True)
    tok.save(str(out / TOKENIZER_FILE))
    (out / EXPORT_INFO).write_text(
        json.dumps(
            {
                "format": EXPORT_FORMAT,
                "step": 0,
                "model": "tiny",
                "vocab_size": tok.get_vocab_size(),
                "eos_id": tok.token_to_id("<eos>"),
                "max_position_embeddings": int(model.config.max_position_embeddings),
            }
        )
    )
    return out


@pytest.mark.slow
def test_a_killed_local_model_server_is_restarted_by_the_task_and_the_version_answers_again(
    settings: Any, tmp_path: Path, tiny_export: Path, alice: Any, alice_org: Any
) -> None:
    from instances import serving as inference
    from portal.marketplace import services, tasks
    from portal.marketplace.deployments import deployment_backend

    settings.DATA_DIR = tmp_path
    settings.APP_DEPLOYMENTS_BACKEND = "local"
    settings.APP_DEPLOYMENTS_OPTIONS = {}
    backend = deployment_backend()
    assert isinstance(backend, inference.LocalDeployments)
    version = _served_version(_app(alice_org, alice), backend, tiny_export)
    first_pid = version.deployment["pid"]
    payload = {"text": "第一条", "max_new_tokens": 4}
    try:
        assert inference.generate(deployment=version.deployment, payload=payload, timeout_s=60)["tokens"] >= 1
        os.killpg(first_pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while backend.alive(version.deployment) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not backend.alive(version.deployment)
        with pytest.raises(OSError):
            inference.generate(deployment=version.deployment, payload=payload, timeout_s=5)

        counts = tasks.app_deployments_check()

        version.refresh_from_db()
        d = version.deployment
        assert counts["restarted"] == 1
        assert d["pid"] != first_pid and backend.alive(d) and inference.healthy(d)
        assert (d["stage"], d["restarts"], d["last_error"]) == ("serving", 1, "the model server is not running")
        assert d["model_dir"] == str(tiny_export.resolve())
        health = requests.get(f"{d['url'].rstrip('/')}/healthz", timeout=10).json()
        assert (health["ok"], health["device"]) == (True, "cpu")  # no GPU here; a GPU pod reports cuda
        answer = inference.generate(deployment=d, payload=payload, timeout_s=60)
        assert isinstance(answer["output"], str) and 1 <= answer["tokens"] <= 4
        assert tasks.app_deployments_check()["healthy"] == 1
    finally:
        services.app_version_undeploy(version=version.__class__.objects.get(pk=version.pk))
    version.refresh_from_db()
    assert version.deployment["stage"] == "stopped" and not backend.alive({**version.deployment, "pid": d["pid"]})


def test_the_app_page_shows_the_publisher_each_versions_server_state(
    settings: Any, tmp_path: Path, client: Any, fake: FakeDeployments, alice: Any, alice_org: Any, charlie: Any
) -> None:
    from portal.marketplace import tasks

    settings.APP_SERVER_MAX_RESTARTS = 1
    version = _served_version(_app(alice_org, alice), fake, tmp_path)
    client.force_login(alice)
    url = f"/o/{alice_org.slug}/apps/{version.app.slug}/"
    serving = client.get(url).content.decode()
    fake.kill(version.deployment["name"])
    fake.failures = 1
    tasks.app_deployments_check()
    unhealthy = client.get(url).content.decode()
    client.force_login(charlie)

    assert '<td data-testid="deployment-state"><span class="badge">Serving</span></td>' in serving
    assert (
        '<td data-testid="deployment-state"><span class="badge danger">Unhealthy, no longer restarted</span>'
        in unhealthy
    )
    assert (  # the summary in the reader's language, the technical error apart
        "1 restarts in a row failed; the last error: <code>RuntimeError: the model server exited with code 1: out of"
        " memory</code>" in unhealthy
    )
    assert client.get(url).status_code == 404
    assert client.get(f"/o/{charlie.organizations.get().slug}/apps/{version.app.slug}/").status_code == 404
