"""The posting function, wallets, credit grants and their expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from billing.choices import GrantKind, SystemAccount, TransactionKind
from billing.models import LedgerAccount, LedgerEntry, LedgerTransaction
from billing.selectors import account_entry_sum, wallet_balance
from billing.services import (
    IdempotencyKeyReused,
    InsufficientFunds,
    Posting,
    UnbalancedTransaction,
    credit_grant_create,
    credit_grant_expire,
    ledger_post,
    system_account,
    wallet_spend,
    wallet_top_up,
)
from billing.tasks import expire_credit_grants

pytestmark = pytest.mark.django_db
CNY = 1_000_000


def test_it_refuses_an_unbalanced_transaction_and_writes_nothing(alice_org):
    paid = alice_org.wallet.paid_account
    with pytest.raises(UnbalancedTransaction, match="sum to 1 micros"):
        ledger_post(
            idempotency_key="k1",
            kind=TransactionKind.ADJUSTMENT,
            postings=[Posting(paid, 5 * CNY + 1), Posting(system_account(SystemAccount.ADJUSTMENTS), -5 * CNY)],
        )
    assert LedgerTransaction.objects.count() == 0
    assert LedgerEntry.objects.count() == 0
    paid.refresh_from_db()
    assert paid.balance_micros == 0


def test_it_refuses_empty_zero_and_non_integer_entries(alice_org):
    paid = alice_org.wallet.paid_account
    with pytest.raises(UnbalancedTransaction):
        ledger_post(idempotency_key="k", kind=TransactionKind.ADJUSTMENT, postings=[])
    with pytest.raises(UnbalancedTransaction, match="non-zero integer"):
        ledger_post(idempotency_key="k", kind=TransactionKind.ADJUSTMENT, postings=[Posting(paid, 0)])
    with pytest.raises(UnbalancedTransaction, match="non-zero integer"):
        ledger_post(
            idempotency_key="k", kind=TransactionKind.ADJUSTMENT, postings=[Posting(paid, 1.5), Posting(paid, -1.5)]
        )  # type: ignore[arg-type]
    assert LedgerTransaction.objects.count() == 0


def test_a_reused_key_with_the_same_content_returns_the_original(alice_org):
    first = wallet_top_up(organization=alice_org, amount_micros=7 * CNY, idempotency_key="topup:1")
    again = wallet_top_up(organization=alice_org, amount_micros=7 * CNY, idempotency_key="topup:1")
    assert again.pk == first.pk
    assert LedgerTransaction.objects.filter(idempotency_key="topup:1").count() == 1
    assert wallet_balance(organization=alice_org).paid_micros == 7 * CNY


def test_a_reused_key_with_different_content_is_refused_and_nothing_changes(alice_org):
    wallet_top_up(organization=alice_org, amount_micros=7 * CNY, idempotency_key="topup:1")
    with pytest.raises(IdempotencyKeyReused, match="topup:1"):
        wallet_top_up(organization=alice_org, amount_micros=8 * CNY, idempotency_key="topup:1")
    assert LedgerTransaction.objects.count() == 1
    assert wallet_balance(organization=alice_org).paid_micros == 7 * CNY


def test_spending_takes_unexpired_grants_first_earliest_expiry_first_then_paid(alice_org):
    now = timezone.now()
    later = credit_grant_create(
        organization=alice_org,
        amount_micros=3 * CNY,
        expires_at=now + timedelta(days=20),
        kind=GrantKind.PROMOTIONAL,
        idempotency_key="g-later",
    )
    sooner = credit_grant_create(
        organization=alice_org,
        amount_micros=2 * CNY,
        expires_at=now + timedelta(days=5),
        kind=GrantKind.TRIAL,
        idempotency_key="g-sooner",
    )
    wallet_top_up(organization=alice_org, amount_micros=10 * CNY, idempotency_key="topup:1")

    txn = wallet_spend(organization=alice_org, amount_micros=6_500_000, idempotency_key="spend:1")

    amounts = {e.account.code: e.amount_micros for e in txn.entries.select_related("account")}
    assert amounts == {
        sooner.account.code: -2 * CNY,
        later.account.code: -3 * CNY,
        alice_org.wallet.paid_account.code: -1_500_000,
        SystemAccount.REVENUE.value: 6_500_000,
    }
    bal = wallet_balance(organization=alice_org)
    assert (bal.trial_micros, bal.paid_micros, bal.total_micros) == (0, 8_500_000, 8_500_000)


def test_a_spend_larger_than_the_balance_is_refused_and_writes_nothing(alice_org):
    credit_grant_create(
        organization=alice_org,
        amount_micros=10 * CNY,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key="g",
    )
    before = LedgerTransaction.objects.count()
    with pytest.raises(InsufficientFunds) as err:
        wallet_spend(organization=alice_org, amount_micros=10 * CNY + 1, idempotency_key="spend:big")
    assert err.value.available_micros == 10 * CNY
    assert err.value.requested_micros == 10 * CNY + 1
    assert LedgerTransaction.objects.count() == before
    assert wallet_balance(organization=alice_org).total_micros == 10 * CNY


def test_an_expired_grant_stops_counting_and_its_expiry_posting_balances(alice_org, time_machine):
    start = timezone.now()
    grant = credit_grant_create(
        organization=alice_org,
        amount_micros=10 * CNY,
        expires_at=start + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key="g",
    )
    wallet_spend(organization=alice_org, amount_micros=4 * CNY, idempotency_key="spend:1")

    time_machine.move_to(start + timedelta(days=30, seconds=1))
    # Before the task posts the expiry, the grant already no longer counts and cannot be spent.
    assert wallet_balance(organization=alice_org).total_micros == 0
    with pytest.raises(InsufficientFunds):
        wallet_spend(organization=alice_org, amount_micros=1, idempotency_key="spend:2")

    # The remainder is posted once no metering catch-up can still charge minutes from before the expiry.
    assert expire_credit_grants() == 0
    time_machine.move_to(start + timedelta(days=30, hours=24, seconds=1))
    assert expire_credit_grants() == 1
    assert expire_credit_grants() == 0  # idempotent
    grant.refresh_from_db()
    assert grant.expired_at is not None
    expiry = LedgerTransaction.objects.get(idempotency_key=f"grant-expiry:{grant.pk}")
    entries = sorted(expiry.entries.values_list("account__code", "amount_micros"))
    assert entries == sorted([(grant.account.code, -6 * CNY), (SystemAccount.EXPIRED_CREDIT.value, 6 * CNY)])
    assert sum(a for _, a in entries) == 0
    grant.account.refresh_from_db()
    assert grant.account.balance_micros == 0 == account_entry_sum(grant.account)
    # Expiring twice is a no-op.
    credit_grant_expire(grant=grant)
    assert LedgerTransaction.objects.filter(kind=TransactionKind.GRANT_EXPIRY).count() == 1


def test_cached_balances_equal_the_sum_of_entries(alice_org, bob):
    credit_grant_create(
        organization=alice_org,
        amount_micros=10 * CNY,
        expires_at=timezone.now() + timedelta(days=30),
        kind=GrantKind.TRIAL,
        idempotency_key="g",
    )
    wallet_top_up(organization=alice_org, amount_micros=3 * CNY, idempotency_key="t")
    for i in range(5):
        wallet_spend(organization=alice_org, amount_micros=2_345_678, idempotency_key=f"s{i}")
    for account in LedgerAccount.objects.filter(track_balance=True):
        assert account.balance_micros == account_entry_sum(account), account.code
    assert wallet_balance(organization=alice_org).total_micros == 13 * CNY - 5 * 2_345_678
