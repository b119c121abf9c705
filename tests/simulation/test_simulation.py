"""The simulator (``tests/simulation``) on the CI seeds: every invariant holds, a seed replays bit for bit, both
engines agree, and planted faults are reported by the right invariant. Only the outside boundaries are
replaced (the compute backend, Stripe's Checkout API, the broker: ``tests/simulation/world.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.simulation.events import events_draw
from tests.simulation.invariants import INVARIANTS
from tests.simulation.runner import run_seed

pytestmark = pytest.mark.django_db
CI_SEEDS = (1, 2)
CI_EVENTS = 120


def test_the_ci_seeds_hold_every_invariant_and_both_engines_agree() -> None:
    for seed in CI_SEEDS:
        sql = run_seed(seed, engine="sql", events=CI_EVENTS)
        portable = run_seed(seed, engine="portable", events=CI_EVENTS)
        assert (sql.failure, portable.failure) == (None, None)
        assert sql.digest == portable.digest
        assert sql.checks == portable.checks == 9 * (CI_EVENTS + 1)


def test_a_seed_replays_the_same_events_and_digest() -> None:
    assert events_draw(7, 50) == events_draw(7, 50)
    first, again = run_seed(7, events=60), run_seed(7, events=60)
    assert first.events == again.events
    assert first.digest == again.digest != ""


def test_a_removed_members_token_that_still_acts_is_reported(monkeypatch: Any) -> None:
    """Planted fault: authentication ignores the membership and the revocation that came with the removal."""
    from portal import services
    from portal.models import ApiToken

    def ignore_membership(raw: str) -> Any:
        return ApiToken.objects.filter(prefix=raw.split("_", 2)[1]).first()

    monkeypatch.setattr(services, "api_token_authenticate", ignore_membership)
    events = [("member_remove", {"a": 0, "b": 0, "c": 0})]
    failures = [run_seed(s, events=events).failure for s in (*CI_SEEDS, 3, 4)]
    failure = next(f for f in failures if f is not None)
    assert failure.invariant == "removed_member_token_refused"
    assert failure.step == 1


def test_a_double_charged_minute_is_reported(monkeypatch: Any) -> None:
    """Planted fault: after each tick the newest minute is posted to the ledger a second time."""
    from billing import metering
    from billing.choices import SystemAccount, TransactionKind
    from billing.ledger import Posting, ledger_post, system_account
    from billing.models import UsageRecord

    tick = metering.metering_tick

    def double(**kwargs: Any) -> Any:
        result = tick(**kwargs)
        r = UsageRecord.objects.filter(transaction__isnull=False).order_by("-pk").first()
        if r is not None:
            leg = r.transaction.entries.filter(amount_micros__lt=0).select_related("account").first()
            if leg is not None and leg.account.balance_micros >= r.amount_micros:
                ledger_post(
                    idempotency_key=f"double:{r.pk}",
                    kind=TransactionKind.USAGE,
                    organization=r.organization,
                    memo="GPU usage",
                    postings=[
                        Posting(leg.account, -r.amount_micros),
                        Posting(system_account(SystemAccount.REVENUE), r.amount_micros),
                    ],
                )
        return result

    monkeypatch.setattr(metering, "metering_tick", double)
    result = run_seed(1, events=CI_EVENTS)
    assert result.failure is not None
    assert result.failure.invariant == "usage_postings_match_minutes"


def test_quota_kept_after_stop_is_reported(monkeypatch: Any) -> None:
    """Planted fault: a stopped instance keeps its placement (its capacity is never given back)."""
    from instances import transitions

    original = transitions._compare_and_set

    def keep(moves: Any, now: Any) -> Any:
        for m in moves:
            if m.to == "stopped" and isinstance(m.fields, dict):
                m.fields.pop("placement", None)
        return original(moves, now)

    monkeypatch.setattr(transitions, "_compare_and_set", keep)
    failures = [run_seed(s, engine="portable", events=CI_EVENTS).failure for s in CI_SEEDS]
    assert "capacity_held_only_by_running" in {f.invariant for f in failures if f is not None}


def test_a_refund_skipped_under_the_race_is_reported(monkeypatch: Any) -> None:
    """Planted fault: a completion that arrives after its refund does not apply the refund waiting for it."""
    from billing import payments

    apply = payments._reversals_apply
    calls = {"n": 0}

    def skip_after_completion(payment_intent: str) -> int:
        import inspect

        if inspect.stack()[1].function == "_checkout_completed":
            calls["n"] += 1
            return 0
        return apply(payment_intent)

    monkeypatch.setattr(payments, "_reversals_apply", skip_after_completion)
    events = [
        ("topup", {"a": 0, "b": 5, "c": 0}),
        ("refund", {"a": 0, "b": 3, "c": 0}),
        ("stripe_deliver", {"a": 1, "b": 1, "c": 0}),  # the refund first
        ("stripe_deliver", {"a": 0, "b": 1, "c": 0}),  # then the completion
    ]
    result = run_seed(1, events=events)
    assert calls["n"] == 1
    assert result.failure is not None
    assert (result.failure.invariant, result.failure.step) == ("stripe_payment_credited_once", 4)


@pytest.mark.parametrize("engine", ["portable", "sql"])
@pytest.mark.parametrize(
    "between",
    [
        pytest.param([], id="tick-at-the-sighting"),
        pytest.param([("advance", {"a": 50, "b": 0, "c": 0}), ("advance", {"a": 70, "b": 0, "c": 0})], id="late-tick"),
    ],
)
def test_a_tick_before_a_late_reconcile_charges_no_minute_after_a_lost_jobs_last_sighting(
    engine: str, between: list[Any]
) -> None:
    """Regression (the simulator's seed 3): a job is seen running once, a tick runs with no reconcile since
    (at the sighting, or ~3 minutes later while reconciles are late), then the job is lost without an exit
    code. Before the fix the tick charged up to its own instant (minutes 0–3 of the late tick; minute 0 of the
    other) and the loss then ended the segment at the sighting, before minutes already charged; now the tick
    charges an open segment only up to its last sighting, inclusive (``InstanceRunSegment.seen_until``), and the
    loss ends it just after that sighting: exactly minute 0, on both engines."""
    from billing.models import UsageRecord

    events = [
        ("launch", {"a": 944, "b": 675, "c": 147}),
        ("worker", {"a": 451, "b": 924, "c": 684}),
        ("reconcile", {"a": 91, "b": 306, "c": 720}),
        *between,
        ("tick", {"a": 954, "b": 957, "c": 302}),
        ("exit", {"a": 610, "b": 752, "c": 851}),  # b % 5 == 2: processes gone, no exit code (a lost node)
        ("reconcile", {"a": 242, "b": 678, "c": 286}),
        ("tick", {"a": 1, "b": 2, "c": 3}),
    ]
    charged: list[tuple[int, int]] = []

    def minutes_charged(world: Any) -> list[str]:  # not an invariant: records what was charged after each step
        charged[:] = list(UsageRecord.objects.values_list("minute_index", "gpu_count"))
        return []

    lines: list[str] = []
    result = run_seed(3, engine=engine, events=events, verbose=lines.append, invariants=(*INVARIANTS, minutes_charged))
    assert result.failure is None, result.failure
    assert "ends on the backend: failed None" in lines[-3], lines
    assert " launch i0 1×" in lines[0], lines[0]
    assert charged == [(0, 1)]  # minute 0 of the one GPU, nothing after the sighting
