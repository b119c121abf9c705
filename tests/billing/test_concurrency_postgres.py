"""Concurrency on a real PostgreSQL server: row locks and unique constraints under parallel threads.

SQLite serializes all writers, so these tests only mean something on PostgreSQL (CI's second pass
sets ``DATABASE_URL``); on SQLite they are skipped with that reason.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.utils import timezone

from billing.choices import GrantKind
from billing.models import CreditGrant, LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import InsufficientFunds, credit_grant_create, wallet_spend
from portal.models import TrialClaim
from portal.services import email_verify, user_signup, verification_token

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL row locks (set DATABASE_URL)"),
]


def _race(n: int, fn: Callable[[int], object]) -> list[object]:
    """Run ``fn(i)`` in ``n`` threads released together; returns results or raised exceptions."""
    barrier = threading.Barrier(n)
    results: list[object] = [None] * n

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as exc:
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_verification_from_two_threads_grants_exactly_ten_cny_once():
    user = user_signup(email="race@example.com", password="correct horse battery 9")
    token = verification_token(user)
    results = _race(2, lambda i: email_verify(token=token))
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(r.trial_granted for r in results) == [False, True]
    org = user.organizations.get()
    assert wallet_balance(organization=org).trial_micros == 10_000_000
    assert CreditGrant.objects.filter(wallet__organization=org).count() == 1
    assert TrialClaim.objects.filter(email="race@example.com").count() == 1
    assert LedgerTransaction.objects.filter(kind="credit_grant").count() == 1


def test_two_concurrent_spends_of_8_against_10_exactly_one_succeeds():
    user = user_signup(email="spender@example.com", password="correct horse battery 9")
    org = user.organizations.get()
    credit_grant_create(
        organization=org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=3),
        kind=GrantKind.TRIAL,
        idempotency_key="g",
    )
    results = _race(2, lambda i: wallet_spend(organization=org, amount_micros=8_000_000, idempotency_key=f"s{i}"))
    ok = [r for r in results if isinstance(r, LedgerTransaction)]
    refused = [r for r in results if isinstance(r, InsufficientFunds)]
    assert (len(ok), len(refused)) == (1, 1), results
    assert wallet_balance(organization=org).total_micros == 2_000_000
    assert LedgerTransaction.objects.filter(kind="spend").count() == 1


def test_the_same_idempotency_key_from_two_threads_posts_once():
    user = user_signup(email="dup@example.com", password="correct horse battery 9")
    org = user.organizations.get()
    credit_grant_create(
        organization=org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=3),
        kind=GrantKind.TRIAL,
        idempotency_key="g",
    )
    results = _race(4, lambda i: wallet_spend(organization=org, amount_micros=3_000_000, idempotency_key="same"))
    assert all(isinstance(r, LedgerTransaction) for r in results), results
    assert len({r.pk for r in results}) == 1
    assert wallet_balance(organization=org).total_micros == 7_000_000
