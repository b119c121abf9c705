"""The ``gpu-portal`` CLI against a live test server.

Fast tests call the CLI's ``main()`` in this process against pytest-django's ``live_server`` (one request at
a time, so the server thread and the test never use the database together) or run it as a subprocess for
what only a process shows (exit code, the installed entry point). The slow test runs the CLI as a subprocess
against the end-to-end tests' pumped portal with the real local backend (torchrun) and eager Celery: it
launches a tiny CPU training job, follows its log, lists its checkpoints and stops it.
"""

from __future__ import annotations

import io
import json
import queue
import re
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clients_support import CLIENT_DIR, cli_command, cli_env_vars, e2e

PASSWORD = "correct horse battery 9"


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from gpu_portal_cli.main import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def logged_in(live_server: Any, alice_token: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GPU_PORTAL_URL", live_server.url)
    monkeypatch.setenv("GPU_PORTAL_TOKEN", alice_token)
    return live_server.url


# --- login, config, errors ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_login_checks_the_token_and_saves_it_readable_by_the_owner_only(
    live_server: Any,
    alice_token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(capsys, "--url", live_server.url + "/", "login", "--token", alice_token)
    assert (code, err) == (0, "")
    path = tmp_path / "xdg" / "gpu-portal" / "config.json"
    assert out == (
        f"Logged in to {live_server.url} as alice@example.com (organization alice, scope write). Saved to {path}.\n"
    )
    assert json.loads(path.read_text()) == {"url": live_server.url, "token": alice_token}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # later commands use the saved login
    code, out, err = run_main(capsys, "whoami")
    assert code == 0 and out.splitlines()[0] == "alice@example.com (alice), token organization alice, scope write"

    code, out, err = run_main(capsys, "logout")
    assert (code, out, path.exists()) == (0, "Logged out.\n", False)

    # the token can come on stdin, so it never shows in the process list
    monkeypatch.setattr("sys.stdin", io.StringIO(alice_token + "\n"))
    code, out, err = run_main(capsys, "--url", live_server.url, "login")
    assert (code, err) == (0, "")
    assert json.loads(path.read_text()) == {"url": live_server.url, "token": alice_token}


@pytest.mark.django_db(transaction=True)
def test_a_refused_token_is_not_saved(
    live_server: Any, alice_token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "--url", live_server.url, "login", "--token", alice_token + "x")
    assert (code, out) == (1, "")
    assert err.startswith("gpu-portal: error: ")
    assert "(authentication_failed, HTTP 401)" in err
    assert "run `gpu-portal login` again" in err
    assert not (tmp_path / "xdg" / "gpu-portal").exists()


def test_without_a_login_it_says_how_to_log_in(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main(capsys, "wallet")
    assert (code, out) == (1, "")
    assert err == (
        "gpu-portal: error: not logged in: run `gpu-portal login` (or set GPU_PORTAL_URL and GPU_PORTAL_TOKEN)\n"
    )


@pytest.mark.django_db(transaction=True)
def test_a_bad_token_is_a_clear_error_and_exit_code_1_from_the_installed_command(
    live_server: Any, alice_token: str, cli_env: dict[str, str]
) -> None:
    env = cli_env_vars({**cli_env, "GPU_PORTAL_URL": live_server.url, "GPU_PORTAL_TOKEN": "gpp_bad_token"})
    proc = subprocess.run([*cli_command(), "wallet"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    first = proc.stderr.splitlines()[0]
    assert first.startswith("gpu-portal: error: ") and first.endswith("(authentication_failed, HTTP 401)")
    assert proc.stderr.splitlines()[1] == "  check GPU_PORTAL_TOKEN or run `gpu-portal login` again"


def test_an_unreachable_portal_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GPU_PORTAL_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("GPU_PORTAL_TOKEN", "gpp_x_y")
    code, out, err = run_main(capsys, "wallet")
    assert (code, out) == (1, "")
    assert err.startswith(f"gpu-portal: error: cannot reach the portal at http://127.0.0.1:{port}: ")


def test_the_package_declares_the_gpu_portal_command() -> None:
    import tomllib

    meta = tomllib.loads((CLIENT_DIR / "pyproject.toml").read_text())
    assert meta["project"]["scripts"] == {"gpu-portal": "gpu_portal_cli.main:main"}


# --- wallet, datasets, jobs (fast: no torchrun) ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_wallet_shows_balance_and_grants(logged_in: str, funded: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from billing.models import CreditGrant

    grant = CreditGrant.objects.get(wallet__organization=funded)
    code, out, err = run_main(capsys, "wallet")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "Organization   alice"
    assert lines[1] == "Balance        10.000000 CNY  (trial 10.000000, paid 0.000000)"
    assert lines[2].startswith("Trial expires  ")
    assert lines[4].split() == ["GRANT", "KIND", "AMOUNT", "REMAINING", "GRANTED", "EXPIRES"]
    assert lines[5].split()[:4] == [str(grant.pk), "trial", "10.000000", "10.000000"]
    assert len(lines) == 6

    code, out, _ = run_main(capsys, "wallet", "--json")
    data = json.loads(out)
    assert (code, data["balance"], data["balance_micros"], data["currency"]) == (0, "10.000000", 10_000_000, "CNY")
    assert [g["id"] for g in data["grants"]] == [grant.pk]


@pytest.mark.django_db(transaction=True)
def test_datasets_list_and_accept(logged_in: str, corpus_version: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from datasets.models import Agreement

    ds = corpus_version.dataset
    code, out, err = run_main(capsys, "datasets", "list")
    assert (code, err) == (0, "")
    assert [line.split() for line in out.splitlines()] == [
        ["ID", "SLUG", "NAME", "DOMAIN", "VERSION", "TOKENS", "LICENSE", "FEE"],
        [str(ds.pk), "cli-corpus", "CLI", "corpus", "legal", "1", "12400", "cli-license", "free"],
    ]
    code, out, _ = run_main(capsys, "--json", "datasets", "list", "--domain", "finance")
    assert (code, json.loads(out)) == (0, [])

    # accepting needs --yes when nobody can be asked; nothing is written without it
    code, out, err = run_main(capsys, "datasets", "accept", str(ds.pk))
    assert code == 1 and err.splitlines()[-1] == (
        "gpu-portal: error: accepting a license needs --yes when not run interactively"
    )
    assert Agreement.objects.count() == 0
    code, out, err = run_main(capsys, "datasets", "accept", str(ds.pk), "--yes")
    agreement = Agreement.objects.get()
    assert (code, err) == (0, "")
    assert out == f"Accepted CLI corpus license version 1 for dataset {ds.pk} (agreement {agreement.pk}).\n"
    assert (agreement.organization.slug, agreement.user.email, agreement.license_version_id) == (
        "alice",
        "alice@example.com",
        corpus_version.license_version_id,
    )


@pytest.mark.django_db(transaction=True)
def test_api_errors_print_the_envelope(logged_in: str, funded: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from instances.models import Instance

    # a domain refusal: message, code, status and the envelope's details
    code, out, err = run_main(capsys, "jobs", "launch", "--gpu-type", "cpu-local", "--dataset", "1", "--no-wait")
    assert (code, out) == (1, "")
    assert err == ("gpu-portal: error: Unknown GPU type cpu-local. (unknown_gpu_type, HTTP 400)\n  field: gpu_type\n")
    # a validation error: one line per field
    code, out, err = run_main(capsys, "jobs", "launch", "--gpu-type", "cpu-local", "--dataset", "0", "--no-wait")
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == "gpu-portal: error: The request is not valid. (invalid, HTTP 400)"
    assert err.splitlines()[1].startswith("  dataset_version_ids: ")
    assert Instance.objects.count() == 0

    code, out, err = run_main(capsys, "jobs", "checkpoints", "999999")
    assert (code, err) == (1, "gpu-portal: error: Not found. (not_found, HTTP 404)\n")


@pytest.mark.django_db(transaction=True)
def test_charlie_cannot_see_alices_job(
    live_server: Any, charlie: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from portal.choices import TokenScope
    from portal.selectors import organization_for_user
    from portal.services import api_token_create

    token = api_token_create(
        user=charlie, organization=organization_for_user(user=charlie), name="cli", scope=TokenScope.WRITE
    ).plaintext
    monkeypatch.setenv("GPU_PORTAL_URL", live_server.url)
    monkeypatch.setenv("GPU_PORTAL_TOKEN", token)
    code, out, _ = run_main(capsys, "--json", "jobs", "list")
    assert (code, json.loads(out)) == (0, [])


@pytest.mark.django_db(transaction=True)
def test_instances_launch_list_and_stop(
    logged_in: str, funded: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command
    from instances_support import FakeBackend

    from instances.models import GpuType, Instance, Node
    from instances.services import backend as boundary

    call_command("seed_catalog", verbosity=0)
    capsys.readouterr()  # its summary lines
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    backend = FakeBackend()
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)

    code, out, err = run_main(
        capsys,
        "--json",
        "instances",
        "launch",
        "--gpu-type",
        "cpu-local",
        "--name",
        "box",
        "--no-wait",
        "--idempotency-key",
        "cli-1",
        "--",
        "python",
        "-c",
        "print(1)",
    )
    assert code == 0, err
    launched = json.loads(out)
    inst = Instance.objects.get()
    assert (launched["id"], launched["status"], launched["command"]) == (
        inst.pk,
        "provisioning",
        ["python", "-c", "print(1)"],
    )
    assert (inst.name, inst.idempotency_key, inst.kind) == ("box", "cli-1", "interactive")

    code, out, _ = run_main(capsys, "instances", "list")
    assert [line.split()[:6] for line in out.splitlines()] == [
        ["ID", "NAME", "KIND", "STATUS", "GPU", "COUNT"],
        [str(inst.pk), "box", "interactive", "provisioning", "cpu-local", "1"],
    ]

    code, out, err = run_main(capsys, "instances", "stop", str(inst.pk), "--wait", "--interval", "0.1")
    assert code == 0, err
    assert out.splitlines()[1].split()[:4] == [str(inst.pk), "box", "interactive", "stopped"]
    assert err == f"instance {inst.pk}: stopped\n"
    inst.refresh_from_db()
    assert inst.status == "stopped" and backend.stopped == [inst.attempts.get().handle]


@pytest.mark.django_db(transaction=True)
def test_a_job_launched_with_the_cli_rolls_back_to_a_checkpoint(
    logged_in: str, licensed: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The compute backend is the stand-in here; the runtime's reports go through the callback service."""
    from django.core.management import call_command
    from instances_support import FakeBackend

    from instances import services
    from instances.models import GpuType, Node, TrainingJob
    from instances.services import backend as boundary

    call_command("seed_catalog", verbosity=0)
    capsys.readouterr()
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    backend = FakeBackend()
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)

    code, out, err = run_main(
        capsys,
        "jobs",
        "launch",
        "--gpu-type",
        "cpu-local",
        "--dataset",
        str(licensed.pk),
        "--name",
        "rb",
        "--hp",
        "max_steps=12",
        "--no-wait",
    )
    assert code == 0, err
    job = TrainingJob.objects.get()
    assert err == f"Job {job.pk} launched on instance {job.instance_id} (1 × cpu-local).\n"
    attempt = job.attempts.get(number=1)
    events: list[dict[str, Any]] = [
        {"seq": 1, "type": "started", "time": "2026-03-01T08:00:00Z", "step": 0, "world_size": 1}
    ]
    for seq, step in enumerate((4, 8), start=2):
        events.append(
            {
                "seq": seq,
                "type": "checkpoint",
                "time": "2026-03-01T08:00:02Z",
                "step": step,
                "path": f"/ckpt/step-{step:08d}",
                "bytes": 1000 * step,
                "loss": 7.0,
            }
        )
    services.job_events_receive(
        job_id=job.pk, token=services.attempt_token(attempt), body={"attempt": 1, "events": events}
    )

    code, out, _ = run_main(capsys, "jobs", "checkpoints", str(job.pk))
    rows = [line.split() for line in out.splitlines()]
    assert [r[1:5] for r in rows[1:]] == [["8", "7", "7.8", "KiB"], ["4", "7", "3.9", "KiB"]]  # newest first
    code, out, err = run_main(capsys, "jobs", "rollback", str(job.pk), "--step", "4")
    assert code == 0, err
    checkpoint = job.checkpoints.get(step=4)
    assert out.splitlines()[0] == f"Job {job.pk} rolls back to step 4 (checkpoint {checkpoint.pk})."
    assert backend.stopped == [attempt.handle]
    assert job.attempts.get(number=2).resume_from_step == 4

    # step 8 was set aside by that rollback: refused before anything is sent, naming the steps there are
    code, out, err = run_main(capsys, "jobs", "rollback", str(job.pk), "--step", "8")
    assert (code, out) == (1, "")
    assert err == (
        f"gpu-portal: error: job {job.pk} has no checkpoint at step 8 to roll back to (checkpoints you can use: "
        "steps 4)\n"
    )
    assert (job.attempts.count(), backend.stopped) == (2, [attempt.handle])


@pytest.mark.django_db(transaction=True)
def test_apps_invoke_prints_the_output_and_the_cost(
    live_server: Any,
    alice: Any,
    alice_org: Any,
    charlie: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from billing.selectors import wallet_balance
    from billing.services import wallet_top_up
    from portal.choices import TokenScope
    from portal.marketplace import services
    from portal.marketplace.choices import AppState, AppVisibility, ServingKind
    from portal.marketplace.models import AppCall
    from portal.selectors import organization_for_user
    from portal.services import api_token_create

    schema = {
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string", "maxLength": 50}},
        "additionalProperties": False,
    }
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Contract review",
        category="legal",
        description="Finds risky clauses.",
        input_schema=schema,
        output_schema={"type": "object"},
        price_per_call_micros=500_000,
        visibility=AppVisibility.PUBLIC,
    )
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO, endpoint_url="", lineage=None)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    org = organization_for_user(user=charlie)
    wallet_top_up(organization=org, amount_micros=10_000_000, idempotency_key="cli-topup")
    token = api_token_create(user=charlie, organization=org, name="cli", scope=TokenScope.WRITE).plaintext
    monkeypatch.setenv("GPU_PORTAL_URL", live_server.url)
    monkeypatch.setenv("GPU_PORTAL_TOKEN", token)

    code, out, err = run_main(capsys, "apps", "invoke", app.slug, "--input", '{"text": "第一条 合同"}')
    call = AppCall.objects.get()
    assert code == 0, err
    assert json.loads(out) == {"output": {"text": "第一条 合同"}}
    assert err == f"call {call.pk}: 0.500000 CNY, {call.latency_ms} ms\n"
    assert wallet_balance(organization=org).total_micros == 9_500_000

    # the app's input schema refuses it: the envelope's message, nothing charged
    code, out, err = run_main(capsys, "apps", "invoke", app.slug, "--input", '{"txt": 1}')
    assert (code, out) == (1, "")
    assert "(input_invalid, HTTP 422)" in err.splitlines()[0]
    # not an object: refused before anything is sent
    code, out, err = run_main(capsys, "apps", "invoke", app.slug, "--input", "[1]")
    assert (code, err) == (1, "gpu-portal: error: --input must be a JSON object\n")
    assert AppCall.objects.filter(price_micros__gt=0).count() == 1
    assert wallet_balance(organization=org).total_micros == 9_500_000


def _followed_job(monkeypatch: pytest.MonkeyPatch, backend: Any) -> Any:
    """A launched job whose compute backend is ``backend`` (a stand-in: no torchrun here)."""
    import contextlib

    from django.core.management import call_command
    from instances_support import training_job_launch

    from datasets.models import DatasetVersion
    from instances.models import GpuType, Node
    from instances.services import backend as boundary
    from portal.models import Organization, User

    call_command("seed_catalog", verbosity=0)
    Node.objects.create(name="local", gpu_type=GpuType.objects.get(code="cpu-local"), gpus=2, block="local")
    monkeypatch.setattr(boundary, "compute_backend", lambda: backend)
    return training_job_launch(
        organization=Organization.objects.get(slug="alice"),
        user=User.objects.get(email="alice@example.com"),
        version=DatasetVersion.objects.get(),
        capture=lambda execute: contextlib.nullcontext(),  # no test transaction: on-commit work runs at once
    )


def _sleeps(monkeypatch: pytest.MonkeyPatch, steps: list[Callable[[], None]]) -> list[float]:
    """Run ``steps`` in turn where ``jobs logs --follow`` sleeps between polls (caught up); the CLI's own
    clock only: the live server's threads keep the real one."""
    import types

    from gpu_portal_cli import main as cli_main

    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        steps[len(slept) - 1]()

    monkeypatch.setattr(cli_main, "time", types.SimpleNamespace(sleep=sleep, monotonic=time.monotonic))
    return slept


@pytest.mark.django_db(transaction=True)
def test_logs_follow_prints_every_line_by_offset_repeats_bursts_and_the_next_attempt(
    logged_in: str,
    licensed: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Real log files on disk under a local-backend handle; the rest of the backend is the stand-in."""
    from instances_support import FakeBackend

    from instances.models import Instance, JobAttempt

    job = _followed_job(monkeypatch, FakeBackend())
    ws = tmp_path / "ws"
    (ws / "attempt-1").mkdir(parents=True)
    log = ws / "attempt-1" / "logs.txt"
    log.write_text("start\n" + "same\n" * 25)  # more identical lines than any overlap guess can anchor on
    JobAttempt.objects.filter(job=job, number=1).update(handle=f"local:1:{ws / 'attempt-1'}")

    def append(text: str) -> Callable[[], None]:
        return lambda: log.open("a").write(text) and None

    def resume() -> None:  # attempt 1 ends with a last line; attempt 2 starts its own log
        append("same\n")()
        JobAttempt.objects.filter(job=job, number=1).update(state="preempted")
        (ws / "attempt-2").mkdir()
        (ws / "attempt-2" / "logs.txt").write_text("resumed\nsame\n")
        JobAttempt.objects.create(
            instance=job.instance, job=job, number=2, backend="local", handle=f"local:2:{ws / 'attempt-2'}"
        )

    def end() -> None:  # the last line is written before the job is seen stopped
        (ws / "attempt-2" / "logs.txt").open("a").write("bye\n")
        Instance.objects.filter(pk=job.instance_id).update(status="stopped")

    burst = "".join(f"tick {i}\n" for i in range(4500))  # more than two answers' worth between two polls
    slept = _sleeps(monkeypatch, [append("same\n" * 5 + "next\n"), append(burst), resume, end])
    capsys.readouterr()  # the catalog's summary lines
    code, out, err = run_main(capsys, "jobs", "logs", str(job.pk), "--follow", "--interval", "0.5")
    assert (code, slept) == (0, [0.5, 0.5, 0.5, 0.5])
    expected = ["start", *["same"] * 30, "next", *[f"tick {i}" for i in range(4500)], "same"]
    assert out.splitlines() == [*expected, "resumed", "same", "bye"]
    assert err == "gpu-portal: attempt 2\n"


@pytest.mark.django_db(transaction=True)
def test_logs_follow_marks_the_lines_the_portal_no_longer_has_with_their_count(
    logged_in: str, licensed: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster's pod log (the stand-in serves it) is gone between two polls; the portal's copy keeps its
    last 2,000 lines of 3,003: the follower, at offset 3, is told 1,000 lines are gone, then reads on."""
    from instances_support import FakeBackend

    from instances.models import Instance, JobAttempt, JobLogArchive

    class PodLogs(FakeBackend):
        served: list[str] | None = ["a", "b", "c"]

        def logs(self, handle: str, *, rank: int = 0, lines: int | None = 200) -> list[str] | None:
            return None if self.served is None else (self.served if lines is None else self.served[-lines:])

    backend = PodLogs()
    job = _followed_job(monkeypatch, backend)
    JobAttempt.objects.filter(job=job, number=1).update(backend="kubernetes")
    attempt = JobAttempt.objects.get(job=job, number=1)
    whole = ["a", "b", "c", *[f"line {i}" for i in range(3000)]]

    def pods_gone() -> None:
        backend.served = None
        JobLogArchive.objects.create(
            attempt=attempt, rank=0, text="".join(f"{x}\n" for x in whole[-2000:]), first_line=1003
        )

    def end() -> None:
        Instance.objects.filter(pk=job.instance_id).update(status="stopped")

    _sleeps(monkeypatch, [pods_gone, end])
    capsys.readouterr()
    code, out, err = run_main(capsys, "jobs", "logs", str(job.pk), "--follow", "--interval", "0.5")
    assert code == 0
    assert out.splitlines() == ["a", "b", "c", *whole[1003:]]
    assert err == "gpu-portal: 1000 lines of attempt 1 dropped here: the portal no longer has them\n"
    code, out, _ = run_main(capsys, "--json", "jobs", "logs", str(job.pk), "--follow")  # the job has ended
    assert [json.loads(x) for x in out.splitlines()][:2] == [{"line": whole[-200]}, {"line": whole[-199]}]


@pytest.mark.parametrize(
    ("zone", "shown"),
    [
        ("UTC", "2026-12-01 09:58:21 UTC"),
        ("Asia/Shanghai", "2026-12-01 17:58:21 CST"),  # as the console shows it to a user in that zone
        ("Asia/Dubai", "2026-12-01 13:58:21 UTC+04:00"),  # a zone whose abbreviation is a number ("+04")
    ],
)
def test_times_are_shown_in_this_machines_time_zone_labelled_with_it(
    zone: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_portal_cli.output import cell

    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        assert cell("2026-12-01T17:58:21.423118+08:00") == shown
        assert [cell(None), cell(True), cell(["a", 1]), cell(0.000123456)] == ["-", "yes", "a,1", "0.0001235"]
    finally:
        monkeypatch.undo()
        time.tzset()


@pytest.mark.django_db(transaction=True)
def test_the_global_options_work_after_the_command_as_the_readme_shows_them(
    live_server: Any, alice_token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "login", "--url", live_server.url, "--token", alice_token)
    assert (code, err) == (0, "")
    assert json.loads((tmp_path / "xdg" / "gpu-portal" / "config.json").read_text()) == {
        "url": live_server.url,
        "token": alice_token,
    }
    code, out, err = run_main(capsys, "jobs", "list", "--json", "-o", "alice")
    assert (code, json.loads(out), err) == (0, [], "")
    code, out, err = run_main(capsys, "jobs", "list", "--organization", "charlie")  # not the token's: a 404
    assert (code, out) == (1, "")
    assert "(not_found, HTTP 404)" in err
    code, out, err = run_main(capsys, "logout", "--json")
    assert (code, json.loads(out)) == (0, {"logged_out": True})


def test_each_commands_help_shows_the_global_options(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpu_portal_cli.main import main

    monkeypatch.setenv("COLUMNS", "200")  # the usage on one line

    with pytest.raises(SystemExit) as done:
        main(["login", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert out.startswith("usage: gpu-portal login [-h] [--json] [--url URL] [-o ORGANIZATION] [--token TOKEN]")


@pytest.mark.parametrize(
    ("argv", "command", "unrecognized", "hint", "options"),
    [
        (
            ["jobs", "checkpoints", "5", "--jsn"],
            "jobs checkpoints",
            "--jsn",
            "  --jsn: did you mean --json?",
            "-h/--help, --json, --url URL, -o/--organization ORGANIZATION",
        ),
        (
            ["login", "--uri", "http://127.0.0.1:1", "--token", "gpp_x"],
            "login",
            "--uri http://127.0.0.1:1",
            "  --uri: did you mean --url?",
            "-h/--help, --json, --url URL, -o/--organization ORGANIZATION, --token TOKEN",
        ),
    ],
)
def test_a_wrong_flag_names_the_valid_options_and_sends_nothing(
    argv: list[str],
    command: str,
    unrecognized: str,
    hint: str,
    options: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gpu_portal_cli.main import main

    monkeypatch.setenv("COLUMNS", "200")  # the usage on one line
    with pytest.raises(SystemExit) as refused:
        main(argv)  # no portal listens: a request would fail as "cannot reach", not like this
    out, err = capsys.readouterr()
    assert (refused.value.code, out) == (2, "")
    lines = err.splitlines()
    assert lines[0].startswith(f"usage: gpu-portal {command} [-h] [--json] [--url URL] [-o ORGANIZATION]")
    assert lines[-3:] == [
        f"gpu-portal {command}: error: unrecognized arguments: {unrecognized}",
        hint,
        f"valid options of 'gpu-portal {command}': {options}",
    ]
    assert not (tmp_path / "xdg" / "gpu-portal").exists()  # nothing saved


def test_money_is_printed_exactly() -> None:
    from gpu_portal_cli.main import cny

    assert [cny(0), cny(1), cny(12_500_000), cny(10_000_000), cny(123_456)] == [
        "free",
        "0.000001 CNY",
        "12.50 CNY",
        "10.00 CNY",
        "0.123456 CNY",
    ]


# --- the journey on the real local backend (slow) ----------------------------------------------------------


def _signal_masks(pid: int) -> str:
    """The ``SigPnd``/``SigBlk``/``SigIgn``/``SigCgt`` lines of ``/proc/<pid>/status`` (empty where unreadable)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return ""
    return ", ".join(
        line.replace("\t", " ") for line in lines if line.startswith(("SigPnd", "SigBlk", "SigIgn", "SigCgt"))
    )


# A shell's foreground job starts with SIGINT at its default and unblocked; a child inherits an ignored or
# blocked SIGINT from its parent (POSIX exec keeps both), and Python then never turns Ctrl-C into
# KeyboardInterrupt. The test process is not a terminal: whatever some library in it did to SIGINT, the CLI
# starts as a terminal would start it (twice in CI the CLI outlived a Ctrl-C every 5 s for 4 minutes with an
# empty stderr: what an inherited ignored or blocked SIGINT does; the cause in the test process is not known).
AS_A_TERMINAL_STARTS_IT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT]); "
    "signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
]


class Cli:
    """Runs the CLI as a subprocess while the test's thread serves the pumped portal and runs the reconcile."""

    def __init__(self, portal: Any, env: dict[str, str]) -> None:
        self.portal, self.env = portal, env

    def __call__(
        self, *args: str, stop_when: Callable[[list[str]], bool] | None = None, timeout: float = 240
    ) -> subprocess.CompletedProcess[str]:
        from instances.services import instances_reconcile

        proc = subprocess.Popen(
            [*AS_A_TERMINAL_STARTS_IT, *cli_command(), *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str] = queue.Queue()
        out: list[str] = []
        err: list[str] = []

        def read(stream: Any, into: list[str], q: queue.Queue[str] | None) -> None:
            for line in stream:
                into.append(line)
                if q is not None:
                    q.put(line)

        readers = [
            threading.Thread(target=read, args=(proc.stdout, out, lines), daemon=True),
            threading.Thread(target=read, args=(proc.stderr, err, None), daemon=True),
        ]
        for t in readers:
            t.start()
        deadline = time.monotonic() + timeout  # bounds a hung test; not an assertion on speed
        interrupted_at: float | None = None
        while proc.poll() is None:
            self.portal.pump(0.2)
            instances_reconcile()
            # Ctrl-C once the output says so; again if the CLI is still there 5 s later (a signal that lands
            # while the interpreter is still starting is not seen as a KeyboardInterrupt)
            again = interrupted_at is None or time.monotonic() - interrupted_at > 5
            if stop_when is not None and again and stop_when(out):
                proc.send_signal(signal.SIGINT)
                interrupted_at = time.monotonic()
            if time.monotonic() > deadline:
                masks = _signal_masks(proc.pid)  # what the CLI did with the signals it was sent, for the report
                proc.kill()
                raise AssertionError(
                    f"gpu-portal {' '.join(args)} did not finish ({masks}; Ctrl-C sent: {interrupted_at is not None})"
                    f"\n{''.join(out[-40:])}\n{''.join(err)}"
                )
        for t in readers:
            t.join(timeout=10)
        return subprocess.CompletedProcess(args, proc.returncode, "".join(out), "".join(err))


@pytest.mark.slow
@pytest.mark.engine_independent(
    "the CLI against the local backend's real torchrun: the API endpoints it calls are tested on PostgreSQL in "
    "tests/instances/test_instances_api.py and tests/instances/test_checkpoints_and_logs.py"
)
def test_the_cli_launches_a_job_follows_its_log_lists_checkpoints_and_stops_it(
    portal: Any, licensed: Any, alice_token: str, cli_env: dict[str, str]
) -> None:
    from django.core.management import call_command

    from instances.backends.local import LocalBackend
    from instances.models import TrainingJob
    from instances.services import instances_reconcile, nodes_sync

    call_command("seed_catalog", verbosity=0)
    assert nodes_sync() == 1
    cli = Cli(portal, cli_env_vars({**cli_env, "GPU_PORTAL_URL": portal.url, "GPU_PORTAL_TOKEN": alice_token}))

    # launch: waits until running, with a status line per change on stderr (not a terminal here)
    res = cli(
        "--json",
        "jobs",
        "launch",
        "--name",
        "cli-tiny",
        "--gpu-type",
        "cpu-local",
        "--gpu-count",
        "1",
        "--dataset",
        str(licensed.pk),
        "--preset",
        "tiny",
        "--engine",
        "ddp",
        "--checkpoint-every-steps",
        "5",
        "--checkpoint-every-minutes",
        "0",
        "--keep-last",
        "2",
        "--hp",
        "seq_len=32",
        "--hp",
        "micro_batch=2",
        "--hp",
        "grad_accum=1",
        "--hp",
        "max_steps=100000",
        "--hp",
        "warmup_steps=2",
        "--hp",
        "lr=0.001",
        "--hp",
        "report_interval_s=0.5",
        "--interval",
        "0.3",
    )
    assert res.returncode == 0, res.stderr
    launched = json.loads(res.stdout)
    job = TrainingJob.objects.get(pk=launched["id"])
    assert (launched["name"], launched["status"], launched["gpu_type"], launched["gpu_count"]) == (
        "cli-tiny",
        "running",
        "cpu-local",
        1,
    )
    assert job.hyperparameters["max_steps"] == 100000 and job.hyperparameters["lr"] == 0.001
    progress = res.stderr.splitlines()
    assert progress[-1] == f"job {job.pk}: running"
    assert all(line.startswith(f"job {job.pk}: ") for line in progress)
    pgid, _ = LocalBackend.parse_handle(job.attempts.get(number=1).handle)

    # logs --follow prints the runtime's log as it grows; stopped with Ctrl-C once training has started
    res = cli(
        "jobs",
        "logs",
        str(job.pk),
        "--follow",
        "--interval",
        "0.3",
        stop_when=lambda out: any("started from step" in line for line in out),
    )
    assert res.returncode == 130, res.stderr
    started = [line for line in res.stdout.splitlines() if "started from step" in line]
    assert len(started) == 1  # a fresh start says so (issue 18: it used to read "resumed from step 0")
    assert re.fullmatch(r"\[runtime\] \d+ parameters, world 1, engine ddp, started from step 0", started[0])

    # checkpoints: wait for two complete ones, then list them as JSON and as a table
    deadline = time.monotonic() + 240
    while job.checkpoints.filter(complete=True).count() < 2:
        assert time.monotonic() < deadline, "no checkpoints"
        portal.pump(0.3)
        instances_reconcile()
    res = cli("--json", "jobs", "checkpoints", str(job.pk))
    assert res.returncode == 0, res.stderr
    listed = json.loads(res.stdout)
    assert len(listed) >= 2
    assert all(c["complete"] and c["step"] % 5 == 0 and c["attempt"] == 1 for c in listed)
    db_rows = {c.pk: c.step for c in job.checkpoints.all()}
    assert {c["id"]: c["step"] for c in listed}.items() <= db_rows.items()
    res = cli("jobs", "checkpoints", str(job.pk))
    assert res.stdout.splitlines()[0].split() == [
        "ID",
        "STEP",
        "LOSS",
        "SIZE",
        "COMPLETE",
        "ROLLED",
        "BACK",
        "ATTEMPT",
        "CREATED",
    ]

    # a rollback to a step without a checkpoint is refused by the CLI before anything is sent
    res = cli("jobs", "rollback", str(job.pk), "--step", "3")
    assert res.returncode == 1
    assert res.stderr.startswith(
        f"gpu-portal: error: job {job.pk} has no checkpoint at step 3 to roll back to (checkpoints you can use: steps "
    )
    assert job.attempts.count() == 1

    # stop, waiting until stopped: a final checkpoint, the processes gone
    res = cli("jobs", "stop", str(job.pk), "--wait", "--interval", "0.3")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[1].split()[:4] == [str(job.pk), "cli-tiny", "stopped", "stopped"]
    job.refresh_from_db()
    assert (job.instance.status, job.outcome) == ("stopped", "stopped")
    assert job.attempts.get(number=1).state == "stopped"
    assert not e2e._alive(pgid)

    res = cli("--json", "jobs", "list")
    assert [(j["id"], j["status"]) for j in json.loads(res.stdout)] == [(job.pk, "stopped")]
