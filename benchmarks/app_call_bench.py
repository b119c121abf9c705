"""The portal's own overhead per app call, and the share of billing in it (issue 7: "billing adds under 5 ms
at p50").

    .venv/bin/python benchmarks/app_call_bench.py [--calls 1000]            # SQLite (a fresh temp file)
    DATABASE_URL=postgres://postgres@127.0.0.1:5433/portal_bench .venv/bin/python benchmarks/app_call_bench.py

Each call goes through the real API — ``POST /api/v1/apps/{slug}/invoke`` with a bearer token and a fresh
``Idempotency-Key``, through Django's middleware, DRF (token auth, scope permission, throttling), the input
schema, the reservation, the backend, the output schema and the ledger posting — driven by Django's test client
in this process (no socket, no WSGI server) against an app served by the built-in echo backend, so what is
measured is the portal and its database, not a model. Calls run one after another (one client).

Billing is timed inside the same calls by wrapping the functions of ``portal.marketplace.calls`` that do it
(no code change): ``reserve`` is ``call_reserve`` (the wallet lock and balance, the key lookup, the
open-reservation sum, the ``AppCall`` insert, its COMMIT), ``post`` is ``call_settle`` (the balanced ledger
transaction with the publisher's share, the call update, its COMMIT); ``billing`` is their sum. A second app with
price 0 (still reserved, nothing posted) shows the difference.

Beside them, in the same run, the same number of calls of a **bare DRF view** — ``POST /bench/bare`` with the same
body, bearer token and DRF defaults (token authentication, scope permission, throttling), which parses the body
and answers ``{"ok": true}`` without touching an app or money — so ``total - bare`` is what an app call adds,
whatever the machine's load. On PostgreSQL reserving and posting are one round trip each (``billing.call_sql``).

Also timed alone: ``wallet_lock`` (both uses: in the reservation and in the posting), ``wallet_spend`` (the ledger
posting inside ``post``) and the COMMITs of the call (the durable writes: two per call). ``BENCH_SHOW_SQL=1``
prints the statements of one call.
Prints p50 / p99 / mean in ms, calls per second and SQL queries per call.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
_tmp = tempfile.mkdtemp(prefix="app-call-bench-")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")
os.environ.setdefault("PORTAL_DATA_DIR", _tmp)
os.environ.setdefault("SQLITE_PATH", str(Path(_tmp) / "bench.sqlite3"))
os.environ["DJANGO_DEBUG"] = "0"  # DEBUG keeps every query in memory
os.environ.setdefault("API_THROTTLE_RATE", "10000000/min")  # throttling runs, but never refuses
os.environ.setdefault("APP_INVOKE_RATE", "10000000/min")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "1")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"  # the sign-up mails of the bench users

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.urls import clear_url_caches, include, path  # noqa: E402
from rest_framework.response import Response  # noqa: E402
from rest_framework.views import APIView  # noqa: E402

from billing.services import wallet_top_up  # noqa: E402
from portal.choices import TokenScope  # noqa: E402
from portal.marketplace import calls, services  # noqa: E402
from portal.marketplace.choices import AppState, ServingKind  # noqa: E402
from portal.selectors import organization_for_user  # noqa: E402
from portal.services import api_token_create, user_signup  # noqa: E402

SCHEMA_IN = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "maxLength": 2000}}}
PASSWORD = "bench pass 12345"  # noqa: S105 - throwaway users in a throwaway database
SCHEMA_OUT = {"type": "object", "required": ["output"]}


class Marks:
    """Durations of the billing phases of the current call, set by the wrappers below."""

    def __init__(self) -> None:
        self.reserve = 0.0
        self.post = 0.0
        self.spend = 0.0
        self.lock = 0.0
        self.commits = 0.0  # time in COMMIT (durable write) during the call


marks = Marks()


def timed(module: Any, name: str, mark: str) -> None:
    """Replace ``module.name`` with a wrapper that adds its duration to ``marks.<mark>``."""
    original = getattr(module, name)

    def wrapper(**kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(**kw)
        finally:
            setattr(marks, mark, getattr(marks, mark) + time.perf_counter() - t0)

    setattr(module, name, wrapper)


def install_commit_timer() -> None:
    """Time the database's COMMITs of this thread's connection (the durable write of each transaction)."""
    connection.ensure_connection()
    original = connection._commit

    def timed_commit() -> Any:
        t0 = time.perf_counter()
        out = original()
        marks.commits += time.perf_counter() - t0
        return out

    connection._commit = timed_commit  # type: ignore[method-assign]


timed(calls, "call_reserve", "reserve")
timed(calls, "call_settle", "post")
timed(calls, "wallet_lock", "lock")
timed(calls, "wallet_spend", "spend")


class BareView(APIView):
    """The floor of an authenticated API call: DRF's default authentication, permissions and throttling."""

    def post(self, request: Any) -> Response:
        return Response({"ok": bool(request.data)})


urlpatterns = [path("bench/bare", BareView.as_view()), path("", include("portal.urls"))]


def bare(token: str, calls: int) -> list[float]:
    """Seconds per call of the bare view (50 warm-up calls first)."""
    client = Client()
    body = '{"text": "第一条 为了规范合同行为，保护合同当事人的合法权益"}'
    out = []
    for i in range(-50, calls):
        t0 = time.perf_counter()
        r = client.post("/bench/bare", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        if r.status_code != 200:
            raise SystemExit(f"bare call failed: {r.status_code} {r.content[:300]!r}")
        if i >= 0:
            out.append(time.perf_counter() - t0)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def setup(price_micros: int, tag: str) -> tuple[str, str]:
    """A published public echo app of a publisher, and a funded caller's token. Returns (slug, token)."""
    publisher = user_signup(email=f"pub-{tag}@example.com", password=PASSWORD, name="publisher")
    caller = user_signup(email=f"caller-{tag}@example.com", password=PASSWORD, name="caller")
    pub_org, caller_org = organization_for_user(user=publisher), organization_for_user(user=caller)
    app = services.app_create(
        publisher=pub_org,
        user=publisher,
        name=f"Echo {tag}",
        category="general",
        description="echo",
        input_schema=SCHEMA_IN,
        output_schema=SCHEMA_OUT,
        price_per_call_micros=price_micros,
        visibility="public",
    )
    services.app_version_add(app=app, user=publisher, kind=ServingKind.ECHO)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=publisher)
    services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    wallet_top_up(organization=caller_org, amount_micros=1_000_000_000_000, idempotency_key=f"bench-{tag}")
    token = api_token_create(user=caller, organization=caller_org, name="bench", scope=TokenScope.WRITE)
    return app.slug, token.plaintext


def run(slug: str, token: str, calls: int, tag: str) -> dict[str, list[float]]:
    client = Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    body = '{"text": "第一条 为了规范合同行为，保护合同当事人的合法权益"}'
    out: dict[str, list[float]] = {
        "total": [],
        "reserve": [],
        "post": [],
        "billing": [],
        "wallet_lock": [],
        "wallet_spend": [],
        "commits": [],
    }
    for i in range(-50, calls):  # 50 warm-up calls
        marks.reserve = marks.post = marks.spend = marks.lock = marks.commits = 0.0
        t0 = time.perf_counter()
        r = client.post(
            f"/api/v1/apps/{slug}/invoke",
            body,
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=f"{tag}-{i}",
            **headers,
        )
        t1 = time.perf_counter()
        if r.status_code != 200:
            raise SystemExit(f"call {i} failed: {r.status_code} {r.content[:300]!r}")
        if i < 0:
            continue
        out["total"].append(t1 - t0)
        out["reserve"].append(marks.reserve)
        out["post"].append(marks.post)
        out["billing"].append(marks.reserve + marks.post)
        out["wallet_lock"].append(marks.lock)
        out["wallet_spend"].append(marks.spend)
        out["commits"].append(marks.commits)
    with CaptureQueriesContext(connection) as q:
        client.post(
            f"/api/v1/apps/{slug}/invoke",
            body,
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY=f"{tag}-queries",
            **headers,
        )
    out["queries"] = [float(len(q.captured_queries))]
    if os.environ.get("BENCH_SHOW_SQL"):
        for query in q.captured_queries:
            print("   ", query["time"], query["sql"][:220])
    return out


def report(label: str, res: dict[str, list[float]]) -> None:
    total = res["total"]
    print(
        f"{label}: {len(total)} calls, {len(total) / sum(total):.0f} calls/s sequential, "
        f"{int(res['queries'][0])} SQL queries per call"
    )
    for key in ("total", "reserve", "post", "billing", "wallet_lock", "wallet_spend", "commits"):
        v = [x * 1000 for x in res[key]]
        print(f"  {key:14s} p50 {pct(v, 0.5):7.2f} ms  p99 {pct(v, 0.99):7.2f} ms  mean {statistics.fmean(v):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    settings.ROOT_URLCONF = __name__  # this module's urlpatterns: the bare view, then the portal's
    clear_url_caches()
    vendor = connection.vendor
    print(
        f"database: {vendor} ({connection.settings_dict['NAME']}), Django test client, echo backend, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start"
    )
    install_commit_timer()
    stamp = str(int(time.time()))
    paid_slug, paid_token = setup(10_000, f"paid-{stamp}")
    free_slug, free_token = setup(0, f"free-{stamp}")
    floor = bare(paid_token, args.calls)
    paid = run(paid_slug, paid_token, args.calls, f"p{stamp}")
    floor += bare(paid_token, args.calls)  # before and after the app calls: the same share of any load change
    report("paid app (0.01 CNY per call, 70 % to the publisher)", paid)
    report("free app (reserved, nothing posted)", run(free_slug, free_token, args.calls, f"f{stamp}"))
    ms = [x * 1000 for x in floor]
    total = pct([x * 1000 for x in paid["total"]], 0.5)
    print(
        f"bare DRF view (same token authentication), {len(ms)} calls: p50 {pct(ms, 0.5):7.2f} ms  p99"
        f" {pct(ms, 0.99):7.2f} ms  mean {statistics.fmean(ms):7.2f} ms; paid app call p50 - bare p50:"
        f" {total - pct(ms, 0.5):.2f} ms"
    )


if __name__ == "__main__":
    main()
