"""Property test: random sequences of grants, top-ups, spends and expiries keep the ledger consistent."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.choices import GrantKind
from billing.models import CreditGrant, LedgerAccount, LedgerEntry, LedgerTransaction
from billing.selectors import account_entry_sum, wallet_balance
from billing.services import InsufficientFunds, credit_grant_create, credit_grant_expire, wallet_spend, wallet_top_up
from portal.models import User
from portal.services import organization_create

amounts = st.integers(min_value=1, max_value=20_000_000)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("grant"), st.integers(0, 1), amounts, st.integers(1, 10)),
        st.tuples(st.just("topup"), st.integers(0, 1), amounts, st.just(0)),
        st.tuples(st.just("spend"), st.integers(0, 1), amounts, st.just(0)),
        st.tuples(st.just("advance"), st.just(0), st.just(0), st.integers(1, 5)),
    ),
    min_size=1,
    max_size=25,
)


@pytest.mark.django_db
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=ops)
def test_random_sequences_keep_every_invariant(sequence, time_machine):
    # Each example runs in a savepoint that is rolled back, so examples never see each other's rows.
    with transaction.atomic():
        _run_sequence(sequence, time_machine)
        transaction.set_rollback(True)


def _run_sequence(sequence, time_machine):
    start = timezone.now()
    time_machine.move_to(start)
    owner, _ = User.objects.get_or_create(email="prop@example.com")
    orgs = [organization_create(name=f"p{i}-{start.timestamp()}", owner=owner) for i in range(2)]
    now = start
    for n, (op, which, amount, days) in enumerate(sequence):
        org = orgs[which]
        if op == "grant":
            credit_grant_create(
                organization=org,
                amount_micros=amount,
                expires_at=now + timedelta(days=days),
                kind=GrantKind.PROMOTIONAL,
                idempotency_key=f"g{n}-{start.timestamp()}",
            )
        elif op == "topup":
            wallet_top_up(organization=org, amount_micros=amount, idempotency_key=f"t{n}-{start.timestamp()}")
        elif op == "spend":
            before = wallet_balance(organization=org, now=now).total_micros
            try:
                wallet_spend(
                    organization=org, amount_micros=amount, idempotency_key=f"s{n}-{start.timestamp()}", now=now
                )
            except InsufficientFunds:
                assert amount > before
                assert wallet_balance(organization=org, now=now).total_micros == before
            else:
                assert wallet_balance(organization=org, now=now).total_micros == before - amount
        else:
            now = now + timedelta(days=days)
            time_machine.move_to(now)
            for grant in CreditGrant.objects.filter(expired_at__isnull=True, expires_at__lte=now):
                credit_grant_expire(grant=grant, now=now)

        # Invariants after every step.
        for account in LedgerAccount.objects.filter(track_balance=True):
            assert account.balance_micros == account_entry_sum(account), account.code
            assert account.balance_micros >= 0, account.code
        debits = LedgerEntry.objects.filter(amount_micros__gt=0).aggregate(s=Sum("amount_micros"))["s"] or 0
        credits = LedgerEntry.objects.filter(amount_micros__lt=0).aggregate(s=Sum("amount_micros"))["s"] or 0
        assert debits == -credits
        for txn in LedgerTransaction.objects.all():
            assert sum(txn.entries.values_list("amount_micros", flat=True)) == 0
