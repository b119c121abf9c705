"""``manage.py simulate``: the seeded simulator of the control plane (``tests/simulation``, README "Simulation").

Every seed decides its organizations, users, roles, quotas, nodes, prices, wallets and a list of events, runs
them through the real services under a virtual clock, checks every invariant after every step, and prints
one line: ``seed S: E events, C checks, digest <hex>, ok`` or ``… FAILED <invariant> at step k``. The run
ends with ``simulate: N seeds, E events, C invariant checks, V violations`` and exits 1 when V > 0. A failing
seed prints the command that replays it, its events, and the shortest event list the shrinker found.

It runs in a throwaway test database (created and destroyed by the command, like the test runner's), never in
the configured one; each seed's writes are rolled back. The simulator lives with the tests (it drives the
services through the test boundaries and needs the dev extra ``time-machine``).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection


class Command(BaseCommand):
    help = "Run seeded simulations of the control plane and check the money and capacity invariants."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seeds", type=int, default=None, help="how many seeds (from --first)")
        parser.add_argument("--first", type=int, default=1, help="the first seed of --seeds (default 1)")
        parser.add_argument("--seed", type=int, default=None, help="one seed, verbose: every event as it runs")
        parser.add_argument("--events", type=int, default=300, help="events per seed (default 300)")
        parser.add_argument(
            "--engine",
            choices=("portable", "sql", "both"),
            default="portable",
            help="portable: the Python twin of every two-engine rule; sql: the set-based one (PostgreSQL);"
            " both: each seed through both, failing on any difference of the digests",
        )
        parser.add_argument("--no-shrink", action="store_true", help="do not shrink a failing seed's events")
        parser.add_argument("--shrink-runs", type=int, default=150, help="most runs the shrinker may use")
        parser.add_argument("--progress", action="store_true", help="a progress bar on stderr (default: on a tty)")
        parser.add_argument("--keepdb", action="store_true", help="keep the throwaway database between runs")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            import time_machine  # noqa: F401  # the virtual clock (dev extra)

            from tests.simulation import runner
        except ImportError as exc:
            raise CommandError(f"the simulator needs the dev extra and the tests folder: {exc}") from exc
        if (options["seed"] is None) == (options["seeds"] is None):
            raise CommandError("give --seeds N (with --first S) or --seed S")
        if options["events"] < 1:
            raise CommandError("--events must be at least 1")
        seeds = (
            [options["seed"]]
            if options["seed"] is not None
            else list(range(options["first"], options["first"] + options["seeds"]))
        )
        engines = ["sql", "portable"] if options["engine"] == "both" else [options["engine"]]
        if "sql" in engines and connection.vendor != "postgresql":
            self.stderr.write(
                "note: the database is not PostgreSQL, so the sql engine takes the portable paths too"
                " (point DATABASE_URL at PostgreSQL for the set-based ones)"
            )
        old_name = connection.creation.create_test_db(
            verbosity=0, autoclobber=True, serialize=False, keepdb=options["keepdb"]
        )
        try:
            violations = self._run(runner, seeds, engines, options)
        finally:
            connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=options["keepdb"])
        if violations:
            sys.exit(1)

    def _run(self, runner: Any, seeds: list[int], engines: list[str], options: dict[str, Any]) -> int:
        verbose = options["seed"] is not None
        progress = options["progress"] or (not verbose and self.stderr.isatty())
        totals = {"seeds": 0, "events": 0, "checks": 0, "failures": 0}
        started = time.perf_counter()
        for n, seed in enumerate(seeds, start=1):
            results = []
            for engine in engines:
                if verbose:
                    self.stdout.write(f"seed {seed} ({engine}):")
                results.append(
                    runner.run_seed(
                        seed, engine=engine, events=options["events"], verbose=self.stdout.write if verbose else None
                    )
                )
            events = len(results[0].events)
            checks = sum(r.checks for r in results)
            failed = next((r for r in results if r.failure is not None), None)
            digests = {r.digest for r in results}
            totals["seeds"] += 1
            totals["events"] += events * len(engines)
            totals["checks"] += checks
            head = f"seed {seed}: {events} events, {checks} checks"
            if failed is not None:
                f = failed.failure
                self.stdout.write(f"{head}, digest -, FAILED {f.invariant} at step {f.step}")
                totals["failures"] += 1
                self._explain(runner, failed, options)
            elif len(digests) > 1:
                pair = " != ".join(f"{r.digest} ({r.engine})" for r in results)
                self.stdout.write(f"{head}, digest {pair}, FAILED engines_agree at step {events}")
                totals["failures"] += 1
                self.stdout.write(f"  replay: python manage.py simulate --seed {seed} --engine both --events {events}")
            else:
                self.stdout.write(f"{head}, digest {results[0].digest}, ok")
            if progress:
                self._bar(n, len(seeds), totals, started)
        if progress:
            self.stderr.write("")
        elapsed = max(time.perf_counter() - started, 1e-9)
        self.stdout.write(
            f"simulate: {totals['seeds']} seeds, {totals['events']} events, {totals['checks']} invariant checks,"
            f" {totals['failures']} violations"
        )
        if len(seeds) > 1:
            self._table(totals, elapsed, engines)
        return totals["failures"]

    def _explain(self, runner: Any, result: Any, options: dict[str, Any]) -> None:
        """The replay command, the events up to the failure, the invariant and step, the shrunk list."""
        f = result.failure
        out = self.stdout.write
        out(
            f"  replay: python manage.py simulate --seed {result.seed} --engine {result.engine}"
            f" --events {len(result.events)}"
        )
        out(f"  first invariant broken: {f.invariant} at step {f.step}: {f.message}")
        out(f"  events (to step {f.step}):")
        for k, (kind, p) in enumerate(result.events[: f.step or len(result.events)], start=1):
            out(f"    {k:4d} {kind} {p['a']},{p['b']},{p['c']}")
        if options["no_shrink"]:
            return
        shortest = runner.shrink(result.seed, result.events, f, engine=result.engine, max_runs=options["shrink_runs"])
        out(f"  shrunk to {len(shortest)} events (still {f.invariant}):")
        for kind, p in shortest:
            out(f"    {kind} {p['a']},{p['b']},{p['c']}")

    def _bar(self, done: int, total: int, totals: dict[str, int], started: float) -> None:
        elapsed = max(time.perf_counter() - started, 1e-9)
        width = 30
        filled = width * done // total
        eta = (total - done) * elapsed / done
        self.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} seeds, {totals['failures']} failed,"
            f" {totals['events'] / elapsed:.0f} events/s, ETA {eta / 60:.1f} min",
            ending="",
        )
        self.stderr.flush()

    def _table(self, totals: dict[str, int], elapsed: float, engines: list[str]) -> None:
        rows = [
            ("engine", "+".join(engines)),
            ("database", connection.vendor),
            ("seeds", str(totals["seeds"])),
            ("events", str(totals["events"])),
            ("invariant checks", str(totals["checks"])),
            ("failures", str(totals["failures"])),
            ("time", f"{elapsed:.1f} s"),
            ("seeds/s", f"{totals['seeds'] / elapsed:.2f}"),
            ("events/s", f"{totals['events'] / elapsed:.1f}"),
        ]
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            self.stdout.write(f"  {key:<{width}}  {value}")
