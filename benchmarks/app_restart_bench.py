"""How long a killed model server of a checkpoint app is down when the health check restarts it, and what the
check costs when every server is healthy.

    .venv/bin/python benchmarks/app_restart_bench.py [--rounds 5] [--threads 1]

Builds a tiny export (the runtime's ``tiny`` Llama, random weights, a 300-id BPE tokenizer — loading, not
training, is what a restart repeats), starts it with the local deployment backend as a checkpoint version of an
app (SQLite in a temp folder), then per round: SIGKILL the server's process group, run
``portal.marketplace.tasks.app_deployments_check`` once (it sees the dead process, claims the row, starts a new
server from the same export and waits for ``/healthz``) and call ``/generate`` on the new server. Prints the
check's wall time for a dead server (= the restart), the time to the first generated answer after it, and the
check's wall time when the server is healthy (``alive`` + ``GET /healthz``), as p50 / max in ms.

What it leaves out: beat's period (the check runs every 60 s, so a crash waits up to 60 s before this starts),
a GPU model's load time (seconds to minutes for billions of parameters) and, on Kubernetes, the pod's
scheduling, image pull and readiness probe period (``KubernetesDeployments`` waits for a ready replica).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
_tmp = tempfile.mkdtemp(prefix="app-restart-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")
os.environ.setdefault("PORTAL_DATA_DIR", _tmp)
os.environ.setdefault("SQLITE_PATH", str(Path(_tmp) / "bench.sqlite3"))
os.environ["DJANGO_DEBUG"] = "0"
os.environ["APP_DEPLOYMENTS_BACKEND"] = "local"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def tiny_export(out: Path) -> Path:
    """A loadable Hugging Face export: the ``tiny`` preset with random weights and a small BPE tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from instances.runtime.model import build_model
    from instances.serving import EXPORT_FORMAT, EXPORT_INFO, TOKENIZER_FILE

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        ["第一条 为了规范合同行为，保护当事人的合法权益，制定本法。"] * 50,
        trainers.BpeTrainer(
            vocab_size=300, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
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


def ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1000:8.1f} ms   max {max(values) * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="APP_SERVER_THREADS of each server")
    args = parser.parse_args()
    settings.APP_SERVER_THREADS = args.threads
    call_command("migrate", verbosity=0)

    from instances import serving as inference
    from portal.marketplace import services, tasks
    from portal.marketplace.choices import ServingKind, VersionStatus
    from portal.marketplace.deployments import checkpoint_version_activate, deployment_backend
    from portal.marketplace.models import AppVersion
    from portal.selectors import organization_for_user
    from portal.services import user_signup

    user = user_signup(email="bench@example.com", password="correct horse battery 9", name="bench")  # noqa: S106
    org = organization_for_user(user=user)
    app = services.app_create(
        publisher=org,
        user=user,
        name="Restart bench",
        category="legal",
        description="",
        input_schema=services.TEXT_INPUT_SCHEMA,
        output_schema=services.TEXT_OUTPUT_SCHEMA,
        price_per_call_micros=0,
    )
    version, _ = services.app_version_add(
        app=app,
        user=None,
        kind=ServingKind.CHECKPOINT,
        checkpoint_ref="instances.checkpoint:0",
        status=VersionStatus.BUILDING,
    )
    export = tiny_export(Path(settings.DATA_DIR) / "apps" / app.slug / "v1")
    backend = deployment_backend()
    t0 = time.perf_counter()
    deployment = backend.start(name=f"app-version-{version.pk}", model_dir=export)
    cold = time.perf_counter() - t0
    AppVersion.objects.filter(pk=version.pk).update(
        artifact_path=str(export), deployment={**deployment, "stage": "serving"}
    )
    checkpoint_version_activate(version_id=version.pk)
    payload = {"text": "第一条", "max_new_tokens": 8}

    restarts, first_answers, healthy_checks = [], [], []
    try:
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            counts = tasks.app_deployments_check()
            healthy_checks.append(time.perf_counter() - t0)
            assert counts["healthy"] == 1, counts
            dead = AppVersion.objects.get(pk=version.pk).deployment
            os.killpg(int(dead["pid"]), signal.SIGKILL)
            while backend.alive(dead):
                time.sleep(0.01)
            t0 = time.perf_counter()
            counts = tasks.app_deployments_check()
            restarts.append(time.perf_counter() - t0)
            assert counts["restarted"] == 1, counts
            inference.generate(
                deployment=AppVersion.objects.get(pk=version.pk).deployment, payload=payload, timeout_s=60
            )
            first_answers.append(time.perf_counter() - t0)
    finally:
        services.app_version_undeploy(version=AppVersion.objects.get(pk=version.pk))

    record = AppVersion.objects.get(pk=version.pk).deployment
    print(
        f"model server restarts on this machine ({os.cpu_count()} CPUs, {args.threads} thread(s) per server, "
        f"{args.rounds} rounds; first start {cold * 1000:.0f} ms)"
    )
    print(f"  health check, server healthy        {ms(healthy_checks)}")
    print(f"  health check, server killed         {ms(restarts)}   (detect + restart + /healthz)")
    print(f"  check start -> first answer         {ms(first_answers)}")
    print(f"  recorded: restarts={record.get('restarts')} last_restart_s={record.get('last_restart_s')}")


if __name__ == "__main__":
    main()
