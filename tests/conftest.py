"""Shared fixtures: the personas alice (owner), bob (member of alice's organization), charlie (outsider).

Django imports happen inside fixtures so that the pure suites (runtime, pipeline, scheduler) can run
with ``-p no:django``.
"""

from __future__ import annotations

from typing import Any

import pytest


def _make_user(email: str, name: str, *, verified: bool = True) -> Any:
    from django.utils import timezone

    from portal.services import user_signup

    user = user_signup(email=email, password="correct horse battery 9", name=name)
    if verified:
        user.email_verified_at = timezone.now()
        user.save(update_fields=["email_verified_at"])
    return user


@pytest.fixture
def alice(db: Any) -> Any:
    """Owner of the organization "alice" (her personal one), verified, no credit yet."""
    return _make_user("alice@example.com", "alice")


@pytest.fixture
def alice_org(alice: Any) -> Any:
    from portal.selectors import organization_for_user

    return organization_for_user(user=alice)


@pytest.fixture
def bob(alice_org: Any) -> Any:
    """A member (role ``member``) of alice's organization, with his own personal organization too."""
    from portal.choices import Role
    from portal.services import membership_add

    user = _make_user("bob@example.com", "bob")
    membership_add(organization=alice_org, user=user, role=Role.MEMBER, acting_user=None)
    return user


@pytest.fixture
def charlie(db: Any) -> Any:
    """An outsider: his own organization only."""
    return _make_user("charlie@example.com", "charlie")


PASSWORD = "correct horse battery 9"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Any:
    """Each test starts with an empty cache (throttle counters are keyed by token id and client IP, and ids
    repeat across tests, so one test's requests must not throttle the next one's) and the default language."""
    yield
    try:
        from django.conf import settings
    except ImportError:  # the pure suites run without Django
        return
    if settings.configured:
        from django.core.cache import cache
        from django.utils import translation

        cache.clear()
        # A request in Chinese leaves its language active in this thread (LocaleMiddleware activates and never
        # deactivates): the next test would read its messages in Chinese.
        translation.deactivate()


# --- one test database per worker, cloned from a template migrated once -------------------------------------
# The suite runs in parallel worker processes (pytest-xdist, ``.ci/test``). Replaying ~60 migrations in every
# worker and in the serial pass costs as much as a few hundred tests, so the migrated database is built once,
# under a file lock, as a template named by a digest of every migration file (a migration change builds a new
# one; an unchanged tree reuses the last): on PostgreSQL a database that ``CREATE DATABASE … TEMPLATE`` clones
# per worker (Django's own parallel runner clones the same way, ``DatabaseCreation._clone_test_db``), on SQLite
# a file whose pages are copied into each worker's in-memory database with SQLite's online backup (as Django
# does for its spawned workers, ``sqlite3 DatabaseCreation.setup_worker_connection``).
# ``--nomigrations`` and ``--reuse-db`` are not supported by this setup (the suite never used them).
_TEMPLATE_DONE = "gpu-portal test template: complete"


def _template_cache_dir() -> Any:
    from pathlib import Path

    from django.conf import settings

    folder = Path(settings.BASE_DIR) / "var" / "test-cache"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _migrations_digest() -> str:
    """12 hex digits of SHA-256 over every installed app's migration files (paths and bytes) and Django's
    version: equal digests mean the migrations would build the same schema and data."""
    import hashlib
    from pathlib import Path

    import django
    from django.apps import apps

    digest = hashlib.sha256(django.get_version().encode())
    for app in sorted(apps.get_app_configs(), key=lambda a: a.label):
        folder = Path(app.path) / "migrations"
        for path in sorted(folder.rglob("*.py")) if folder.is_dir() else []:
            digest.update(f"{app.label}/{path.relative_to(folder)}".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _postgres_database_from_template(connection: Any, worker: str, digest: str, lock: Any) -> Any:
    """Create ``<test name>_<worker>`` from the template ``<test name>_tpl_<digest>`` (built first if missing or
    left half-built), point the connection at it; returns the teardown (drops the clone, keeps the template)."""
    from django.conf import settings

    qn = connection.ops.quote_name
    original = connection.settings_dict["NAME"]
    base = connection.settings_dict.get("TEST", {}).get("NAME") or f"test_{original}"
    template, clone = f"{base}_tpl_{digest}", f"{base}_{worker}"
    with lock:
        with connection._nodb_cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM pg_database d JOIN pg_shdescription s ON s.objoid = d.oid "
                "WHERE d.datname = %s AND s.description = %s",
                [template, _TEMPLATE_DONE],
            )
            ready = cursor.fetchone() is not None
        if not ready:
            with connection._nodb_cursor() as cursor:  # templates of older migration trees
                cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [f"{base}_tpl_%"])
                for (name,) in cursor.fetchall():
                    cursor.execute(f"DROP DATABASE {qn(name)} WITH (FORCE)")
            connection.settings_dict.setdefault("TEST", {})["NAME"] = template
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
            connection.close()
            with connection._nodb_cursor() as cursor:
                cursor.execute(f"COMMENT ON DATABASE {qn(template)} IS %s", [_TEMPLATE_DONE])
        connection.close()  # CREATE DATABASE … TEMPLATE needs the template without sessions
        with connection._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {qn(clone)} WITH (FORCE)")
            cursor.execute(f"CREATE DATABASE {qn(clone)} TEMPLATE {qn(template)}")
    settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = clone

    def teardown() -> None:
        connection.close()
        with connection._nodb_cursor() as cursor:  # FORCE: a thread's connection may outlive its test
            cursor.execute(f"DROP DATABASE IF EXISTS {qn(clone)} WITH (FORCE)")
        settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = original

    return teardown


def _sqlite_database_from_template(connection: Any, worker: str, digest: str, lock: Any) -> Any:
    """Copy the template file ``var/test-cache/sqlite-template-<digest>.sqlite3`` (built first if missing) into
    the shared-cache in-memory database ``memorydb_<worker>`` and point the connection at it."""
    import os
    import sqlite3

    from django.conf import settings

    folder = _template_cache_dir()
    template = folder / f"sqlite-template-{digest}.sqlite3"
    original = connection.settings_dict["NAME"]
    with lock:
        if not template.exists():
            # migrated in memory (a file with the settings' synchronous=FULL would sync every migration), then
            # written out in one backup under a temporary name
            connection.settings_dict.setdefault("TEST", {})["NAME"] = "file:memorydb_template?mode=memory&cache=shared"
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
            building = folder / f"sqlite-template-{digest}.building"
            building.unlink(missing_ok=True)
            out = sqlite3.connect(building)
            connection.connection.backup(out)
            out.close()
            os.replace(building, template)  # complete, or absent
            for old in folder.glob("sqlite-template-*.sqlite3"):
                if old != template:
                    old.unlink()
    memory = f"file:memorydb_{worker}?mode=memory&cache=shared"
    keeper = sqlite3.connect(memory, uri=True)  # holds the in-memory database until Django's connection opens
    source = sqlite3.connect(f"file:{template}?mode=ro", uri=True)
    source.backup(keeper)
    source.close()
    settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = memory
    connection.connect()  # Django keeps an in-memory database's connection open for the session
    keeper.close()

    def teardown() -> None:
        settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = original

    return teardown


@pytest.fixture(scope="session")
def django_db_setup(request: Any, django_test_environment: None, django_db_blocker: Any) -> Any:
    """The session's test database (replaces pytest-django's fixture of the same name): a clone of the
    migrated template, one per xdist worker (``gw0``, ``gw1``…; ``main`` without xdist)."""
    from django.db import connections
    from filelock import FileLock

    assert list(connections) == ["default"], "the template setup knows one database alias"
    worker = getattr(request.config, "workerinput", {}).get("workerid", "main")
    connection = connections["default"]
    with django_db_blocker.unblock():
        digest = _migrations_digest()
        lock = FileLock(str(_template_cache_dir() / f"{connection.vendor}-template.lock"))
        if connection.vendor == "postgresql":
            teardown = _postgres_database_from_template(connection, worker, digest, lock)
        else:
            teardown = _sqlite_database_from_template(connection, worker, digest, lock)
    yield
    with django_db_blocker.unblock():
        teardown()


# --- nothing a test starts outlives the test run -----------------------------------------------------------
# Every process started during the run inherits this variable (ranks in their own sessions too, since they
# keep the environment); at the end any still alive is listed, killed, and fails the run.
_RUN_MARK = "GPU_PORTAL_TEST_RUN"


def _is_xdist_controller(config: Any) -> bool:
    """True in the process that only hands tests to xdist workers (it runs none itself)."""
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", None))


def pytest_sessionstart(session: Any) -> None:
    import os
    import time

    # Each worker marks its own run: the processes its tests start are its own to account for (a worker's
    # /proc environ still shows the controller's mark, which the controller therefore does not check).
    os.environ[_RUN_MARK] = f"{os.getpid()}-{time.time_ns()}"


def _processes_of_this_run() -> list[tuple[int, str]]:
    """(pid, command line) of live, non-zombie processes carrying this run's mark, except pytest itself."""
    import os
    from pathlib import Path

    mark = f"{_RUN_MARK}={os.environ.get(_RUN_MARK, '')}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            if (entry / "stat").read_text().split(") ", 1)[1][0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if "multiprocessing.resource_tracker" in cmdline or "multiprocessing.forkserver" in cmdline:
            continue  # helpers of the pytest process itself (process pools); they end when it exits
        found.append((int(entry.name), cmdline[:200]))
    return found


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    import contextlib
    import os
    import signal
    import sys
    import time

    if not os.path.isdir("/proc") or _RUN_MARK not in os.environ or _is_xdist_controller(session.config):
        return
    deadline = time.monotonic() + 15  # processes being stopped by the last teardowns get time to exit
    leftovers = _processes_of_this_run()
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.5)
        leftovers = _processes_of_this_run()
    if not leftovers:
        return
    for pid, _cmd in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in leftovers)
    sys.stderr.write(
        f"\nFAILED: {len(leftovers)} process(es) started by the tests outlived them (killed now):\n{lines}\n"
    )
    if session.exitstatus == 0:
        session.exitstatus = 1


# --- which tests run where --------------------------------------------------------------------------------
# ``.ci/test`` runs the suite in parallel workers, then the tests marked ``serial`` alone; ``.ci/run`` runs it
# again on PostgreSQL with ``--engine-dependent-only``: only the tests whose outcome can depend on the database
# engine, i.e. that use the database and are not marked ``engine_independent``. A test that uses no database
# proves the same thing on either engine, so it runs once, in the SQLite pass.
_REASONED_MARKERS = ("serial", "engine_independent")


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--engine-dependent-only",
        action="store_true",
        default=False,
        help="keep only the tests whose outcome can depend on the database engine (the PostgreSQL pass of .ci/run)",
    )


def pytest_configure(config: Any) -> None:
    import os
    import re

    # Each xdist worker gets a Redis database of its own (gw0 → 1, gw1 → 2 …; no worker → the one given), so a
    # Celery worker started by one test never takes the tasks another worker's test sent.
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    redis_url = os.environ.get("REDIS_TEST_URL", "")
    if worker and redis_url:
        index = int(worker.removeprefix("gw")) + 1
        os.environ["REDIS_TEST_URL"] = re.sub(r"(/\d+)?/?$", f"/{index}", redis_url, count=1)


def _uses_database(item: Any) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db", "django_db_setup", "live_server"} & set(getattr(item, "fixturenames", ()))
    )


_SHARED_SCOPES = frozenset({"module", "package", "class"})


def _group_shared_fixtures(items: list[Any]) -> None:
    """Mark the tests of a module that share a module-, package- or class-scoped fixture with
    ``xdist_group(<module>)``: ``.ci/pytest-passes`` hands tests to the workers one by one (``--dist loadgroup``),
    except a group, which goes whole to one worker, so a fixture built once per module (a reference torchrun run,
    a trained model) is still built once. Session-scoped fixtures are built once per worker."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        if info is None or item.get_closest_marker("xdist_group") is not None:
            continue
        shared = any(d.scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values() for d in defs[-1:])
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


def _order_longest_first(items: list[Any]) -> None:
    """Sort the tests by their recorded time, longest first (a stable sort: the rest keep their order), a group
    of :func:`_group_shared_fixtures` by the sum of its tests' times.

    The workers take tests in this order, so the longest start first and the workers end together
    (longest-processing-time-first scheduling) instead of one running a three-minute test alone at the end.
    The times are ``tests/weights.json`` (seconds per test id, for the tests over 2 s; written by
    ``.ci/timings.py --write-weights`` from a pass's JUnit XML); a test not listed there counts as 0."""
    import json
    from collections import defaultdict
    from pathlib import Path

    path = Path(__file__).with_name("weights.json")
    weights: dict[str, float] = json.loads(path.read_text()) if path.exists() else {}

    def group(item: Any) -> str:
        marker = item.get_closest_marker("xdist_group")
        return str(marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else item.nodeid

    totals: dict[str, float] = defaultdict(float)
    for item in items:
        totals[group(item)] += float(weights.get(item.nodeid, 0.0))
    items.sort(key=lambda item: -totals[group(item)])


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    _group_shared_fixtures(items)
    _order_longest_first(items)
    for item in items:
        for name in _REASONED_MARKERS:
            marker = item.get_closest_marker(name)
            if marker is not None and not (marker.args or marker.kwargs.get("reason")):
                raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.{name} needs its reason")
    if not config.getoption("--engine-dependent-only"):
        return
    kept, dropped = [], []
    for item in items:
        (kept if _uses_database(item) and not item.get_closest_marker("engine_independent") else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
