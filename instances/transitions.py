"""The one writer of ``Instance.status``: :func:`instances_transition` moves one or many instances.

``instances.services.instance_transition`` (one instance, raises on a refused move) and the scheduling pass
(hundreds of instances at once, ``instances.scheduling_pass``) both go through :func:`instances_transition`,
so the rule is written once: the move must be in ``INSTANCE_TRANSITIONS``; it is a compare-and-set on the
current status (two workers never both apply a change); each move writes an ``InstanceTransition`` row, an
audit row and an ``instance.state_changed`` webhook event; entering ``running`` opens a run segment and
leaving it closes the open one (metering reads them).

Cost: a constant number of statements however many instances move (one UPDATE, or a row lock plus one
set-based UPDATE per set of fields written (``instances.bulk.rows_update``), one INSERT per kind of row,
one query for webhook subscribers), so a pass that places 2,000 instances does not issue 10,000 statements.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from instances.bulk import rows_insert, rows_update
from instances.choices import INSTANCE_TRANSITIONS, IllegalTransition, InstanceStatus
from instances.models import Instance, InstanceRunSegment, InstanceTransition
from instances.reasons import reason_fields
from portal.models import AuditEvent, User
from portal.webhooks.choices import EventType
from portal.webhooks.models import WebhookEndpoint
from portal.webhooks.services import webhook_emit

S = InstanceStatus


@dataclass
class Move:
    """One requested move: ``instance`` (its ``status`` is the expected current status) to ``to`` with a
    ``reason`` (cut to 300 characters; an ``instances.reasons.Reason`` also stores its code and parameters)
    and other ``fields`` of Instance to set in the same update."""

    instance: Instance
    to: str
    reason: str = ""
    fields: dict[str, Any] = field(default_factory=dict)


def instances_transition(
    *, moves: Sequence[Move], acting_user: User | None = None, now: datetime | None = None
) -> list[Move]:
    """Apply ``moves`` in the caller's transaction (or a new one) and return those applied, in order.

    Raises :class:`IllegalTransition` (nothing written) if any move is not in ``INSTANCE_TRANSITIONS``. A
    move whose instance no longer has the expected status (changed by another worker) is skipped, not
    applied, and left out of the result. The moved ``Instance`` objects get the new status and fields in
    memory (``updated_at`` included); they are not reloaded. At most one move per instance.
    """
    now = now or timezone.now()
    for m in moves:
        if m.to not in INSTANCE_TRANSITIONS.get(m.instance.status, frozenset()):
            raise IllegalTransition(m.instance.status, m.to)
    if len({m.instance.pk for m in moves}) != len(moves):
        raise ValueError("instances_transition: at most one move per instance")
    if not moves:
        return []
    with transaction.atomic():
        applied = _compare_and_set(moves, now)
        if not applied:
            return []
        actor = acting_user if acting_user is not None and acting_user.pk else None
        n = len(applied)
        rows_insert(
            InstanceTransition,
            n,
            {
                "instance_id": [m.instance.pk for m in applied],
                "from_status": [m.instance.status for m in applied],
                "to_status": [m.to for m in applied],
                "reason": [m.reason[:300] for m in applied],
                "reason_code": [reason_fields(m.reason)[0] for m in applied],
                "reason_params": [reason_fields(m.reason)[1] for m in applied],
                "actor_id": [acting_user.pk if acting_user is not None else None] * n,
                "created_at": [now] * n,
            },
        )
        leaving = [m.instance.pk for m in applied if m.instance.status == S.RUNNING]
        if leaving:
            InstanceRunSegment.objects.filter(instance_id__in=leaving, ended_at__isnull=True).update(ended_at=now)
        entering = [m.instance.pk for m in applied if m.to == S.RUNNING]
        if entering:
            InstanceRunSegment.objects.bulk_create(
                [InstanceRunSegment(instance_id=pk, started_at=now) for pk in entering]
            )
        rows_insert(
            AuditEvent,
            n,
            {  # what portal.audit.audit_log writes, one row per move
                "action": [f"instances.instance.{m.to}" for m in applied],
                "actor_id": [actor.pk if actor else None] * n,
                "organization_id": [m.instance.organization_id for m in applied],
                "object_type": [Instance._meta.label_lower] * n,
                "object_id": [str(m.instance.pk) for m in applied],
                "extra": [{"from": m.instance.status, "to": m.to, "reason": str(m.reason)} for m in applied],
                "staff": [False] * n,
                "created_at": [now] * n,
            },
        )
        _emit_webhooks(applied)
    for m in applied:
        m.instance.status, m.instance.status_reason, m.instance.updated_at = m.to, m.reason[:300], now
        m.instance.status_reason_code, m.instance.status_reason_params = reason_fields(m.reason)
        for name, value in m.fields.items():
            setattr(m.instance, name, value)
    return applied


def _code(m: Move) -> str:
    return reason_fields(m.reason)[0]


def _compare_and_set(moves: Sequence[Move], now: datetime) -> list[Move]:
    if len(moves) == 1:  # the common case: one UPDATE … WHERE status = current
        m = moves[0]
        updated = Instance.objects.filter(pk=m.instance.pk, status=m.instance.status).update(
            status=m.to,
            status_reason=m.reason[:300],
            status_reason_code=_code(m),
            status_reason_params=reason_fields(m.reason)[1],
            updated_at=now,
            **m.fields,
        )
        return [m] if updated == 1 else []
    candidates = moves
    if connection.vendor != "postgresql":
        # Lock the rows still in their expected status (one statement), then update those.
        expected = {m.instance.pk: m.instance.status for m in moves}
        still = {
            pk
            for pk, status in Instance.objects.select_for_update()
            .filter(pk__in=list(expected))
            .values_list("pk", "status")
            if status == expected[pk]
        }
        candidates = [m for m in moves if m.instance.pk in still]
    groups: dict[tuple[str, tuple[str, ...]], list[Move]] = {}
    for m in candidates:  # one UPDATE per current status and set of fields (a pass has two: placed, failed)
        groups.setdefault((m.instance.status, tuple(sorted(m.fields))), []).append(m)
    done: set[int] = set()
    for (current, extra), group in groups.items():
        columns: dict[str, list[Any]] = {
            "status": [m.to for m in group],
            "status_reason": [m.reason[:300] for m in group],
            "status_reason_code": [_code(m) for m in group],
            "status_reason_params": [reason_fields(m.reason)[1] for m in group],
            "updated_at": [now] * len(group),
        }
        for name in extra:
            columns[name] = [m.fields[name] for m in group]
        pks = [m.instance.pk for m in group]
        # On PostgreSQL the UPDATE itself is the compare-and-set (WHERE status = current RETURNING id).
        moved_ids = rows_update(Instance, pks, columns, where={"status": current})
        done.update(pks if moved_ids is None else moved_ids)
    return [m for m in candidates if m.instance.pk in done]


def _emit_webhooks(applied: Sequence[Move]) -> None:
    """One query for the organizations that subscribe to state changes; events only for theirs."""
    org_ids = {m.instance.organization_id for m in applied}
    subscribed = {
        org
        for org, types in WebhookEndpoint.objects.filter(organization_id__in=org_ids).values_list(
            "organization_id", "event_types"
        )
        if EventType.INSTANCE_STATE_CHANGED in types
    }
    for m in applied:
        if m.instance.organization_id in subscribed:
            webhook_emit(
                organization=m.instance.organization,
                event_type="instance.state_changed",
                data={
                    "instance_id": m.instance.pk,
                    "name": m.instance.name,
                    "from": m.instance.status,
                    "to": m.to,
                    "reason": m.reason[:300],
                },
            )
