"""The seed's set-up and its events: drawn from the seed alone (never from the database), so a seed always
gives the same list, and applied through the real services.

An event is ``(kind, params)`` with small integers as parameters; a parameter that names something (an
organization, an instance, a top-up) is an index taken modulo what exists when the event runs, so removing
events (the shrinker) leaves every other event meaningful. An event whose target does not exist is a no-op.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tests.simulation.world import Delivery, World, run_on_commit_now, webhook_deliver

Event = tuple[str, dict[str, int]]

#: kind → weight in the mix. Money and capacity first: ticks, launches, stops, exits, top-ups, refunds.
WEIGHTS: dict[str, int] = {
    "advance": 10,
    "tick": 12,
    "tick_duplicate": 3,
    "tick_stale": 2,
    "reconcile": 10,
    "schedule": 3,
    "worker": 12,
    "worker_restart": 2,
    "launch": 10,
    "launch_over_quota": 2,
    "stop": 5,
    "exit": 4,
    "preempt": 2,
    "price_change": 2,
    "price_backdated": 1,
    "topup": 4,
    "stripe_deliver": 8,
    "refund": 3,
    "dispute": 1,
    "app_call": 6,
    "member_remove": 1,
    "token_revoke": 1,
    "signup": 1,
}

GPU_CHOICES = (("cpu-local", 1), ("cpu-local", 2), ("A100-80G-SXM", 1), ("A100-80G-SXM", 2), ("A100-80G-SXM", 8))


def events_draw(seed: int, count: int) -> list[Event]:
    """The ``count`` events of ``seed`` (a generator of its own, apart from the set-up's)."""
    rng = random.Random(f"events:{seed}")
    kinds, weights = zip(*WEIGHTS.items(), strict=True)
    out: list[Event] = []
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        out.append((kind, {"a": rng.randrange(1000), "b": rng.randrange(1000), "c": rng.randrange(1000)}))
    return out


def _pick(items: list[Any], index: int) -> Any:
    return items[index % len(items)] if items else None


class Refusal(Exception):
    """A refused event that was not refused as documented, or wrote something (caught by the runner)."""

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(message)
        self.invariant = invariant


def _footprint() -> tuple[int, ...]:
    """Row counts a refused event must leave as they were."""
    from billing.models import GpuPrice, LedgerTransaction
    from instances.models import Instance, InstanceTransition
    from portal.models import AuditEvent

    return tuple(m.objects.count() for m in (Instance, InstanceTransition, GpuPrice, LedgerTransaction, AuditEvent))


def _refused(fn: Callable[[], Any], error: type[Exception], code: str | None = None) -> None:
    """Run ``fn``, which the product must refuse with ``error`` (and ``code``), writing nothing."""
    before = _footprint()
    try:
        fn()
    except error as exc:
        if code is not None and getattr(exc, "code", None) != code:
            raise Refusal(
                "refused_with_documented_error", f"refused with {getattr(exc, 'code', None)!r}, not {code!r}"
            ) from exc
    else:
        raise Refusal("refused_with_documented_error", f"accepted; expected {error.__name__} {code or ''}")
    if _footprint() != before:
        raise Refusal("refusal_writes_nothing", f"rows before {before}, after {_footprint()}")


def world_populate(world: World) -> None:
    """The seed's organizations (an owner each, signed up and verified: trial credit), teammates with roles,
    quotas, nodes, paid balances, API tokens and one published echo app."""
    from django.core.management import call_command

    from billing.pricing import seed_price_book, seed_tier_discounts
    from billing.services import wallet_top_up
    from instances.models import GpuQuota, GpuType, Node
    from portal.choices import Role, TokenScope
    from portal.marketplace import services as market
    from portal.marketplace.choices import AppState, ServingKind
    from portal.services import api_token_create, membership_add

    rng = world.rng
    seed_price_book()  # what ``manage.py seed_catalog`` does, without its printing
    seed_tier_discounts()
    call_command("seed_gpu_catalog", stdout=io.StringIO())
    cpu, a100 = GpuType.objects.get(code="cpu-local"), GpuType.objects.get(code="A100-80G-SXM")
    Node.objects.create(name="local", gpu_type=cpu, gpus=rng.choice((2, 3, 4)), block="local")
    for n in range(rng.choice((1, 2, 3))):
        Node.objects.create(name=f"a100-{n}", gpu_type=a100, gpus=8, block="rack-1")
    for i in range(rng.choice((2, 3, 4))):
        owner, org = _signup(world, f"o{i}")
        if rng.random() < 0.5:
            GpuQuota.objects.create(organization=org, gpus=rng.choice((2, 4, 8)))
        if rng.random() < 0.8:
            wallet_top_up(
                organization=org, amount_micros=rng.randrange(1, 300) * 1_000_000, idempotency_key=f"sim-initial:{i}"
            )
        for j in range(rng.choice((0, 1, 2))):
            user, _ = _signup(world, f"o{i}m{j}")
            role = rng.choice((Role.ADMIN, Role.MEMBER, Role.MEMBER, Role.BILLING))
            membership_add(organization=org, user=user, role=role, acting_user=owner)
            world.users.append((user, i, role))
    for user, i, role in world.users:
        scope = TokenScope.WRITE if role in (Role.OWNER, Role.ADMIN) else TokenScope.READ
        created = api_token_create(user=user, organization=world.orgs[i], name="sim", scope=scope)
        world.tokens.append((created.plaintext, created.token))
    publisher, owner = world.orgs[0], world.users[0][0]
    app = market.app_create(
        publisher=publisher,
        user=owner,
        name="Echo",
        category="general",
        description="echo",
        input_schema={"type": "object", "required": ["text"]},
        output_schema={"type": "object", "required": ["output"]},
        price_per_call_micros=rng.choice((100_000, 250_000, 1_000_000)),
        visibility="public",
    )
    market.app_version_add(app=app, user=owner, kind=ServingKind.ECHO)
    market.app_transition(app=app, to=AppState.IN_REVIEW, acting_user=owner)
    world.apps.append(market.app_transition(app=app, to=AppState.PUBLISHED, acting_user=None, staff=True))


def _signup(world: World, name: str) -> tuple[Any, Any]:
    """Sign a user up and verify the address (the trial grant, once per address); their personal org."""
    from portal.selectors import organization_for_user
    from portal.services import email_verify, user_signup, verification_token

    user = user_signup(email=f"{name}@sim.example", password="correct horse battery 9", name=name)
    email_verify(token=verification_token(user))
    org = organization_for_user(user=user)
    if "m" not in name:
        from portal.choices import Role

        world.orgs.append(org)
        world.users.append((user, len(world.orgs) - 1, Role.OWNER))
    return user, org


# -- the events -------------------------------------------------------------------------------------------


def event_apply(world: World, event: Event) -> str:
    """Apply one event at the world's clock; returns a short description of what happened (verbose output).
    Raises :class:`Refusal` when a refused event was not refused as documented."""
    kind, p = event
    world.set_now(world.now + timedelta(seconds=1 + p["c"] % 20))  # every event takes a little time
    handler = _HANDLERS[kind]
    out: list[str] = []
    run_on_commit_now(lambda: out.append(handler(world, p) or ""))
    return out[0] if out else ""


def _advance(world: World, p: dict[str, int]) -> str:
    world.set_now(world.now + timedelta(seconds=30 + p["a"] % 600))
    return f"clock {world.now:%H:%M:%S}"


def _tick(world: World, p: dict[str, int]) -> str:
    """The beat's metering task. Its budget guard runs a millisecond after the tick's own instant, as it does in
    real time (on a frozen clock a guard's stop at the tick's very instant would end a segment at the start of
    a minute the tick had just seen begin)."""
    from unittest import mock

    from billing import metering, tasks
    from instances.models import InstanceRunSegment

    guard = metering.budget_guard

    def later_guard(**kwargs: Any) -> Any:
        world.set_now(world.now + timedelta(milliseconds=1))
        return guard(**kwargs)

    # how far this tick has to charge each segment, as the segments stand when it starts (its budget guard may
    # end one just after)
    at = world.now
    micro = timedelta(microseconds=1)  # written out here, not taken from billing.metering, which it checks
    until = {
        pk: min(ended or (seen + micro if seen is not None else at), at)
        for pk, ended, seen in InstanceRunSegment.objects.values_list("pk", "ended_at", "seen_until")
    }
    with mock.patch.object(metering, "budget_guard", later_guard):
        result = tasks.metering_tick.run()
    world.last_tick = world.now
    world.seen["tick_until"] = until
    return f"tick {result}"


def _tick_duplicate(world: World, p: dict[str, int]) -> str:
    return _tick(world, p) + " / " + _tick(world, p)


def _tick_stale(world: World, p: dict[str, int]) -> str:
    from billing.metering import metering_tick

    at = world.now - timedelta(seconds=30 + p["a"] % 900)
    return f"stale tick at {at:%H:%M:%S}: {metering_tick(now=at).records} records"


def _reconcile(world: World, p: dict[str, int]) -> str:
    from instances.services import instances_reconcile

    return f"reconcile {instances_reconcile(backend=world.backend)}"  # type: ignore[arg-type]


def _schedule(world: World, p: dict[str, int]) -> str:
    from instances.services import instances_schedule

    return f"schedule placed {len(instances_schedule())}"


def _worker(world: World, p: dict[str, int], twice: bool = False) -> str:
    """The worker runs every queued task, in an order the event picks; ``twice``: one of them runs again (a
    worker restarted before acknowledging it)."""
    rng = random.Random(p["a"])
    done: list[str] = []
    while world.tasks:
        task, args, kwargs = world.tasks.pop(rng.randrange(len(world.tasks)))
        task.run(*args, **kwargs)
        if twice and not done:
            task.run(*args, **kwargs)
        done.append(task.name.rsplit(".", 1)[-1])
    return f"worker ran {done}"


def _worker_restart(world: World, p: dict[str, int]) -> str:
    return _worker(world, p, twice=True)


def _members(world: World, org_index: int) -> list[Any]:
    return [u for u, i, _role in world.users if i == org_index]


def _launch(world: World, p: dict[str, int]) -> str:
    from instances.services import LaunchError, LaunchSpec, instance_launch
    from portal.permissions import PermissionRefused

    i = p["a"] % len(world.orgs)
    user = _pick(_members(world, i), p["b"])
    gpu_type, gpus = GPU_CHOICES[p["b"] % len(GPU_CHOICES)]
    tier = "interruptible" if p["c"] % 4 == 0 else "on_demand"
    spec = LaunchSpec(
        name=f"i{len(world.instances)}",
        kind="interactive",
        gpu_type=gpu_type,
        gpu_count=gpus,
        command=["sleep", "infinity"],
        tier=tier,
    )
    try:
        inst = instance_launch(organization=world.orgs[i], user=user, spec=spec)
    except (LaunchError, PermissionRefused) as exc:
        return f"launch refused: {getattr(exc, 'code', type(exc).__name__)}"
    world.instances.append(inst)
    return f"launch {inst.name} {gpus}×{gpu_type} {tier} for o{i}: {inst.status}"


def _launch_over_quota(world: World, p: dict[str, int]) -> str:
    from instances.models import GpuQuota
    from instances.services import LaunchError, LaunchSpec, instance_launch

    quota = _pick(list(GpuQuota.objects.select_related("organization").order_by("organization_id")), p["a"])
    if quota is None:
        return "no quota to exceed"
    owner = next(u for u, i, _r in world.users if world.orgs[i].pk == quota.organization_id)
    spec = LaunchSpec(
        name="over", kind="interactive", gpu_type="A100-80G-SXM", gpu_count=quota.gpus + 8 - quota.gpus % 8,
        command=["sleep", "infinity"],
    )  # fmt: skip
    _refused(
        lambda: instance_launch(organization=quota.organization, user=owner, spec=spec), LaunchError, "exceeds_quota"
    )
    return f"launch of {spec.gpu_count} GPUs over the quota {quota.gpus}: refused"


def _stop(world: World, p: dict[str, int]) -> str:
    from instances.services import instance_stop

    inst = _pick(world.instances, p["a"])
    if inst is None:
        return "nothing to stop"
    inst.refresh_from_db()
    owner = next(u for u, i, _r in world.users if world.orgs[i].pk == inst.organization_id)
    inst = instance_stop(instance=inst, reason="stopped by its owner", acting_user=owner)
    return f"stop {inst.name}: {inst.status}"


def _exit(world: World, p: dict[str, int]) -> str:
    """The latest attempt of an instance ends on the backend: finished, crashed, node lost, or preempted."""
    from instances.backends.base import JobStatus

    inst = _pick(world.instances, p["a"])
    attempt = inst.attempts.exclude(handle="").order_by("-number").first() if inst is not None else None
    if attempt is None:
        return "no attempt to end"
    status = (
        JobStatus("succeeded", 0, "finished"),
        JobStatus("failed", 1, "Traceback: boom"),
        JobStatus("failed", None, "node lost"),
        JobStatus("failed", 88, "rank lost"),
        JobStatus("preempted", None, "node reclaimed"),
    )[p["b"] % 5]
    world.backend.states[attempt.handle] = status
    return f"{inst.name} attempt {attempt.number} ends on the backend: {status.state} {status.exit_code}"


def _preempt(world: World, p: dict[str, int]) -> str:
    from instances.services import instance_preempt_backend

    inst = _pick([i for i in world.instances if i.tier == "interruptible"], p["a"])
    if inst is None:
        return "no interruptible instance"
    return f"preemption task for {inst.name}: {instance_preempt_backend(instance_id=inst.pk).status}"


def _price_change(world: World, p: dict[str, int]) -> str:
    from billing.pricing import gpu_price_set

    gpu_type = ("cpu-local", "A100-80G-SXM")[p["a"] % 2]
    at = world.now + timedelta(minutes=1 + p["b"] % 30)
    price = f"{1 + p['c'] % 12}.{p['b'] % 100:02d}"
    gpu_price_set(gpu_type=gpu_type, mode="container", price=price, effective_from=at)
    return f"price of {gpu_type} {price} from {at:%H:%M}"


def _price_backdated(world: World, p: dict[str, int]) -> str:
    from billing.pricing import BackdatedPrice, gpu_price_set

    at = world.now - timedelta(minutes=1 + p["a"] % 60)
    _refused(lambda: gpu_price_set(gpu_type="A100-80G-SXM", mode="container", price="1.00", effective_from=at),
             BackdatedPrice)  # fmt: skip
    return "backdated price refused"


def _topup(world: World, p: dict[str, int]) -> str:
    """A top-up through Checkout; Stripe will send ``checkout.session.completed`` (delivered later)."""
    from billing.payments import topup_create
    from portal.choices import Role

    i = p["a"] % len(world.orgs)
    user = next(u for u, j, role in world.users if j == i and role == Role.OWNER)
    topup = topup_create(
        organization=world.orgs[i],
        user=user,
        amount=f"{10 + p['b'] % 200}.00",
        success_url="https://portal.invalid/ok",
        cancel_url="https://portal.invalid/no",
    )
    world.topups.append(topup)
    intent = world.next_id("pi")
    world.paid_sessions[topup.pk] = intent
    session = {
        "id": topup.stripe_session_id,
        "object": "checkout.session",
        "client_reference_id": str(topup.pk),
        "metadata": {"topup_id": str(topup.pk), "organization_id": str(topup.organization_id)},
        "amount_total": topup.amount_micros // 10_000,
        "currency": "cny",
        "payment_status": "paid",
        "payment_intent": intent,
    }
    world.deliveries.append(Delivery(world.next_id("evt"), "checkout.session.completed", session))
    return f"top-up {topup.amount_micros / 1e6:.2f} for o{i} ({topup.stripe_session_id})"


def _stripe_deliver(world: World, p: dict[str, int]) -> str:
    """Stripe delivers one pending event (any of them: out of order); a fifth of the time it will deliver it
    again later (a retry after a lost answer)."""
    if not world.deliveries:
        return "no Stripe event pending"
    delivery = world.deliveries[p["a"] % len(world.deliveries)]
    if p["b"] % 5:
        world.deliveries.remove(delivery)
    status = webhook_deliver(delivery, int(world.now.timestamp()))
    if status != 200:
        raise Refusal("stripe_webhook_accepts_signed_events", f"{delivery.type} answered {status}")
    return f"delivered {delivery.type} {delivery.event_id}"


def _reversal(world: World, p: dict[str, int], kind: str) -> str:
    topup = _pick(world.topups, p["a"])
    if topup is None:
        return "no top-up to reverse"
    intent = world.paid_sessions[topup.pk]
    if kind == "refund":
        amount = topup.amount_micros // 10_000 * (1 + p["b"] % 4) // 4  # cumulative, in fen
        obj = {"id": f"ch_{topup.pk}", "object": "charge", "payment_intent": intent, "amount_refunded": amount}
        world.deliveries.append(Delivery(world.next_id("evt"), "charge.refunded", obj))
    else:
        amount = topup.amount_micros // 10_000
        obj = {"id": f"dp_{topup.pk}", "object": "dispute", "payment_intent": intent, "amount": amount,
               "status": "needs_response"}  # fmt: skip
        world.deliveries.append(Delivery(world.next_id("evt"), "charge.dispute.created", obj))
        if p["b"] % 2:
            closed = {**obj, "status": ("won", "lost")[p["c"] % 2]}
            world.deliveries.append(Delivery(world.next_id("evt"), "charge.dispute.closed", closed))
    return f"{kind} of {amount} fen on {topup.stripe_session_id} queued"


def _app_call(world: World, p: dict[str, int]) -> str:
    from portal.marketplace import calls
    from portal.marketplace.services import CallFailed, MarketplaceError
    from portal.permissions import PermissionRefused

    i = p["a"] % len(world.orgs)
    user = _pick(_members(world, i), p["b"])
    fail = CallFailed("the backend timed out") if p["c"] % 4 == 0 else None
    try:
        result = calls.app_invoke(
            app=world.apps[0], caller=world.orgs[i], user=user, payload={"text": "hi"},
            idempotency_key=f"k{p['b'] % 50}", fail_after_reserve=fail,
        )  # fmt: skip
    except (MarketplaceError, PermissionRefused) as exc:
        return f"app call refused: {type(exc).__name__} {exc}"
    return f"app call by o{i}: {result.call.status}{' (replayed)' if result.replayed else ''}"


def _member_remove(world: World, p: dict[str, int]) -> str:
    from portal.choices import Role
    from portal.models import Membership
    from portal.services import membership_remove

    candidates = [(u, i) for u, i, role in world.users if role != Role.OWNER]
    picked = _pick(candidates, p["a"])
    if picked is None:
        return "no member to remove"
    user, i = picked
    membership = Membership.objects.filter(organization=world.orgs[i], user=user).first()
    if membership is None:
        return f"{user.email} already removed"
    owner = next(u for u, j, role in world.users if j == i and role == Role.OWNER)
    membership_remove(membership=membership, acting_user=owner)
    return f"{user.email} removed from o{i}"


def _token_revoke(world: World, p: dict[str, int]) -> str:
    from portal.services import api_token_revoke

    picked = _pick(world.tokens, p["a"])
    if picked is None:
        return "no token"
    token = api_token_revoke(token=picked[1], acting_user=picked[1].user)
    return f"token {token.prefix} revoked"


def _signup_event(world: World, p: dict[str, int]) -> str:
    user, org = _signup(world, f"late{len(world.orgs)}")
    return f"signup {user.email}: trial credit for {org.slug}"


_HANDLERS: dict[str, Callable[[World, dict[str, int]], str]] = {
    "advance": _advance,
    "tick": _tick,
    "tick_duplicate": _tick_duplicate,
    "tick_stale": _tick_stale,
    "reconcile": _reconcile,
    "schedule": _schedule,
    "worker": _worker,
    "worker_restart": _worker_restart,
    "launch": _launch,
    "launch_over_quota": _launch_over_quota,
    "stop": _stop,
    "exit": _exit,
    "preempt": _preempt,
    "price_change": _price_change,
    "price_backdated": _price_backdated,
    "topup": _topup,
    "stripe_deliver": _stripe_deliver,
    "refund": lambda w, p: _reversal(w, p, "refund"),
    "dispute": lambda w, p: _reversal(w, p, "dispute"),
    "app_call": _app_call,
    "member_remove": _member_remove,
    "token_revoke": _token_revoke,
    "signup": _signup_event,
}
assert set(_HANDLERS) == set(WEIGHTS)
