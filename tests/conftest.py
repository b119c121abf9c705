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


# --- nothing a test starts outlives the test run -----------------------------------------------------------
# Every process started during the run inherits this variable (ranks in their own sessions too, since they
# keep the environment); at the end any still alive is listed, killed, and fails the run.
_RUN_MARK = "GPU_PORTAL_TEST_RUN"


def pytest_sessionstart(session: Any) -> None:
    import os
    import time

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

    if not os.path.isdir("/proc") or _RUN_MARK not in os.environ:
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
