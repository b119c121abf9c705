"""THE main journey on the local backend with real torchrun (slow; about 1-3 minutes on 2 cores).

A user with trial credit accepts the legal corpus's license (the corpus is imported through the datasets app's
real pipeline, from a slice of ``../shared/corpora/legal`` under its own file name, so it gets the corpus's
real catalog entry and license), launches a 2-slot FSDP job on its shards through the API, the job reports
steps and writes automatic checkpoints; the test then signals the job's process group as a preemption does
(SIGTERM: the runtime saves a checkpoint at the current step and exits "preempted"); the reconcile marks the
instance preempted, resumes the job from the newest complete checkpoint on the freed capacity, and the job
finishes with a loss curve of one point per step, none repeated and none skipped.

The runtime's callbacks reach the portal through a WSGI server pumped from the test's own thread (one
request at a time, between reconcile passes), so the database is used from one thread only: the same test
runs on SQLite (in-memory) and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or Path(__file__).resolve().parents[3] / "shared" / "corpora")
LEGAL = CORPORA / "legal" / "legal_zh_lawrefbook.jsonl"
MAX_STEPS = 30
SLICE_BYTES = 300_000


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class PumpedPortal:
    """The portal's WSGI app on 127.0.0.1, serving one request per :meth:`pump` call, in the caller's thread."""

    def __init__(self) -> None:
        from django.core.wsgi import get_wsgi_application

        self.server: WSGIServer = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=_QuietHandler)
        self.server.timeout = 0.05
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def pump(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.server.handle_request()

    def close(self) -> None:
        self.server.server_close()


def wait_until(
    portal: PumpedPortal,
    predicate: Callable[[], Any],
    *,
    timeout: float,
    what: str,
    reconcile: bool = True,
    logs: Callable[[], str] = lambda: "",
) -> Any:
    """Pump callbacks and run the reconcile until ``predicate()`` is truthy (a deadline, not an assertion
    on time: it only bounds a hung test)."""
    from instances.services import instances_reconcile

    deadline = time.monotonic() + timeout
    while True:
        portal.pump(0.3)
        if reconcile:
            instances_reconcile()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{logs()}")


@pytest.fixture
def portal(transactional_db: Any, settings: Any, tmp_path: Path) -> Iterator[PumpedPortal]:
    p = PumpedPortal()
    settings.SITE_URL = p.url
    settings.DATA_DIR = tmp_path / "data"
    settings.INSTANCES_BACKEND = "local"
    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp_path / "data" / "workspaces"), "slots": 2}
    settings.INSTANCES_CHECKPOINT_ROOT = str(tmp_path / "data" / "checkpoints")
    settings.INSTANCES_STOP_GRACE_S = 60
    settings.INSTANCES_PREEMPT_RESUME_DELAY_S = 0
    yield p
    p.close()


def _legal_slice(folder: Path) -> Path:
    if not LEGAL.exists():
        pytest.skip(f"corpus {LEGAL} not found (set PORTAL_CORPORA_DIR)")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / LEGAL.name  # the corpus's own file name: its catalog entry and license
    size = 0
    with open(LEGAL, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            dst.write(line)
            size += len(line.encode())
            if size >= SLICE_BYTES:
                break
    return out


def _alive(pgid: int) -> bool:
    """Whether any process of the group lives (finished launchers started by this process are reaped first:
    a zombie still counts as a group member)."""
    from instances.backends.local import _reap_children

    _reap_children()
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
def test_a_trial_user_trains_on_the_legal_corpus_survives_a_preemption_and_finishes(
    portal: PumpedPortal, alice: Any, alice_org: Any, tmp_path: Path
) -> None:
    from django.core.management import call_command
    from django.utils import timezone
    from rest_framework.test import APIClient

    from billing.choices import GrantKind
    from billing.services import credit_grant_create
    from datasets.selectors import required_license_version
    from datasets.services import agreement_accept, corpus_import, text_sha256
    from instances.backends.local import LOG_FILE, LocalBackend
    from instances.models import Instance, InstanceRunSegment, JobMetric, TrainingJob
    from instances.selectors import loss_curve, newest_complete_checkpoint
    from instances.services import nodes_sync

    # the platform: catalog, the local node (2 CPU slots), the legal corpus imported by the real pipeline
    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    version = corpus_import(path=_legal_slice(tmp_path / "corpus"), domain="legal")
    # the user: trial credit, then the corpus license accepted
    credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key=f"trial:{alice_org.pk}",
    )
    lv = required_license_version(version)
    agreement_accept(
        organization=alice_org,
        user=alice,
        license_version=lv,
        shown_text_sha256=text_sha256(lv.text),
        ip="127.0.0.1",
        user_agent="pytest",
        dataset=version.dataset,
    )

    api = APIClient()
    api.force_authenticate(alice)
    resp = api.post(
        "/api/v1/jobs",
        {
            "name": "legal-tiny",
            "gpu_type": "cpu-local",
            "gpu_count": 2,
            "dataset_version_ids": [version.pk],
            "model_preset": "tiny",
            "engine": "fsdp",
            "checkpoint_every_steps": 4,
            "checkpoint_every_minutes": 0,
            "keep_last": 3,
            "hyperparameters": {
                "seq_len": 32,
                "micro_batch": 2,
                "grad_accum": 1,
                "max_steps": MAX_STEPS,
                "warmup_steps": 2,
                "lr": 1e-3,
                "log_every_steps": 1,
                "report_interval_s": 0.5,
            },
        },
        format="json",
        HTTP_IDEMPOTENCY_KEY="e2e-1",
    )
    assert resp.status_code == 201, resp.content
    job = TrainingJob.objects.get(pk=resp.json()["id"])
    instance = job.instance
    assert instance.status == "provisioning"
    first = job.attempts.get(number=1)
    pgid, ws1 = LocalBackend.parse_handle(first.handle)

    def logs() -> str:
        return "\n".join(
            (ws / LOG_FILE).read_text(errors="replace")[-3000:] for ws in sorted((Path(ws1).parent).glob("attempt-*"))
        )

    # it trains, reports steps, and writes automatic checkpoints
    cp = wait_until(
        portal,
        lambda: job.checkpoints.filter(step__gte=8).first(),
        timeout=240,
        what="an automatic checkpoint at step ≥ 8",
        logs=logs,
    )
    instance.refresh_from_db()
    assert instance.status == "running"
    assert cp.complete and Path(cp.location).is_dir()

    # preemption: SIGTERM to the whole process group, as a node's shutdown would
    os.killpg(pgid, signal.SIGTERM)
    wait_until(
        portal, lambda: not _alive(pgid), timeout=120, what="the preempted job to exit", reconcile=False, logs=logs
    )
    saved = newest_complete_checkpoint(job)
    wait_until(
        portal,
        lambda: job.attempts.filter(number=2).exclude(handle="").exists(),
        timeout=60,
        what="the reconcile to resume the job",
        logs=logs,
    )
    first.refresh_from_db()
    assert first.state == "preempted"
    assert first.exit_code == 85
    saved = newest_complete_checkpoint(job)
    assert saved is not None

    # it resumes from the newest complete checkpoint and finishes
    wait_until(
        portal,
        lambda: TrainingJob.objects.get(pk=job.pk).outcome == "finished",
        timeout=300,
        what="the resumed job to finish",
        logs=logs,
    )
    job.refresh_from_db()
    instance.refresh_from_db()
    second = job.attempts.get(number=2)
    assert second.state == "succeeded"
    assert second.started_step == saved.step
    assert instance.status == "stopped"
    assert instance.status_reason == "finished"
    assert job.preempt_count == 1 and job.crash_count == 0
    path = list(instance.transitions.values_list("to_status", flat=True))
    assert path == [
        "scheduling",
        "provisioning",
        "running",
        "preempted",
        "scheduling",
        "provisioning",
        "running",
        "stopped",
    ]
    # the curve: one point per step 1..MAX_STEPS, each step trained once, continuing where it stopped
    curve = loss_curve(job)
    assert [p.step for p in curve] == list(range(1, MAX_STEPS + 1))
    steps_reported = list(JobMetric.objects.filter(job=job).order_by("step").values_list("step", flat=True))
    assert steps_reported == list(range(1, MAX_STEPS + 1))
    assert set(JobMetric.objects.filter(job=job, step__gt=saved.step).values_list("attempt__number", flat=True)) == {2}
    assert all(p.loss > 0 for p in curve)
    # metering sees two closed run segments; nothing is left running
    assert InstanceRunSegment.objects.filter(instance=instance, ended_at__isnull=True).count() == 0
    assert InstanceRunSegment.objects.filter(instance=instance).count() == 2
    assert not _alive(pgid)
    events = [json.loads(x) for x in (Path(second.handle.split(":", 2)[2]) / "events.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "started" and events[0]["step"] == saved.step
    assert Instance.objects.get(pk=instance.pk).placement == []
