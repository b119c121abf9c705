"""The invariants the simulator checks after every step. Each is a function ``(world) -> list[str]`` whose
docstring is its promise; an empty list means it holds. Sources: DESIGN.md §1–§4 (money, metering, access,
state machines) and the rules in the modules named in each docstring."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime

from tests.simulation.world import World

Invariant = Callable[[World], list[str]]


def ledger_balances(world: World) -> list[str]:
    """Every ledger transaction's entries sum to zero (double entry), and every account that caches its
    balance (``track_balance``) holds exactly the sum of its entries (``billing.ledger.ledger_post``)."""
    from django.db.models import Sum

    from billing.models import LedgerAccount, LedgerEntry

    out = [
        f"transaction {t['transaction_id']} sums to {t['s']}"
        for t in LedgerEntry.objects.values("transaction_id").annotate(s=Sum("amount_micros")).exclude(s=0)
    ]
    sums = dict(
        LedgerEntry.objects.values("account_id").annotate(s=Sum("amount_micros")).values_list("account_id", "s")
    )
    for pk, code, cached in LedgerAccount.objects.filter(track_balance=True).values_list(
        "pk", "code", "balance_micros"
    ):
        if cached != (sums.get(pk) or 0):
            out.append(f"account {code} caches {cached}, its entries sum to {sums.get(pk) or 0}")
    return out


def no_negative_balance(world: World) -> list[str]:
    """No wallet and no credit grant is below zero: an account that may not go negative never does
    (DESIGN.md §4: the budget guard stops work first, refunds debit at most the paid balance)."""
    from billing.models import LedgerAccount

    return [
        f"account {code} at {balance}"
        for code, balance in LedgerAccount.objects.filter(allow_negative=False, balance_micros__lt=0).values_list(
            "code", "balance_micros"
        )
    ]


def minutes_charged_once_at_the_price(world: World) -> list[str]:
    """Every usage record is a minute a run segment had begun (nothing after its last running minute), at the
    price in force when the minute began for the instance's tier, charged per the one rounding rule
    (``billing.pricing.minute_charge_micros``); after an on-time tick every begun minute of every segment (of an
    open one: up to its last sighting, ``seen_until``) is charged or written off, exactly once
    (``billing.metering``) — "begun" as the segment stood at that tick (its end, or its last sighting + 1 µs).
    Records are read once (they are append-only); segments, whose end may move, every time."""
    from billing.metering import started_minutes
    from billing.models import UsageRecord, UsageWriteOff
    from billing.pricing import PriceBook, minute_charge_micros
    from instances.models import Instance, InstanceRunSegment

    out: list[str] = []
    state = world.seen.setdefault("minutes", {"record": 0, "writeoff": 0, "charged": defaultdict(set), "book": None})
    charged: dict[int, set[int]] = state["charged"]
    instances = {pk: (name, tier) for pk, name, tier in Instance.objects.values_list("pk", "name", "tier")}
    new = list(UsageRecord.objects.filter(pk__gt=state["record"], segment_id__isnull=False).order_by("pk"))
    if new:
        book = PriceBook()
        for r in new:
            state["record"] = r.pk
            seg_id, index = int(r.segment_id or 0), int(r.minute_index or 0)  # both set: filtered above
            if index in charged[seg_id]:
                out.append(f"{instances[r.instance_id][0]} minute {index} charged twice")
            charged[seg_id].add(index)
            price = book.at(r.gpu_type, r.mode, r.minute, instances[r.instance_id][1])
            if price != r.price_per_gpu_hour_micros:
                name = instances[r.instance_id][0]
                out.append(f"{name} minute {r.minute_index} at {r.price_per_gpu_hour_micros}, in force {price}")
            expected = minute_charge_micros(
                price_per_gpu_hour_micros=r.price_per_gpu_hour_micros,
                gpus=r.gpu_count,
                minute_index=r.price_minute_index,
            )
            if r.amount_micros != expected:
                out.append(
                    f"{instances[r.instance_id][0]} minute {r.minute_index} charged {r.amount_micros}, rule {expected}"
                )
    written: dict[int, set[int]] = state.setdefault("written", defaultdict(set))
    for w in UsageWriteOff.objects.filter(pk__gt=state["writeoff"]).order_by("pk"):
        state["writeoff"] = w.pk
        written[w.segment_id].update(range(w.first_minute_index, w.first_minute_index + w.minutes))
    for seg in InstanceRunSegment.objects.all():
        name = instances[seg.instance_id][0]
        done = charged.get(seg.pk, set())
        if seg.ended_at is not None and done:
            last = started_minutes(started_at=seg.started_at, until=seg.ended_at)
            if max(done) >= last:
                out.append(
                    f"{name} segment {seg.pk} ({seg.started_at:%H:%M:%S}–{seg.ended_at:%H:%M:%S}) charged minute"
                    f" {max(done)} after its last running minute"
                )
        until: datetime | None = world.seen.get("tick_until", {}).get(seg.pk)  # as the segment was at the tick
        if until is not None:
            due = set(range(started_minutes(started_at=seg.started_at, until=until)))
            missing = due - done - written.get(seg.pk, set())
            if missing:
                out.append(f"{name} segment {seg.pk} minutes {sorted(missing)[:5]} not charged after the tick")
    return out


def usage_postings_match_minutes(world: World) -> list[str]:
    """Each usage posting moves to revenue exactly the minutes it names less the shortfall it records, so no
    minute is charged twice through the ledger (``billing.usage_batches.batch_postings``)."""
    from django.db.models import Count, Sum

    from billing.choices import SystemAccount
    from billing.models import LedgerEntry, LedgerTransaction, UsageRecord

    per_txn = {
        row["transaction_id"]: (row["s"], row["n"])
        for row in UsageRecord.objects.filter(transaction__isnull=False)
        .values("transaction_id")
        .annotate(s=Sum("amount_micros"), n=Count("id"))
    }
    revenue = dict(
        LedgerEntry.objects.filter(account__code=SystemAccount.REVENUE.value, transaction__kind="usage")
        .values("transaction_id")
        .annotate(s=Sum("amount_micros"))
        .values_list("transaction_id", "s")
    )
    out = []
    for t in LedgerTransaction.objects.filter(kind="usage"):
        minutes, count = per_txn.get(t.pk, (0, 0))
        charged = (revenue.get(t.pk) or 0) + int(t.metadata.get("shortfall_micros", 0))
        if charged != minutes or count != t.metadata.get("records", count):
            out.append(f"usage posting {t.idempotency_key} charges {charged} for {count} minutes worth {minutes}")
    return out


def app_call_charged_iff_succeeded(world: World) -> list[str]:
    """A succeeded app call is charged its price exactly once (one posting, the price taken from the caller);
    a failed or reserved one is charged nothing (``portal.marketplace.calls``)."""
    from billing.models import LedgerEntry
    from portal.marketplace.models import AppCall

    postings: dict[int, set[int]] = defaultdict(set)
    paid: dict[int, int] = defaultdict(int)
    for txn, meta, org, amount in LedgerEntry.objects.filter(transaction__kind="app_call").values_list(
        "transaction_id", "transaction__metadata", "account__organization_id", "amount_micros"
    ):
        call = int(meta.get("call", 0))
        postings[call].add(txn)
        if amount < 0 and org is not None:
            paid[call] -= amount
    out = []
    for pk, status, price in AppCall.objects.values_list("pk", "status", "price_micros"):
        txns = postings.get(pk, set())
        if status == "succeeded":
            if len(txns) != 1 or paid[pk] != price:
                out.append(f"succeeded call {pk} has {len(txns)} postings taking {paid[pk]}, price {price}")
        elif txns:
            out.append(f"{status} call {pk} has postings {sorted(txns)}")
    return out


def stripe_payment_credited_once(world: World) -> list[str]:
    """A paid top-up is credited exactly once, its amount to the organization whose Checkout Session it is;
    an unpaid one is credited nothing; every refund or dispute of a credited payment is applied to its target,
    and what the wallet lost to it (debits less what a won dispute gave back) is exactly what it records as
    debited (``billing.payments``)."""
    from billing.models import LedgerEntry, PaymentReversal, TopUp

    credits: dict[str, dict[int | None, int]] = defaultdict(lambda: defaultdict(int))
    txns: dict[str, set[int]] = defaultdict(set)
    for key, txn, org, amount in LedgerEntry.objects.filter(
        transaction__idempotency_key__startswith="topup:"
    ).values_list("transaction__idempotency_key", "transaction_id", "account__organization_id", "amount_micros"):
        txns[key].add(txn)
        if org is not None:
            credits[key][org] += amount
    out = []
    paid_intents = set()
    for pk, status, org, amount, intent in TopUp.objects.values_list(
        "pk", "status", "organization_id", "amount_micros", "stripe_payment_intent"
    ):
        key = f"topup:{pk}"
        if status == "paid":
            paid_intents.add(intent)
            if len(txns[key]) != 1 or dict(credits[key]) != {org: amount}:
                out.append(f"paid top-up {pk} of {amount} to {org} credited {dict(credits[key])} in {len(txns[key])}")
        elif txns.get(key):
            out.append(f"{status} top-up {pk} was credited")
    lost: dict[str, int] = defaultdict(int)
    for meta, amount in LedgerEntry.objects.filter(
        transaction__kind="refund", account__organization__isnull=False
    ).values_list("transaction__metadata", "amount_micros"):
        lost[meta.get("reference", "")] -= amount
    for ref, intent, target, applied, debited in PaymentReversal.objects.values_list(
        "reference", "payment_intent", "target_micros", "applied_micros", "debited_micros"
    ):
        if intent in paid_intents and applied != target:
            out.append(f"reversal {ref} of a credited payment applied {applied} of {target}")
        if lost[ref] != debited:
            out.append(f"reversal {ref} took {lost[ref]} from the wallet, records {debited}")
    return out


def capacity_held_only_by_running(world: World) -> list[str]:
    """Only an instance that is provisioning, running or stopping holds a placement or an open run segment;
    no node is given more GPUs than it has and no organization holds more GPUs than its quota
    (``instances.choices.HOLDS_CAPACITY``, ``instances.scheduler``)."""
    from instances.choices import HOLDS_CAPACITY
    from instances.models import GpuQuota, Instance, InstanceRunSegment, Node

    out = []
    used: dict[str, int] = defaultdict(int)
    per_org: dict[int, int] = defaultdict(int)
    for inst in Instance.objects.all():
        if inst.status in HOLDS_CAPACITY:
            for name, gpus in inst.placement or []:
                used[name] += gpus
            per_org[inst.organization_id] += inst.gpu_count
        elif inst.placement:
            out.append(f"{inst.status} instance {inst.name} holds {inst.placement}")
    for name, gpus in Node.objects.values_list("name", "gpus"):
        if used[name] > gpus:
            out.append(f"node {name} gives {used[name]} of its {gpus} GPUs")
    for org_id, quota in GpuQuota.objects.values_list("organization_id", "gpus"):
        if per_org[org_id] > quota:
            out.append(f"organization {org_id} holds {per_org[org_id]} GPUs over its quota {quota}")
    for seg in InstanceRunSegment.objects.filter(ended_at__isnull=True).select_related("instance"):
        if seg.instance.status not in ("running", "stopping"):
            out.append(f"{seg.instance.status} instance {seg.instance.name} has an open run segment")
    return out


def removed_member_token_refused(world: World) -> list[str]:
    """A token authenticates only while it is not revoked and its user is still a member of its organization;
    a removed member's or a revoked token is refused (DESIGN.md §1 #11, ``portal.services.api_token_authenticate``)."""
    from portal.models import ApiToken, Membership
    from portal.services import api_token_authenticate

    key = (
        tuple(Membership.objects.order_by("pk").values_list("pk", "role")),
        tuple(ApiToken.objects.filter(revoked_at__isnull=False).order_by("pk").values_list("pk", flat=True)),
    )
    if world.seen.get("tokens") == key:  # no membership or token changed since the last check
        return []
    out = []
    for plaintext, token in world.tokens:
        token.refresh_from_db()
        member = Membership.objects.filter(organization_id=token.organization_id, user_id=token.user_id).exists()
        should = member and token.revoked_at is None
        works = api_token_authenticate(plaintext) is not None
        if works != should:
            out.append(f"token {token.prefix}: works={works}, member={member}, revoked={token.revoked_at is not None}")
    if not out:
        world.seen["tokens"] = key
    return out


def status_follows_transition_table(world: World) -> list[str]:
    """Every instance's history is a chain of moves its transition table allows, from ``pending`` to its
    current status (``instances.choices.INSTANCE_TRANSITIONS``)."""
    from instances.choices import INSTANCE_TRANSITIONS
    from instances.models import Instance, InstanceTransition

    out = []
    history = defaultdict(list)
    for t in InstanceTransition.objects.order_by("id"):
        history[t.instance_id].append((t.from_status, t.to_status))
    for pk, name, status in Instance.objects.values_list("pk", "name", "status"):
        current = "pending"
        for a, b in history[pk]:
            if a != current or b not in INSTANCE_TRANSITIONS[a]:
                out.append(f"{name}: {a} → {b} after {current}")
            current = b
        if current != status:
            out.append(f"{name} is {status}, its history ends at {current}")
    return out


INVARIANTS: tuple[Invariant, ...] = (
    ledger_balances,
    no_negative_balance,
    minutes_charged_once_at_the_price,
    usage_postings_match_minutes,
    app_call_charged_iff_succeeded,
    stripe_payment_credited_once,
    capacity_held_only_by_running,
    removed_member_token_refused,
    status_follows_transition_table,
)
