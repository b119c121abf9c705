"""Benchmark: launch latency and preemption recovery on the local backend (prints figures; asserts nothing).

    .venv/bin/python benchmarks/launch_bench.py [--kill term|kill|both] [--steps 60] [--seq-len 64]

Sets up a throw-away portal (SQLite file and data folder in a temporary directory, Celery eager), imports a
slice of the legal corpus through the datasets pipeline, gives a user trial credit and the corpus license,
then for each kill mode:

* **launch latency**: from the ``POST /api/v1/jobs`` call to (a) the first training step finished, by the
  runtime's clock (its first ``progress`` event in ``events.jsonl``) and (b) the first step *seen by the
  portal* (the callback stored it). The runtime batches reports every ``report_interval_s`` (0.5 s here).
* **preemption recovery**: the job's process group gets SIGTERM (a preemption notice: the runtime saves a
  checkpoint at the current step), or every process of the job gets SIGKILL (a lost node: the newest interval
  checkpoint is all there is; SIGKILL to the group alone would miss torchrun's workers, which live in their
  own sessions);
  measured from the kill to the first resumed step finished (runtime clock) and seen by the portal, and the
  **work lost** = last step reported before the kill − step resumed from.

The portal loop (callbacks served by a WSGI server pumped from this thread + ``instances_reconcile``) runs
every ~50 ms, which bounds the resolution of the "seen by the portal" figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
CORPORA = Path(os.environ.get("PORTAL_CORPORA_DIR") or ROOT.parent / "shared" / "corpora")
LEGAL = CORPORA / "legal" / "legal_zh_lawrefbook.jsonl"


def _setup(tmp: Path) -> None:
    os.environ["PORTAL_DATA_DIR"] = str(tmp / "data")
    os.environ["SQLITE_PATH"] = str(tmp / "bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    os.environ["HF_HUB_OFFLINE"] = "1"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.INSTANCES_BACKEND_OPTIONS = {"workspace_root": str(tmp / "data" / "workspaces"), "slots": 2}
    settings.INSTANCES_CHECKPOINT_ROOT = str(tmp / "data" / "checkpoints")
    settings.INSTANCES_PREEMPT_RESUME_DELAY_S = 0
    call_command("migrate", verbosity=0)
    call_command("seed_catalog", verbosity=0)


def _events(ws: Path) -> list[dict[str, Any]]:
    path = ws / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def _t(ev: dict[str, Any]) -> float:
    return datetime.fromisoformat(ev["time"].replace("Z", "+00:00")).timestamp()


class Portal:
    def __init__(self) -> None:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from django.core.wsgi import get_wsgi_application

        class Quiet(WSGIRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

        self.server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
        self.server.timeout = 0.02
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def until(self, predicate: Any, timeout: float = 600) -> Any:
        from instances.services import instances_reconcile

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.server.handle_request()
            instances_reconcile()
            value = predicate()
            if value:
                return value
        raise SystemExit("timed out")


def run(mode: str, args: argparse.Namespace, portal: Portal, user: Any, version: Any) -> dict[str, Any]:
    from rest_framework.test import APIClient

    from instances.backends.local import LocalBackend, _reap_children
    from instances.backends.procfs import job_processes, signal_all
    from instances.models import JobMetric, TrainingJob

    api = APIClient()
    api.force_authenticate(user)
    t_call = time.time()
    resp = api.post(
        "/api/v1/jobs",
        {
            "name": f"bench-{mode}",
            "gpu_type": "cpu-local",
            "gpu_count": 2,
            "dataset_version_ids": [version.pk],
            "model_preset": "tiny",
            "engine": args.engine,
            "checkpoint_every_steps": args.every,
            "checkpoint_every_minutes": 0,
            "hyperparameters": {
                "seq_len": args.seq_len,
                "micro_batch": 2,
                "max_steps": args.steps,
                "warmup_steps": 2,
                "log_every_steps": 1,
                "report_interval_s": 0.5,
            },
        },
        format="json",
    )
    t_api = time.time()
    assert resp.status_code == 201, resp.content
    job = TrainingJob.objects.get(pk=resp.json()["id"])
    first = job.attempts.get(number=1)
    pgid, ws1 = LocalBackend.parse_handle(first.handle)
    portal.until(lambda: JobMetric.objects.filter(job=job).exists())
    t_seen = time.time()
    first_ev = next(e for e in _events(ws1) if e["type"] == "progress")
    kill_at = args.kill_step
    # the kill is triggered by the runtime's own log (not the portal's view, which lags by a report interval)
    portal.until(lambda: any(e["type"] == "progress" and e["step"] >= kill_at for e in _events(ws1)))
    t_kill = time.time()
    if mode == "term":  # a preemption notice: SIGTERM to the group; torchrun forwards it to its workers
        os.killpg(pgid, signal.SIGTERM)
    else:  # a lost node: every process of the job dies at once (workers live in their own sessions)
        signal_all(job_processes(str(ws1), pgid), signal.SIGKILL)

    def gone() -> bool:
        _reap_children()
        return not job_processes(str(ws1), pgid)

    portal.until(gone)
    portal.until(lambda: job.attempts.filter(number=2).exclude(handle="").exists())
    second = job.attempts.get(number=2)
    _, ws2 = LocalBackend.parse_handle(second.handle)
    last_before = max(e["step"] for e in _events(ws1) if e["type"] == "progress")
    portal.until(lambda: JobMetric.objects.filter(attempt=second).exists())
    t_seen2 = time.time()
    ev2 = _events(ws2)
    started = next(e for e in ev2 if e["type"] == "started")
    first2 = next(e for e in ev2 if e["type"] == "progress")
    portal.until(lambda: TrainingJob.objects.get(pk=job.pk).outcome == "finished")
    steps = list(JobMetric.objects.filter(job=job).order_by("step", "attempt__number").values_list("step", flat=True))
    return {
        "mode": "SIGTERM (preemption notice)" if mode == "term" else "SIGKILL (node lost)",
        "api_call_s": t_api - t_call,
        "launch_first_step_runtime_s": _t(first_ev) - t_call,
        "launch_first_step_seen_s": t_seen - t_call,
        "recovery_first_step_runtime_s": _t(first2) - t_kill,
        "recovery_first_step_seen_s": t_seen2 - t_kill,
        "last_step_before_kill": last_before,
        "resumed_from_step": started["step"],
        "steps_lost": last_before - started["step"],
        "steps_reported_twice": len(steps) - len(set(steps)),
        "finished_steps": max(steps),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kill", choices=("term", "kill", "both"), default="both")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--kill-step", type=int, default=27)
    ap.add_argument("--every", type=int, default=10, help="checkpoint every N steps")
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--engine", default="fsdp")
    args = ap.parse_args()
    if not LEGAL.exists():
        raise SystemExit(f"corpus {LEGAL} not found")
    with tempfile.TemporaryDirectory(prefix="launch-bench-") as d:
        tmp = Path(d)
        _setup(tmp)
        from django.conf import settings
        from django.utils import timezone

        from billing.choices import GrantKind
        from billing.services import credit_grant_create
        from datasets.selectors import required_license_version
        from datasets.services import agreement_accept, corpus_import, text_sha256
        from instances.services import nodes_sync
        from portal.selectors import organization_for_user
        from portal.services import user_signup

        portal = Portal()
        settings.SITE_URL = portal.url
        nodes_sync()
        (tmp / "corpus").mkdir()
        src = tmp / "corpus" / LEGAL.name
        with open(LEGAL, encoding="utf-8") as fin, open(src, "w", encoding="utf-8") as fout:
            size = 0
            for line in fin:
                fout.write(line)
                size += len(line.encode())
                if size > 300_000:
                    break
        t = time.time()
        version = corpus_import(path=src, domain="legal")
        print(f"corpus slice imported through the pipeline in {time.time() - t:.1f} s ({version.tokens} tokens)")
        user = user_signup(email="bench@example.com", password="correct horse battery 9", name="bench")  # noqa: S106
        org = organization_for_user(user=user)
        credit_grant_create(
            organization=org,
            amount_micros=10_000_000,
            kind=GrantKind.TRIAL,
            expires_at=timezone.now() + timedelta(days=30),
            idempotency_key="bench-trial",
        )
        lv = required_license_version(version)
        agreement_accept(
            organization=org,
            user=user,
            license_version=lv,
            shown_text_sha256=text_sha256(lv.text),
            ip="127.0.0.1",
            user_agent="bench",
            dataset=version.dataset,
        )
        print(
            f"tiny preset, {args.engine}, 2 CPU slots, seq_len {args.seq_len}, {args.steps} steps, "
            f"checkpoint every {args.every} steps, kill at step ≥ {args.kill_step}; "
            f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
        )
        modes = ["term", "kill"] if args.kill == "both" else [args.kill]
        for mode in modes:
            r = run(mode, args, portal, user, version)
            print(f"\n== {r['mode']} ==")
            print(f"  API call (validate, create, schedule, submit torchrun): {r['api_call_s']:.2f} s")
            print(f"  launch → first step finished (runtime clock):          {r['launch_first_step_runtime_s']:.2f} s")
            print(f"  launch → first step seen by the portal:                {r['launch_first_step_seen_s']:.2f} s")
            rt = r["recovery_first_step_runtime_s"]
            print(f"  kill → first resumed step finished (runtime clock):    {rt:.2f} s")
            print(f"  kill → first resumed step seen by the portal:          {r['recovery_first_step_seen_s']:.2f} s")
            print(
                f"  last step reported before the kill: {r['last_step_before_kill']}, resumed from step "
                f"{r['resumed_from_step']}: work lost = {r['steps_lost']} step(s); "
                f"steps reported twice = {r['steps_reported_twice']}; finished at step {r['finished_steps']}"
            )
        portal.server.server_close()


if __name__ == "__main__":
    main()
