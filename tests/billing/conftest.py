"""Fixtures of the billing tests: the ledger invariants every money test ends with."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def assert_ledger_invariants() -> None:
    """Debits equal credits (overall and per transaction), each cached balance equals the sum of its
    entries, no wallet or grant account is negative, and each external reference is applied once."""
    from django.db.models import Count, Sum

    from billing.models import LedgerAccount, LedgerEntry, LedgerTransaction, UsageRecord

    debits = LedgerEntry.objects.filter(amount_micros__gt=0).aggregate(s=Sum("amount_micros"))["s"] or 0
    credits = LedgerEntry.objects.filter(amount_micros__lt=0).aggregate(s=Sum("amount_micros"))["s"] or 0
    assert debits == -credits, (debits, credits)
    unbalanced = (
        LedgerTransaction.objects.annotate(s=Sum("entries__amount_micros"))
        .exclude(s=0)
        .values_list("idempotency_key", "s")
    )
    assert list(unbalanced) == []
    for account in LedgerAccount.objects.filter(track_balance=True).annotate(s=Sum("entries__amount_micros")):
        assert account.balance_micros == (account.s or 0), account.code
        assert account.balance_micros >= 0, account.code
    doubled = UsageRecord.objects.values("instance_id", "minute").annotate(n=Count("id")).filter(n__gt=1)
    assert list(doubled) == []
    top_ups = (
        LedgerTransaction.objects.filter(kind="top_up")
        .values("metadata__topup_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1, metadata__topup_id__isnull=False)
    )
    assert list(top_ups) == []


@pytest.fixture
def ledger_invariants() -> Callable[[], None]:
    """Call it at the end of a test that moves money: ``ledger_invariants()``."""
    return assert_ledger_invariants
