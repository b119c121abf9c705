"""Every ``gpu-portal`` command shown in README.md and clients/python/README.md, run as written against a live
test server (issue 25, item 3: the README's login failed).

The commands are taken from the files' code blocks (indented or fenced; ``\\`` continuations joined, shell
comments dropped) and compared with :data:`KNOWN`: a command added to a README without a case here fails the
test, as does a case whose command left the README. Each runs through the CLI's ``main()`` with its words as
the shell would split them, placeholders (``<job-id>`` …) and the example portal URLs replaced by real
objects and the live server, and must exit 0 with the output its case checks.

The compute backend is the stand-in; the CLI's waits (``--wait``, a launch waiting until running, ``logs
--follow``) run the reconcile where they sleep, so the live server and the test never use the database at
the same moment.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clients_support import CLIENT_DIR

ROOT = CLIENT_DIR.parents[1]
READMES = [ROOT / "README.md", CLIENT_DIR / "README.md"]

# (file, command as written, shell comments and line continuations taken out), in the files' order
KNOWN: list[tuple[str, str]] = [
    ("README.md", "gpu-portal login --url http://127.0.0.1:8000"),
    ("README.md", "gpu-portal wallet"),
    ("README.md", "gpu-portal datasets list --domain legal"),
    ("README.md", "gpu-portal datasets accept <dataset-id> --yes"),
    (
        "README.md",
        "gpu-portal jobs launch --gpu-type cpu-local --dataset <version-id> --preset tiny --engine ddp "
        "--hp seq_len=32 --hp micro_batch=2 --hp max_steps=200",
    ),
    ("README.md", "gpu-portal jobs logs <job-id> --follow"),
    ("README.md", "gpu-portal jobs checkpoints <job-id>"),
    ("README.md", "gpu-portal jobs rollback <job-id> --step <step>"),
    ("README.md", "gpu-portal jobs stop <job-id> --wait"),
    ("README.md", "gpu-portal instances launch --gpu-type A100-80G-SXM --gpu-count 8 -- python train.py"),
    (
        "README.md",
        "gpu-portal instances launch --gpu-type A100-80G-SXM --idle-minutes 0 --tier interruptible "
        "--volume data -- python train.py",
    ),
    ("README.md", "gpu-portal instances list"),
    ("README.md", """gpu-portal apps invoke contract-review --input '{"text": "…"}'"""),
    ("README.md", "gpu-portal --json jobs list"),
    ("clients/python/README.md", "gpu-portal login --url https://portal.example.com"),
    ("clients/python/README.md", "gpu-portal wallet"),
    (
        "clients/python/README.md",
        "gpu-portal jobs launch --gpu-type cpu-local --gpu-count 1 --dataset <version-id> --preset tiny "
        "--hp max_steps=50",
    ),
    ("clients/python/README.md", "gpu-portal jobs logs <job-id> --follow"),
]

# The order the cases run in (a job must exist before its checkpoints are listed, …), by command
ORDER = [
    "gpu-portal login --url https://portal.example.com",
    "gpu-portal login --url http://127.0.0.1:8000",
    "gpu-portal wallet",
    "gpu-portal datasets list --domain legal",
    "gpu-portal datasets accept <dataset-id> --yes",
    KNOWN[4][1],
    "gpu-portal jobs checkpoints <job-id>",
    "gpu-portal jobs rollback <job-id> --step <step>",
    "gpu-portal jobs stop <job-id> --wait",
    "gpu-portal jobs logs <job-id> --follow",
    KNOWN[16][1],
    KNOWN[9][1],
    KNOWN[10][1],
    "gpu-portal instances list",
    KNOWN[12][1],
    "gpu-portal --json jobs list",
]


def readme_commands(path: Path) -> list[str]:
    """The ``gpu-portal`` commands of ``path``'s code blocks (4-space indented or fenced), one string each:
    continuation lines joined, shell comments removed, words as ``shlex`` splits them joined by one space
    (quoted words quoted again)."""
    out: list[str] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            fenced = not fenced
            i += 1
            continue
        in_block = fenced or line.startswith("    ")
        if in_block and line.strip().startswith("gpu-portal "):
            text = line.strip()
            while _continues(text) and i + 1 < len(lines):
                i += 1
                text = _continues(text) + " " + lines[i].strip()
            out.append(shlex.join(shlex.split(text, comments=True)).replace("'<", "<").replace(">'", ">"))
        i += 1
    return out


def _continues(text: str) -> str:
    """``text`` without its trailing ``\\`` (a comment after it, two spaces and ``#``, ignored) when the
    command goes on on the next line, else ``""``."""
    code = text.split("  #", 1)[0].rstrip()
    return code[:-1].rstrip() if code.endswith("\\") else ""


def test_the_readmes_show_exactly_the_commands_this_test_runs() -> None:
    found = [(str(p.relative_to(ROOT)), c) for p in READMES for c in readme_commands(p)]
    assert found == KNOWN  # a new README command needs a case below (and an entry in KNOWN)
    assert sorted(set(ORDER)) == sorted({c for _, c in KNOWN})


class World:
    """The stand-in backend and what the runtime would report, advanced where the CLI sleeps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, ckpt_root: Path) -> None:
        from instances_support import FakeBackend

        from instances.services import backend as boundary

        class Backend(FakeBackend):
            def logs(self, handle: str, *, rank: int = 0, lines: int | None = 200) -> list[str] | None:
                return [f"{handle}: step 1 loss 5.70", f"{handle}: step 2 loss 5.41"]

        self.backend = Backend()
        self.ckpt_root = ckpt_root
        monkeypatch.setattr(boundary, "compute_backend", lambda: self.backend)
        clock = types.SimpleNamespace(sleep=self.tick, monotonic=time.monotonic)
        monkeypatch.setattr("gpu_portal_cli.api.time", clock)
        monkeypatch.setattr("gpu_portal_cli.main.time", clock)
        self.ticks = 0

    def tick(self, seconds: float) -> None:
        """One poll interval of the CLI: the reconcile sees what the backend says (running, stopped)."""
        from instances.services import instances_reconcile

        self.ticks += 1
        assert self.ticks < 200, "the CLI kept waiting"
        instances_reconcile()

    def trained(self, job: Any, steps: tuple[int, ...]) -> None:
        """The job's runtime reports progress and complete checkpoints at ``steps`` (folders on disk)."""
        from instances.services import attempt_token, job_events_receive

        attempt = job.attempts.order_by("-number").first()
        events: list[dict[str, Any]] = [{"seq": 1, "type": "started", "step": 0}]
        for step in steps:
            folder = Path(job.checkpoint_uri) / f"step-{step:08d}"
            folder.mkdir(parents=True)
            (folder / ".metadata").write_bytes(b"m")
            events.append({"seq": 1 + step, "type": "progress", "step": step, "loss": 6.0 - step / 100})
            events.append(
                {"seq": 2 + step, "type": "checkpoint", "step": step, "path": str(folder), "bytes": 2048, "loss": 6.0}
            )
        body = {"attempt": attempt.number, "events": events}
        job_events_receive(job_id=job.pk, token=attempt_token(attempt), body=body)


@pytest.mark.django_db(transaction=True)
def test_every_readme_command_runs_as_written_against_a_live_portal(
    live_server: Any,
    alice: Any,
    funded: Any,
    alice_token: str,
    corpus_version: Any,
    settings: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from django.core.management import call_command
    from instances_support import fund

    from instances.interactive.volumes import volume_create
    from instances.models import GpuType, Instance, Node, TrainingJob
    from portal.marketplace import services as apps
    from portal.marketplace.choices import AppState, AppVisibility, ServingKind

    call_command("seed_catalog", verbosity=0)
    cpu, a100 = GpuType.objects.get(code="cpu-local"), GpuType.objects.get(code="A100-80G-SXM")
    Node.objects.create(name="local", gpu_type=cpu, gpus=2, block="local")
    for name in ("a100-0", "a100-1"):
        Node.objects.create(name=name, gpu_type=a100, gpus=8, block="rack-1")
    fund(funded, 2000)  # 8 A100s for the launch's runway
    settings.INSTANCES_CHECKPOINT_ROOT = str(tmp_path / "ckpt")
    settings.INSTANCES_VOLUMES_ROOT = str(tmp_path / "volumes")
    settings.INSTANCES_JUPYTER_KINDS = ()  # the stand-in starts no JupyterLab beside its instances
    volume_create(organization=funded, user=alice, name="data", size_gb=1)
    app = apps.app_create(
        publisher=funded,
        user=alice,
        name="Contract review",
        category="legal",
        description="Finds risky clauses.",
        input_schema={"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
        output_schema={"type": "object"},
        price_per_call_micros=10_000,
        visibility=AppVisibility.PUBLIC,
    )
    apps.app_version_add(app=app, user=alice, kind=ServingKind.ECHO, endpoint_url="", lineage=None)
    apps.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    apps.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    assert app.slug == "contract-review"
    world = World(monkeypatch, tmp_path / "ckpt")
    capsys.readouterr()
    ids: dict[str, str] = {"<dataset-id>": str(corpus_version.dataset_id), "<version-id>": str(corpus_version.pk)}

    def run(command: str) -> tuple[str, str]:
        argv = [ids.get(w, w) for w in shlex.split(command)][1:]
        argv = [
            live_server.url if re.fullmatch(r"https?://(127\.0\.0\.1:8000|portal\.example\.com)", w) else w
            for w in argv
        ]
        monkeypatch.setattr("sys.stdin", io.StringIO(alice_token + "\n"))  # login reads the token from stdin
        from gpu_portal_cli.main import main

        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 0, f"{command}\n{out}\n{err}"
        return out, err

    def readme_job() -> TrainingJob:
        return TrainingJob.objects.get(hyperparameters__max_steps=200)

    def login(out: str, err: str) -> None:
        assert out.startswith(f"Logged in to {live_server.url} as alice@example.com (organization alice, scope write).")

    def wallet(out: str, err: str) -> None:
        assert out.splitlines()[0] == "Organization   alice"
        assert out.splitlines()[1].startswith("Balance        2010.000000 CNY")

    def datasets_list(out: str, err: str) -> None:
        rows = [line.split() for line in out.splitlines()]
        assert rows[0][:2] == ["ID", "SLUG"] and [ids["<dataset-id>"], "cli-corpus"] in [r[:2] for r in rows]
        assert {r[4] for r in rows[1:]} == {"legal"}  # NAME is two words: DOMAIN is the fifth

    def accept(out: str, err: str) -> None:
        assert out.startswith(f"Accepted CLI corpus license version 1 for dataset {ids['<dataset-id>']} (agreement ")

    def job_launched(out: str, err: str) -> None:
        job = readme_job()
        ids["<job-id>"] = str(job.pk)
        assert err.splitlines()[0] == f"Job {job.pk} launched on instance {job.instance_id} (1 × cpu-local)."
        row = out.splitlines()[1]
        assert row.split()[0] == str(job.pk) and " running " in row
        assert (job.engine, job.instance.status, job.hyperparameters["seq_len"]) == ("ddp", "running", 32)
        world.trained(job, (100, 150))
        ids["<step>"] = "100"

    def checkpoints(out: str, err: str) -> None:
        rows = [line.split() for line in out.splitlines()]
        assert [r[1] for r in rows[1:]] == ["150", "100"]

    def rollback(out: str, err: str) -> None:
        job = readme_job()
        cp = job.checkpoints.get(step=100)
        assert out.splitlines()[0] == f"Job {job.pk} rolls back to step 100 (checkpoint {cp.pk})."
        assert job.attempts.get(number=2).resume_from_step == 100
        assert job.checkpoints.get(step=150).rolled_back is True

    def stopped(out: str, err: str) -> None:
        assert out.splitlines()[1].split()[0] == ids["<job-id>"] and " stopped " in out.splitlines()[1]
        assert readme_job().instance.status == "stopped"
        logs_of_the_stand_in()

    def logs_of_the_stand_in() -> None:
        """The attempts ran on the stand-in (their ``backend`` says "local", the setting): their log is read
        through its ``logs()``, as a cluster's pod log is."""
        from instances.models import JobAttempt

        JobAttempt.objects.update(backend=world.backend.name)

    def logs(out: str, err: str) -> None:
        assert out.splitlines() == [
            f"fake:job-{ids['<job-id>']}:2: step 1 loss 5.70",
            f"fake:job-{ids['<job-id>']}:2: step 2 loss 5.41",
        ]

    def second_job(out: str, err: str) -> None:
        job = TrainingJob.objects.get(hyperparameters__max_steps=50)
        assert (job.engine, job.model_preset, job.instance.status) == ("fsdp", "tiny", "running")

    def eight_a100(out: str, err: str) -> None:
        inst = Instance.objects.get(gpu_count=8)
        assert (inst.status, inst.command, inst.tier) == ("running", ["python", "train.py"], "on_demand")

    def interruptible(out: str, err: str) -> None:
        inst = Instance.objects.get(tier="interruptible")
        assert (inst.status, inst.idle_autostop_minutes, inst.gpu_count) == ("running", 0, 1)
        assert list(inst.volume_attachments.values_list("volume__name", flat=True)) == ["data"]

    def instances_list(out: str, err: str) -> None:
        assert len(out.splitlines()) == 1 + Instance.objects.count() == 5

    def invoke(out: str, err: str) -> None:
        assert json.loads(out) == {"output": {"text": "…"}}
        from portal.marketplace.models import AppCall

        call = AppCall.objects.get()  # the net cost: the publisher's share of 0.01 CNY came back to alice
        assert err == f"call {call.pk}: 0.003000 CNY, {call.latency_ms} ms\n"

    def jobs_json(out: str, err: str) -> None:
        assert sorted(j["id"] for j in json.loads(out)) == sorted(TrainingJob.objects.values_list("pk", flat=True))

    checks: dict[str, Callable[[str, str], None]] = {
        ORDER[0]: login,
        ORDER[1]: login,
        ORDER[2]: wallet,
        ORDER[3]: datasets_list,
        ORDER[4]: accept,
        ORDER[5]: job_launched,
        ORDER[6]: checkpoints,
        ORDER[7]: rollback,
        ORDER[8]: stopped,
        ORDER[9]: logs,
        ORDER[10]: second_job,
        ORDER[11]: eight_a100,
        ORDER[12]: interruptible,
        ORDER[13]: instances_list,
        ORDER[14]: invoke,
        ORDER[15]: jobs_json,
    }
    ran = []
    for command in ORDER:
        for _ in range(sum(1 for _, c in KNOWN if c == command)):  # as often as the READMEs show it
            out, err = run(command)
            checks[command](out, err)
            ran.append(command)
    assert sorted(ran) == sorted(c for _, c in KNOWN)
