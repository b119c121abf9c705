"""App calls from parallel threads on a real PostgreSQL server: the reservation's wallet lock
(``SELECT … FOR UPDATE OF w`` in ``billing.services.wallet_lock``) and the call's unique key.

SQLite serializes all writers, so these tests only mean something on PostgreSQL (CI's second pass sets
``DATABASE_URL``); on SQLite they are skipped with that reason.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection

from billing.models import LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import wallet_top_up
from portal.marketplace import calls, services
from portal.marketplace.choices import AppState, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.selectors import organization_for_user
from portal.services import user_signup
from tests.billing.test_concurrency_postgres import _race

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks (set DATABASE_URL)"),
]
SCHEMA = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}


def _published_app(price_micros: int):
    publisher = user_signup(email="pub@example.com", password="correct horse battery 9")
    org = organization_for_user(user=publisher)
    app = services.app_create(
        publisher=org,
        user=publisher,
        name="Echo",
        category="general",
        description="",
        input_schema=SCHEMA,
        output_schema={"type": "object"},
        price_per_call_micros=price_micros,
        visibility=AppVisibility.PRIVATE,
    )
    services.app_version_add(app=app, user=publisher, kind=ServingKind.ECHO)
    return services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=publisher), org


def _caller(micros: int):
    user = user_signup(email="caller@example.com", password="correct horse battery 9")
    org = organization_for_user(user=user)
    wallet_top_up(organization=org, amount_micros=micros, idempotency_key="caller-topup")
    return user, org


def test_eight_parallel_calls_against_money_for_three_charge_exactly_three(monkeypatch):
    app, publisher = _published_app(1_000_000)
    user, caller = _caller(3_500_000)
    forward = calls.serving.forward

    def slow_forward(**kw):  # keep reservations open while the others arrive
        time.sleep(0.2)
        return forward(**kw)

    monkeypatch.setattr(calls.serving, "forward", slow_forward)
    results = _race(
        8,
        lambda i: calls.app_invoke(
            app=app, caller=caller, user=user, payload={"text": str(i)}, idempotency_key=f"k{i}"
        ),
    )
    ok = [r for r in results if isinstance(r, calls.CallResult)]
    refused = [r for r in results if isinstance(r, services.CallRefused)]
    assert (len(ok), len(refused)) == (3, 5), results
    assert AppCall.objects.filter(status=CallStatus.SUCCEEDED).count() == 3
    assert AppCall.objects.exclude(status=CallStatus.SUCCEEDED).count() == 0  # refused calls write no row
    assert LedgerTransaction.objects.filter(kind="app_call").count() == 3
    assert wallet_balance(organization=caller).total_micros == 500_000
    assert wallet_balance(organization=publisher).paid_micros == 2_100_000  # 70 % of 3 × 1.00 CNY


def test_the_same_key_from_six_threads_runs_and_costs_once(monkeypatch):
    app, publisher = _published_app(1_000_000)
    user, caller = _caller(10_000_000)
    forward = calls.serving.forward
    ran = []

    def counting_forward(**kw):
        ran.append(kw["call_id"])
        time.sleep(0.2)
        return forward(**kw)

    monkeypatch.setattr(calls.serving, "forward", counting_forward)
    results = _race(
        6,
        lambda i: calls.app_invoke(
            app=app, caller=caller, user=user, payload={"text": "same"}, idempotency_key="one-key"
        ),
    )
    done = [r for r in results if isinstance(r, calls.CallResult)]
    busy = [r for r in results if isinstance(r, services.CallInProgress)]
    assert len(done) + len(busy) == 6 and len(ran) == 1, results
    assert {r.call.pk for r in done} == {ran[0]}
    assert AppCall.objects.count() == 1 and LedgerTransaction.objects.filter(kind="app_call").count() == 1
    assert wallet_balance(organization=caller).total_micros == 9_000_000
    assert wallet_balance(organization=publisher).paid_micros == 700_000
