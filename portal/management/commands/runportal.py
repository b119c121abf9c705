"""``manage.py runportal``: the embedded-default product in one command, stopped with one Ctrl-C.

Migrates the database, loads seed data (commands registered by other apps in ``SEED_COMMANDS`` that
exist), then starts the web server, a Celery worker and Celery beat as child processes. A worker or beat
that exits on its own is started again (its exit code and the restart are logged), so the web server keeps
serving; after ``MAX_RESTARTS`` restarts of one child within ``RESTART_WINDOW_S`` the command gives up and
stops everything, as it does when the web server exits. Ctrl-C / SIGTERM stops all children; then the local
backend's training jobs are checkpointed and stopped and the model servers of published apps are stopped, so
that no process outlives the command; the next start brings those servers back (``local_servers_resume``).
``PORTAL_SITE_URL`` defaults to ``http://<addr>``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

# Optional seed commands, run in order when the app providing them is installed.
SEED_COMMANDS: list[tuple[str, list[str]]] = [
    ("seed_catalog", []),
    ("import_corpora", []),
]

# Children that are restarted when they exit on their own; the web server is not (its exit stops all).
RESTARTABLE = ("worker", "bulk", "beat")
MAX_RESTARTS = 5  # restarts of one child within RESTART_WINDOW_S before the command gives up
RESTART_WINDOW_S = 600.0
# Ctrl-C: how long the children (web, workers, beat) get to end after SIGTERM, all at once, before SIGKILL. A
# worker killed mid-task loses nothing: tasks are acknowledged late (redelivered) and idempotent.
CHILD_STOP_S = 3.0


def embedded_env(environ: Mapping[str, str], addr: str) -> dict[str, str]:
    """The environment of ``runportal``'s children, from ``environ`` and the served ``addr`` (``host:port``):
    ``PORTAL_SITE_URL`` defaults to ``http://<addr>`` (e-mailed links and the training callbacks point here) and
    ``DJANGO_DEBUG`` to ``false``, so that a user of the embedded run sees the product's own pages for an unknown
    address or an error, never Django's technical ones (``DJANGO_DEBUG=true`` brings those back for developing).
    What a developer needs keeps working without DEBUG: static files are served from the apps' folders
    (``WHITENOISE_USE_FINDERS``), e-mails are printed (console backend) and tracebacks logged in this terminal."""
    env = dict(environ)
    if not env.get("PORTAL_SITE_URL"):
        env["PORTAL_SITE_URL"] = f"http://{addr}"
    env.setdefault("DJANGO_DEBUG", "false")
    return env


def descendants(pid: int) -> list[int]:
    """The pids of every live descendant of ``pid`` (children first), read from ``/proc``; ``[]`` where there
    is no ``/proc``. A Celery worker's pool processes: they must end with it when it is killed (but not what
    runs in a session of its own, such as the local jobs its tasks started: the caller checks the session)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop(0)
        out.append(child)
        todo.extend(children.get(child, []))
    return out


class RestartBudget:
    """At most ``limit`` restarts of each child within any ``window_s`` seconds (``time.monotonic`` clock)."""

    def __init__(self, *, limit: int = MAX_RESTARTS, window_s: float = RESTART_WINDOW_S) -> None:
        self.limit = limit
        self.window_s = window_s
        self._times: dict[str, deque[float]] = {}

    def take(self, name: str, now: float) -> int | None:
        """Record a restart of ``name`` at ``now`` (seconds); return its number within the window (1 …
        ``limit``), or ``None`` when ``limit`` restarts already happened within the window (nothing recorded).
        """
        recent = self._times.setdefault(name, deque())
        while recent and now - recent[0] > self.window_s:
            recent.popleft()
        if len(recent) >= self.limit:
            return None
        recent.append(now)
        return len(recent)


class StartupProgress:
    """Says once when the local compute node is registered and when the imported datasets are ready."""

    def __init__(self) -> None:
        self.node_seen = False
        self.datasets_ready = -1

    def news(self) -> list[str]:
        """New progress lines since the last call (reads the database; errors are swallowed, as the
        database may be busy with migrations or imports)."""
        from datasets.models import Dataset
        from instances.models import Node

        lines = []
        try:
            if not self.node_seen and Node.objects.filter(state="ready").exists():
                self.node_seen = True
                lines.append("compute node registered: launches can start now")
            total = Dataset.objects.count()
            ready = Dataset.objects.filter(versions__isnull=False).distinct().count()
            if total and ready != self.datasets_ready:
                self.datasets_ready = ready
                lines.append(
                    f"datasets ready: {ready} of {total}"
                    + (" (all)" if ready == total else " (the rest are being prepared)")
                )
        except Exception:  # a progress line must never stop the product
            return lines
        finally:
            from django.db import connection

            connection.close()
        return lines


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
        # Links in e-mails and the training runtime's callback URL point at the address served here; the
        # product's own error pages (DEBUG off unless DJANGO_DEBUG says otherwise)
        env = embedded_env(os.environ, options["addr"])
        py = sys.executable
        schedule = str(settings.DATA_DIR / "celerybeat-schedule")
        commands = {
            "web": [py, "manage.py", "runserver", options["addr"], "--noreload"],
            # Two workers, so that corpus imports and uploads ("bulk") never hold up placement, metering and
            # reconcile ("control"); see CELERY_TASK_ROUTES.
            "worker": [
                py,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "2",
                "--pool",
                "prefork",
                "--queues",
                "control,webhooks",
                "--hostname",
                "control@%h",
            ],
            "bulk": [
                py,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--loglevel",
                "INFO",
                "--concurrency",
                "1",
                "--pool",
                "prefork",
                "--queues",
                "bulk",
                "--hostname",
                "bulk@%h",
            ],
            "beat": [py, "-m", "celery", "-A", "portal", "beat", "--loglevel", "INFO", "--schedule", schedule],
        }
        procs: dict[str, subprocess.Popen[bytes]] = {}
        stopping = False
        resumer: threading.Thread | None = None

        def resume_servers() -> None:
            """Start the model servers runportal stopped last time (in a thread: each waits for its model)."""
            from django.db import connection

            from portal.marketplace.deployments import local_servers_resume

            try:
                started = local_servers_resume()
                if started:
                    self.stdout.write(self.style.SUCCESS(f"app model servers running again: {len(started)}"))
            except Exception as exc:  # the health check retries; the product keeps running
                self.stderr.write(f"could not start the app model servers again: {exc}")
            finally:
                connection.close()

        def stop(*_: object) -> None:
            nonlocal stopping
            if stopping:
                return
            stopping = True
            began = time.monotonic()
            alive = {name: proc for name, proc in procs.items() if proc.poll() is None}
            if alive:
                say(f"stopping {', '.join(alive)} (at most {CHILD_STOP_S:g} s)…")
            family = {name: descendants(proc.pid) for name, proc in alive.items()}  # e.g. a worker's pool
            for proc in alive.values():  # all at once: their shutdowns overlap
                proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + CHILD_STOP_S
            for name, proc in alive.items():
                try:
                    proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    say(f"{name} did not stop within {CHILD_STOP_S:g} s: killed (its tasks are redelivered)")
                    proc.kill()
                    proc.wait(10)
            session = os.getsid(0)
            for pid in (pid for pids in family.values() for pid in pids):  # nothing of theirs is left behind,
                try:  # except what runs in its own session: local jobs and model servers, stopped below
                    if os.getsid(pid) == session:
                        os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            # No training process may outlive the product: checkpoint and stop local jobs (they resume
            # as preempted on the next start).
            from instances.services import local_jobs_suspend

            def announce(n: int) -> None:
                say(f"stopping {n} local instance(s) and job(s) (jobs write a checkpoint first)…")

            suspended = local_jobs_suspend(on_start=announce)
            if suspended:
                n = len(suspended)
                say(f"checkpointed and stopped {n} local instance(s) and job(s); they resume on the next start")
            # nor may a published app's model server (it runs in its own session); it comes back on the next start
            if resumer is not None:
                resumer.join(60)  # a server being started again right now is stopped too
            from portal.marketplace.deployments import local_servers_suspend

            servers = local_servers_suspend()
            if servers:
                say(f"stopped {len(servers)} app model server(s); they start again with runportal")
            say(f"stopped in {time.monotonic() - began:.1f} s")

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        signal.signal(signal.SIGTERM, lambda *_: stop())
        signal.signal(signal.SIGINT, lambda *_: stop())  # also when started with SIGINT ignored (nohup, &)

        def start(name: str) -> None:
            proc = subprocess.Popen(commands[name], cwd=settings.BASE_DIR, env=env)
            procs[name] = proc
            self.stdout.write(f"started {name} (pid {proc.pid})")
            if stopping:  # a signal arrived while starting it: stop() may have missed this child
                proc.terminate()
                proc.wait(20)

        budget = RestartBudget()
        window = f"{budget.window_s / 60:g} minutes"
        failure = ""
        try:
            for name in commands:
                start(name)
            resumer = threading.Thread(target=resume_servers, name="resume-model-servers", daemon=True)
            resumer.start()
            site = env["PORTAL_SITE_URL"].rstrip("/")
            self.stdout.write(
                self.style.SUCCESS(
                    f"gpu-portal is running: {site}/  (web, control and bulk workers, beat; Ctrl-C stops all)"
                )
            )
            self.stdout.write(
                f"  console:      {site}/\n"
                f"  back office:  {site}/admin/  (create a staff user: manage.py createsuperuser)\n"
                f"  API docs:     {site}/api/v1/docs\n"
                "  e-mail verification links are printed in this terminal (console e-mail backend)"
                if "console" in settings.EMAIL_BACKEND
                else ""
            )
            progress = StartupProgress()
            next_check = 0.0
            while not stopping:
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 2
                    for line in progress.news():
                        self.stdout.write(self.style.SUCCESS(line))
                for name, proc in list(procs.items()):
                    if stopping or proc.poll() is None:
                        continue
                    code = proc.returncode
                    number = budget.take(name, time.monotonic()) if name in RESTARTABLE else None
                    if number is None:
                        failure = (
                            f"{name} exited with {code}; stopping the rest"
                            if name not in RESTARTABLE
                            else f"{name} exited with {code} after {budget.limit} restarts within {window}; "
                            "giving up, stopping the rest"
                        )
                        self.stderr.write(failure)
                        stop()
                        break
                    self.stderr.write(
                        f"{name} exited with {code}; restarting it "
                        f"(restart {number} of at most {budget.limit} within {window})"
                    )
                    start(name)
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            stop()
        if failure:  # a non-zero exit status, so that a supervisor (systemd, a container) notices
            raise CommandError(failure)
