"""The one writer of ``Instance.status``: :func:`instances_transition` moves one or many instances.

``instances.services.instance_transition`` (one instance, raises on a refused move) and the scheduling pass
(hundreds of instances at once, ``instances.scheduling_pass``) both go through :func:`instances_transition`,
so the rule is written once: the move must be in ``INSTANCE_TRANSITIONS``; it is a compare-and-set on the
current status (two workers never both apply a change); each move writes an ``InstanceTransition`` row, an
audit row and an ``instance.state_changed`` webhook event; entering ``running`` opens a run segment and
leaving it closes the open one (metering reads them).

Cost: a constant number of statements however many instances move, so a pass that places 2,000 instances
does not issue 10,000 statements. On PostgreSQL many moves are one statement (:func:`_moves_apply_pg`): the
compare-and-set UPDATE of every moved row and the INSERTs of their transition and audit rows, chained by
data-modifying CTEs over one JSON document, plus one query for webhook subscribers. Elsewhere: a row lock
plus one UPDATE per set of fields written (``instances.bulk.rows_update``) and one INSERT per kind of row.
Callers that move many instances need not load model objects: a :class:`InstanceRow` carries the columns a
move reads and writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.db import connection, models, transaction
from django.utils import timezone

from instances.bulk import insert_select, json_document, rows_insert, rows_update
from instances.choices import INSTANCE_TRANSITIONS, IllegalTransition, InstanceStatus
from instances.models import Instance, InstanceRunSegment, InstanceTransition, placement_gpus
from instances.reasons import reason_fields
from portal.db import set_based_paths
from portal.models import AuditEvent, Organization, User
from portal.webhooks.choices import EventType
from portal.webhooks.models import WebhookEndpoint
from portal.webhooks.services import webhook_emit

S = InstanceStatus


class InstanceRow:
    """What a move reads of an instance (``pk``, expected ``status``, ``organization_id``, ``name``), for
    callers that move many instances without building model objects. Like an ``Instance``, it gets the new
    status, reason, ``updated_at`` and fields of an applied move as attributes."""

    def __init__(self, pk: int, status: str, organization_id: int, name: str) -> None:
        self.pk, self.status, self.organization_id, self.name = pk, status, organization_id, name
        self.status_reason = ""
        self.status_reason_code = ""
        self.status_reason_params: dict[str, Any] = {}
        self.updated_at: datetime | None = None


@dataclass
class Move:
    """One requested move: ``instance`` (its ``status`` is the expected current status) to ``to`` with a
    ``reason`` (cut to 300 characters; an ``instances.reasons.Reason`` also stores its code and parameters)
    and other ``fields`` of Instance to set in the same update."""

    instance: Instance | InstanceRow
    to: str
    reason: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    # PostgreSQL's one-statement path only (a :class:`MovesTail`): a JSON value the tail's statements read as
    # ``moved.x``, and what the tail's SELECT returned for this move once applied.
    payload: Any = None
    returned: tuple[Any, ...] = ()


@dataclass
class MovesTail:
    """More of the same statement after the moves, on PostgreSQL (:func:`_moves_apply_pg`).

    ``returning``: more expressions (each starting with ``, ``, over the updated row ``t`` and the move's
    record ``v``) that the ``moved`` CTE returns, with the values of their placeholders in
    ``returning_params``. ``ctes``: further data-modifying CTEs (each starting with ``, name AS (``) over
    ``moved`` (one row per applied move: ``id``, ``org``, ``name``, ``n`` the move's index, ``fr``, ``st``,
    ``place`` the instance's new ``placement``, ``x`` the move's ``payload`` as json, and those of
    ``returning``), with their placeholders' values in ``params``. ``columns``: what the final ``SELECT …
    FROM moved`` returns per applied move (into ``Move.returned``): columns of ``moved`` only, as joining a
    CTE to another is planned as a nested loop (the planner cannot size either)."""

    returning: str
    returning_params: list[Any]
    ctes: str
    params: list[Any]
    columns: list[str]


def instances_transition(
    *,
    moves: Sequence[Move],
    acting_user: User | None = None,
    now: datetime | None = None,
    tail: MovesTail | None = None,
) -> list[Move]:
    """Apply ``moves`` in the caller's transaction (or a new one) and return those applied, in order.

    Raises :class:`IllegalTransition` (nothing written) if any move is not in ``INSTANCE_TRANSITIONS``. A
    move whose instance no longer has the expected status (changed by another worker) is skipped, not
    applied, and left out of the result. The moved ``Instance`` objects get the new status and fields in
    memory (``updated_at`` included); they are not reloaded; an ``InstanceRow`` moved on PostgreSQL also
    gets its ``name``. At most one move per instance. ``tail`` (PostgreSQL only, else ``ValueError``):
    more writes in the same statement, see :class:`MovesTail`.
    """
    now = now or timezone.now()
    for m in moves:
        if m.to not in INSTANCE_TRANSITIONS.get(m.instance.status, frozenset()):
            raise IllegalTransition(m.instance.status, m.to)
    if len({m.instance.pk for m in moves}) != len(moves):
        raise ValueError("instances_transition: at most one move per instance")
    if not moves:
        return []
    if tail is not None and not set_based_paths():
        raise ValueError("instances_transition: a tail needs PostgreSQL")
    with transaction.atomic():
        if set_based_paths() and (len(moves) > 1 or tail is not None):
            applied = _moves_apply_pg(moves, now, acting_user, tail)
        else:
            applied = _compare_and_set(moves, now)
            if applied:
                _rows_write(applied, now, acting_user)
        if not applied:
            return []
        leaving = [m.instance.pk for m in applied if m.instance.status == S.RUNNING]
        if leaving:
            InstanceRunSegment.objects.filter(instance_id__in=leaving, ended_at__isnull=True).update(ended_at=now)
        entering = [m.instance.pk for m in applied if m.to == S.RUNNING]
        if entering:
            # the GPUs held are the placement's (an elastic resume may hold fewer than gpu_count): metering
            # charges the segment for those
            held = {
                pk: placement_gpus(placement) or count
                for pk, placement, count in Instance.objects.filter(pk__in=entering).values_list(
                    "pk", "placement", "gpu_count"
                )
            }
            InstanceRunSegment.objects.bulk_create(
                [InstanceRunSegment(instance_id=pk, started_at=now, gpus_held=held.get(pk)) for pk in entering]
            )
        _emit_webhooks(applied)
    for m in applied:
        m.instance.status, m.instance.status_reason, m.instance.updated_at = m.to, m.reason[:300], now
        m.instance.status_reason_code, m.instance.status_reason_params = reason_fields(m.reason)
        for name, value in m.fields.items():
            setattr(m.instance, name, value)
    return applied


def _moves_apply_pg(
    moves: Sequence[Move], now: datetime, acting_user: User | None, tail: MovesTail | None = None
) -> list[Move]:
    """The compare-and-set UPDATE of every move and the INSERTs of the transition and audit rows of those
    applied (and the ``tail``'s writes), as one PostgreSQL statement over one JSON document (one record per
    move). The other ``fields`` of a move go in columns of their own, with a flag per move that sets them
    (a column the move does not set keeps its value). Returns the moves applied, in order."""
    table = Instance._meta.db_table
    extra = sorted({name for m in moves for name in m.fields})
    fields = [cast(models.Field, Instance._meta.get_field(name)) for name in extra]
    defs = ["n integer", "k bigint", "fr varchar", "st varchar", "r varchar", "rf text", "rc varchar", "rp jsonb"]
    defs += ["x json"] if tail is not None else []
    sets = [
        '"status" = v.st',
        '"status_reason" = v.r',
        '"status_reason_code" = v.rc',
        '"status_reason_params" = v.rp',
        '"updated_at" = %s',
    ]
    for i, f in enumerate(fields):
        defs += [f"c{i} {f.db_type(connection)}", f"s{i} boolean"]
        sets.append(f'"{f.column}" = CASE WHEN v.s{i} THEN v.c{i} ELSE t."{f.column}" END')
    rows = []
    for n, m in enumerate(moves):
        code, params = reason_fields(m.reason)
        row = {
            "n": n,
            "k": m.instance.pk,
            "fr": m.instance.status,
            "st": m.to,
            "r": m.reason[:300],
            "rf": m.reason,
            "rc": code,
            "rp": params,
        }
        if tail is not None:
            row["x"] = m.payload
        for i, name in enumerate(extra):
            if name in m.fields:
                row[f"c{i}"], row[f"s{i}"] = m.fields[name], True
        rows.append(row)
    actor = acting_user.pk if acting_user is not None else None
    tr_head, tr_params = insert_select(
        InstanceTransition,
        {
            "instance_id": "id",
            "from_status": "fr",
            "to_status": "st",
            "reason": "r",
            "reason_code": "rc",
            "reason_params": "rp",
        },
        {"actor_id": actor, "created_at": now},
    )
    au_head, au_params = insert_select(
        AuditEvent,
        {  # what portal.audit.audit_log writes, one row per move
            "action": "'instances.instance.' || st",
            "organization_id": "org",
            "object_id": "id::text",
            "extra": "jsonb_build_object('from', fr, 'to', st, 'reason', rf)",
        },
        {
            "actor_id": actor if acting_user is not None and acting_user.pk else None,
            "object_type": Instance._meta.label_lower,
            "staff": False,
            "created_at": now,
        },
    )
    more = f", t.placement AS place, v.x{tail.returning}" if tail is not None else ""
    sql = (
        f'WITH moved AS (UPDATE "{table}" AS t SET {", ".join(sets)} '  # noqa: S608
        f"FROM json_to_recordset(%s::json) AS v({', '.join(defs)}) WHERE t.id = v.k AND t.status = v.fr "
        f"RETURNING t.id, t.organization_id AS org, t.name, v.n, v.fr, v.st, v.r, v.rf, v.rc, v.rp{more}), "
        f"tr AS ({tr_head} FROM moved ORDER BY n), au AS ({au_head} FROM moved ORDER BY n)"
        f"{tail.ctes if tail else ''} SELECT {', '.join(['id', 'name', *(tail.columns if tail else [])])} FROM moved"
    )
    # placeholders in text order: SET updated_at, the document, RETURNING's, each INSERT's SELECT list, the
    # tail's CTEs'
    values = [now, json_document(rows), *(tail.returning_params if tail else []), *tr_params, *au_params]
    with connection.cursor() as cur:
        cur.execute(sql, [*values, *(tail.params if tail else [])])
        done = {row[0]: row[1:] for row in cur.fetchall()}
    applied = [m for m in moves if m.instance.pk in done]
    for m in applied:
        name, *returned = done[m.instance.pk]
        if isinstance(m.instance, InstanceRow):
            m.instance.name = name
        m.returned = tuple(returned)
    return applied


def _rows_write(applied: Sequence[Move], now: datetime, acting_user: User | None) -> None:
    """The transition and audit rows of ``applied`` (one INSERT each)."""
    actor = acting_user if acting_user is not None and acting_user.pk else None
    n = len(applied)
    fields = [reason_fields(m.reason) for m in applied]
    rows_insert(
        InstanceTransition,
        n,
        {
            "instance_id": [m.instance.pk for m in applied],
            "from_status": [m.instance.status for m in applied],
            "to_status": [m.to for m in applied],
            "reason": [m.reason[:300] for m in applied],
            "reason_code": [code for code, _ in fields],
            "reason_params": [params for _, params in fields],
            "actor_id": [acting_user.pk if acting_user is not None else None] * n,
            "created_at": [now] * n,
        },
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


def _compare_and_set(moves: Sequence[Move], now: datetime) -> list[Move]:
    if len(moves) == 1:  # the common case: one UPDATE … WHERE status = current
        m = moves[0]
        code, params = reason_fields(m.reason)
        updated = Instance.objects.filter(pk=m.instance.pk, status=m.instance.status).update(
            status=m.to,
            status_reason=m.reason[:300],
            status_reason_code=code,
            status_reason_params=params,
            updated_at=now,
            **m.fields,
        )
        return [m] if updated == 1 else []
    # Not on PostgreSQL (there many moves are _moves_apply_pg): lock the rows still in their expected status
    # (one statement), then update those.
    expected = {m.instance.pk: m.instance.status for m in moves}
    still = {
        pk
        for pk, status in Instance.objects.select_for_update().filter(pk__in=list(expected)).values_list("pk", "status")
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
            "status_reason_code": [reason_fields(m.reason)[0] for m in group],
            "status_reason_params": [reason_fields(m.reason)[1] for m in group],
            "updated_at": [now] * len(group),
        }
        for name in extra:
            columns[name] = [m.fields[name] for m in group]
        pks = [m.instance.pk for m in group]
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
    rows = {m.instance.organization_id for m in applied if isinstance(m.instance, InstanceRow)} & subscribed
    orgs = Organization.objects.in_bulk(list(rows)) if rows else {}
    for m in applied:
        if m.instance.organization_id in subscribed:
            inst = m.instance
            webhook_emit(
                organization=orgs[inst.organization_id] if isinstance(inst, InstanceRow) else inst.organization,
                event_type="instance.state_changed",
                data={
                    "instance_id": m.instance.pk,
                    "name": m.instance.name,
                    "from": m.instance.status,
                    "to": m.to,
                    "reason": m.reason[:300],
                },
            )
