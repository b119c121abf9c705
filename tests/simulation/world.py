"""The simulated world of one seed: what a seed creates before its events, and the stand-ins for the outside
boundaries (the compute backend, Stripe's servers, the Celery broker) that the real services talk to.

Only boundaries are replaced: the compute backend (``instances.services.backend.compute_backend``, the one
boundary the instance tests replace too), Stripe's Checkout API (``billing.stripe_gateway.checkout_session_create``;
webhooks are signed the documented way and verified by the real ``stripe`` library in the real webhook view) and
the broker (``celery.app.task.Task.apply_async``: a task is queued to the simulated worker, which runs it later,
in an order the seed picks, sometimes twice — a worker restart between two steps).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

#: The virtual clock starts here plus up to an hour (the seed's choice): 2026-12-01 00:00 in Asia/Shanghai
#: (16:00 UTC, a local midnight and a new local month) falls inside every run.
EPOCH = datetime(2026, 11, 30, 15, 0, tzinfo=UTC)
WEBHOOK_SECRET = "whsec_simulation"  # a throwaway secret of the simulated Stripe endpoint


class SimBackend:
    """The compute backend's stand-in: every submitted attempt runs until an event says otherwise
    (``states``: handle → ``JobStatus``); ``stop`` ends it with exit code 85 (checkpoint saved, stopped)."""

    name = "sim"

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.states: dict[str, Any] = {}

    def submit(self, spec: Any) -> str:
        handle = f"sim:{spec.job_id}:{spec.attempt}"
        if handle not in self.submitted:
            self.submitted.append(handle)
        return handle

    def status(self, handle: str) -> Any:
        from instances.backends.base import JobStatus, UnknownHandle

        if handle not in self.submitted:
            raise UnknownHandle(handle)
        return self.states.get(handle, JobStatus("running"))

    def stop(self, handle: str, grace_s: float) -> Any:
        from instances.backends.base import JobStatus

        current = self.states.get(handle)
        if current is None or not current.terminal:
            self.states[handle] = JobStatus("stopped", 85, "stopped, checkpoint saved")
        return self.states[handle]

    def request_checkpoint(self, handle: str) -> int:
        return 0

    def inventory(self) -> list[Any]:
        return []

    def logs(self, handle: str, *, rank: int = 0, lines: int | None = 200) -> list[str] | None:
        return None


@dataclass
class Delivery:
    """A Stripe event waiting to be delivered to the webhook endpoint (Stripe retries, reorders, repeats)."""

    event_id: str
    type: str
    obj: dict[str, Any]


@dataclass
class World:
    """Everything one seed's run knows besides the database: the clock, the stand-ins' state, the queues and
    the simulator's own expectations (what it asked for, to check the product against)."""

    rng: random.Random
    now: datetime
    backend: SimBackend = field(default_factory=SimBackend)
    tasks: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    orgs: list[Any] = field(default_factory=list)
    users: list[Any] = field(default_factory=list)  # (user, org index, role)
    tokens: list[tuple[str, Any]] = field(default_factory=list)  # (plaintext, ApiToken)
    apps: list[Any] = field(default_factory=list)
    instances: list[Any] = field(default_factory=list)  # launched instances, in launch order
    topups: list[Any] = field(default_factory=list)
    paid_sessions: dict[int, str] = field(default_factory=dict)  # topup pk -> payment intent once paid
    last_tick: datetime | None = None
    counter: int = 0
    seen: dict[str, Any] = field(default_factory=dict)  # the invariants' incremental state (rows already checked)
    clock: Any = None  # time_machine's traveller: the virtual clock every service reads

    def set_now(self, when: datetime) -> None:
        """Move the virtual clock to ``when`` (never backwards: the runner only adds time)."""
        self.now = when
        if self.clock is not None:
            self.clock.move_to(when, tick=False)

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}_{self.counter:06d}"


def stripe_signature(payload: bytes, timestamp: int) -> str:
    """The ``Stripe-Signature`` header Stripe sends: ``t=<ts>,v1=HMAC-SHA256(secret, "<ts>.<payload>")``
    (https://docs.stripe.com/webhooks#verify-manually)."""
    signed = hmac.new(WEBHOOK_SECRET.encode(), f"{timestamp}.".encode() + payload, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={signed}"


@contextlib.contextmanager
def boundaries(world: World) -> Iterator[None]:
    """Replace the outside boundaries for the run of ``world`` (see the module docstring) and the settings a
    simulation needs (Stripe keys of the stand-in, SSH off: no host keys on a stand-in backend)."""
    from celery.app.task import Task
    from django.test.utils import override_settings

    from billing import stripe_gateway
    from instances.services import backend as boundary

    def checkout(**kwargs: Any) -> Any:
        return stripe_gateway.CheckoutSession(id=world.next_id("cs"), url="https://checkout.invalid/pay")

    def enqueue(task: Any, args: Any = None, kwargs: Any = None, **_options: Any) -> None:
        world.tasks.append((task, tuple(args or ()), dict(kwargs or {})))

    with (
        override_settings(
            STRIPE_SECRET_KEY="sk_test_simulation",
            STRIPE_WEBHOOK_SECRET=WEBHOOK_SECRET,
            STRIPE_WEBHOOK_TOLERANCE_S=300,
            INSTANCES_SSH_ENABLED=False,
            INSTANCES_BACKEND="sim",
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
            EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
            INSTANCES_DEFAULT_GPU_QUOTA=None,
        ),
        mock.patch.object(boundary, "compute_backend", return_value=world.backend),
        mock.patch.object(stripe_gateway, "checkout_session_create", checkout),
        mock.patch.object(Task, "apply_async", enqueue),
    ):
        yield


def run_on_commit_now(fn: Callable[[], None]) -> None:
    """Run the callbacks the block registers with ``transaction.on_commit`` once it ends, as a commit would
    (the simulation's seed runs inside one transaction that is rolled back, so Django never would)."""
    from django.db import connection

    start = len(connection.run_on_commit)
    try:
        fn()
    finally:
        while len(connection.run_on_commit) > start:
            entry: Any = connection.run_on_commit.pop(start)  # (savepoint ids, callback, robust)
            callback = entry[1]
            callback()


def webhook_deliver(delivery: Delivery, created: int) -> int:
    """Deliver one Stripe event to the real webhook view, signed now; returns the HTTP status."""
    from django.test import RequestFactory

    from billing.views import stripe_webhook

    event = {
        "id": delivery.event_id,
        "object": "event",
        "type": delivery.type,
        "created": created,
        "livemode": False,
        "data": {"object": delivery.obj},
    }
    payload = json.dumps(event, sort_keys=True).encode()
    request = RequestFactory().post(
        "/billing/stripe/webhook",
        data=payload,
        content_type="application/json",
        headers={"Stripe-Signature": stripe_signature(payload, created)},
    )
    return int(stripe_webhook(request).status_code)


def world_start(seed: int) -> World:
    """A fresh world for ``seed``: the clock at ``EPOCH`` plus up to an hour."""
    rng = random.Random(seed)
    return World(rng=rng, now=EPOCH + timedelta(seconds=rng.randrange(3600)))


__all__ = ["EPOCH", "Delivery", "SimBackend", "World", "boundaries", "run_on_commit_now", "webhook_deliver"]
