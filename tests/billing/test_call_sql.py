"""App-call billing in one round trip per phase (``billing.call_sql``) writes exactly what the Python path
(``call_reserve`` / ``wallet_spend``) writes: the same calls, ledger transactions, entries and balances.
PostgreSQL only (the functions are PL/pgSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.choices import GrantKind
from billing.models import LedgerAccount, LedgerTransaction
from billing.services import credit_grant_create, wallet_top_up
from portal.marketplace import calls, services
from portal.marketplace.choices import AppState, CallStatus, ServingKind
from portal.marketplace.models import AppCall
from portal.marketplace.services import IdempotencyConflict

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the call functions are PL/pgSQL"),
]


def _state() -> dict[str, object]:
    """Calls, postings and balances by natural keys (call ids differ between the two runs: sequences do not
    roll back)."""
    key_of = dict(AppCall.objects.values_list("id", "idempotency_key"))
    txns = sorted(
        (key_of[t.metadata["call"]], t.kind, t.organization_id, t.memo, t.memo_code, t.memo_params, t.fingerprint,
         sorted((k, v) for k, v in t.metadata.items() if k != "call"),
         [(e.account.code, e.amount_micros) for e in t.entries.order_by("id").select_related("account")])
        for t in LedgerTransaction.objects.filter(kind="app_call")
    )  # fmt: skip
    call_rows = sorted(
        AppCall.objects.values_list(
            "idempotency_key", "status", "price_micros", "publisher_share_micros", "attempts", "error_code", "response"
        )
    )
    balances = sorted(LedgerAccount.objects.filter(track_balance=True).values_list("code", "balance_micros"))
    return {"transactions": txns, "calls": call_rows, "balances": balances}


def _calls(app, caller, charlie) -> list[str]:
    outcomes = []
    for key, text in (("k1", "a"), ("k2", "b"), ("k1", "a"), ("k1", "other"), ("k3", "c"), ("k4", "d")):
        try:
            result = calls.app_invoke(app=app, caller=caller, user=charlie, payload={"text": text}, idempotency_key=key)
            outcomes.append("replayed" if result.replayed else "charged")
        except Exception as exc:  # the refusal's class is what is compared
            outcomes.append(type(exc).__name__)
    return outcomes


def test_the_sql_call_billing_writes_what_the_python_path_writes(alice, alice_org, charlie, monkeypatch):
    caller = charlie.organizations.get()
    wallet_top_up(organization=caller, amount_micros=1_200_000, idempotency_key="caller-topup")
    credit_grant_create(
        organization=caller,
        amount_micros=300_000,
        expires_at=timezone.now() + timedelta(days=3),
        kind=GrantKind.TRIAL,
        idempotency_key="caller-trial",
    )
    app = services.app_create(
        publisher=alice_org,
        user=alice,
        name="Echo",
        category="general",
        description="echo",
        input_schema={"type": "object", "required": ["text"]},
        output_schema={"type": "object", "required": ["output"]},
        price_per_call_micros=500_000,
        visibility="public",
    )
    services.app_version_add(app=app, user=alice, kind=ServingKind.ECHO)
    services.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=alice)
    services.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True)
    app.refresh_from_db()
    wallet_top_up(organization=alice_org, amount_micros=1, idempotency_key="publisher-wallet")

    with monkeypatch.context() as patch, transaction.atomic():
        patch.setattr(calls, "call_reserve_sql", lambda params: ("no_wallet", None, None))
        patch.setattr(calls, "call_settle_sql", lambda params: ("no_wallet", None, None))
        python_outcomes = _calls(app, caller, charlie)
        expected = _state()
        transaction.set_rollback(True)

    with CaptureQueriesContext(connection) as queries:
        sql_outcomes = _calls(app, caller, charlie)

    assert (
        sql_outcomes
        == python_outcomes
        == [
            "charged",  # 0.30 from the trial grant, 0.20 from paid
            "charged",
            "replayed",
            IdempotencyConflict.__name__,
            "charged",  # the last 0.50 of paid
            "CallRefused",  # nothing left
        ]
    )
    assert _state() == expected
    billing = [q["sql"] for q in queries.captured_queries if "billing_call_" in q["sql"]]
    assert sum("billing_call_reserve" in q for q in billing) == 6
    assert sum("billing_call_settle" in q for q in billing) == python_outcomes.count("charged")
    assert AppCall.objects.filter(status=CallStatus.SUCCEEDED).count() == 3
    assert LedgerAccount.objects.get(code=f"org:{caller.pk}:paid").balance_micros == 0
    assert LedgerAccount.objects.get(code=f"org:{alice_org.pk}:paid").balance_micros == 1 + 3 * 350_000  # 70 %
