"""``manage.py runportal``: the embedded-default product in one command, stopped with one Ctrl-C.

Migrates the database, loads seed data (commands registered by other apps in ``SEED_COMMANDS`` that
exist), then starts the web server, a Celery worker and Celery beat as child processes, and stops them
all when any one exits or on Ctrl-C / SIGTERM; then checkpoints and stops the local backend's training
jobs, so that no process outlives the command. ``PORTAL_SITE_URL`` defaults to ``http://<addr>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandParser

# Optional seed commands, run in order when the app providing them is installed.
SEED_COMMANDS: list[tuple[str, list[str]]] = [
    ("seed_catalog", []),
    ("import_corpora", []),
]


class Command(BaseCommand):
    help = "Run web server + Celery worker + beat on the embedded defaults (SQLite, filesystem broker)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--addr", default=os.environ.get("PORTAL_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--no-seed", action="store_true", help="skip the seed and import commands")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        if not options["no_seed"]:
            available = get_commands()
            for name, argv in SEED_COMMANDS:
                if name in available:
                    call_command(name, *argv)
        if settings.CELERY_BROKER_URL.startswith("filesystem"):
            for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
                os.makedirs(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS[key]), exist_ok=True)
        # Links in e-mails and the training runtime's callback URL must point at the address served here.
        env = dict(os.environ)
        if not env.get("PORTAL_SITE_URL"):
            env["PORTAL_SITE_URL"] = f"http://{options['addr']}"
        py = sys.executable
        schedule = str(settings.DATA_DIR / "celerybeat-schedule")
        commands = {
            "web": [py, "manage.py", "runserver", options["addr"], "--noreload"],
            "worker": [py, "-m", "celery", "-A", "portal", "worker", "--loglevel", "INFO", "--concurrency", "2",
                       "--pool", "prefork", "--hostname", "embedded@%h"],
            "beat": [py, "-m", "celery", "-A", "portal", "beat", "--loglevel", "INFO", "--schedule", schedule],
        }
        procs: dict[str, subprocess.Popen[bytes]] = {}
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            if stopping:
                return
            stopping = True
            for proc in procs.values():
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 20
            for proc in procs.values():
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
            # No training process may outlive the product: checkpoint and stop local jobs (they resume
            # as preempted on the next start).
            from instances.services import local_jobs_suspend

            suspended = local_jobs_suspend()
            if suspended:
                self.stdout.write(f"checkpointed and stopped {len(suspended)} local training job(s)")

        signal.signal(signal.SIGTERM, lambda *_: stop())
        signal.signal(signal.SIGINT, lambda *_: stop())  # also when started with SIGINT ignored (nohup, &)
        try:
            for name, argv in commands.items():
                procs[name] = subprocess.Popen(argv, cwd=settings.BASE_DIR, env=env)
            self.stdout.write(self.style.SUCCESS(
                f"gpu-portal is running: http://{options['addr']}/  (web, worker, beat; Ctrl-C stops all)"))
            while not stopping:
                for name, proc in procs.items():
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with {proc.returncode}; stopping the rest")
                        stop()
                        break
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            stop()
