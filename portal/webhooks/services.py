"""Operations of outgoing webhooks: register, delete and rotate endpoints; emit events; send, retry and
redeliver deliveries. The scheme (payloads, signature, retries) is documented in ``portal.webhooks``.

``webhook_emit`` is the one entry point the rest of the portal calls; it never raises into its caller.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import URLValidator
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from portal.audit import audit_log
from portal.lib import egress
from portal.models import Organization, User
from portal.permissions import Action, PermissionRefused, authorize
from portal.webhooks import sender
from portal.webhooks.choices import DeliveryStatus, EventType
from portal.webhooks.models import WebhookAttempt, WebhookDelivery, WebhookEndpoint, WebhookEvent

log = logging.getLogger(__name__)

MAX_URL_LENGTH = 500
MAX_DESCRIPTION_LENGTH = 200


class WebhookError(Exception):
    """A refused webhook operation; nothing was written. ``code`` and ``status`` map to the API's envelope."""

    code = "invalid"
    status = 400


class WebhookForbidden(WebhookError):
    code = "permission_denied"
    status = 403


def _require_manager(organization: Organization, user: User | None) -> None:
    """Only roles with ``webhooks.manage`` (``portal.permissions``) manage the organization's webhooks
    (raises ``WebhookForbidden``)."""
    if user is None:
        raise WebhookForbidden(_("Only owners and admins of the organization manage its webhooks."))
    try:
        authorize(user=user, organization=organization, action=Action.WEBHOOKS_MANAGE)
    except PermissionRefused as exc:
        raise WebhookForbidden(str(exc)) from None


def _new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def endpoint_url_validate(url: str) -> str:
    """The stripped ``url`` if it may receive webhooks, else ``WebhookError`` naming the rule: at most 500
    characters, a well-formed ``https://`` URL (``http://`` only with ``APP_ALLOW_HTTP_ENDPOINTS``, development
    and tests) whose host is, and resolves only to, addresses the portal may call — the guard of every outgoing
    call (``portal.lib.egress.url_check``; its messages), checked again at each delivery."""
    url = (url or "").strip()
    if not url:
        raise WebhookError(_("Enter the endpoint's URL."))
    if len(url) > MAX_URL_LENGTH:
        raise WebhookError(_("The URL is longer than %(n)d characters.") % {"n": MAX_URL_LENGTH})
    try:
        egress.url_parse(url)  # scheme and host form first: their messages say more than the validator's
        schemes = ["https", "http"] if settings.APP_ALLOW_HTTP_ENDPOINTS else ["https"]
        try:
            URLValidator(schemes=schemes)(url)
        except ValidationError as exc:
            raise WebhookError(_("%(u)s is not a valid https:// URL.") % {"u": url[:100]}) from exc
        egress.url_check(url)
    except egress.EgressError as exc:
        raise WebhookError(str(exc)) from exc
    return url


def event_types_validate(event_types: Any) -> list[str]:
    """The subscribed types in ``EventType`` order, duplicates dropped; ``WebhookError`` for an empty list or an
    unknown type."""
    if not isinstance(event_types, (list, tuple, set, frozenset)) or not event_types:
        raise WebhookError(_("Pick at least one event type."))
    unknown = sorted({str(t) for t in event_types} - set(EventType.values))
    if unknown:
        raise WebhookError(_("Unknown event type %(t)s.") % {"t": unknown[0][:60]})
    return [t for t in EventType.values if t in set(event_types)]


def webhook_endpoint_create(
    *, organization: Organization, user: User | None, url: str, event_types: list[str], description: str = ""
) -> tuple[WebhookEndpoint, str]:
    """Register an endpoint of ``organization`` (owners and admins only). Returns ``(endpoint, secret)``; the
    secret (``whsec_…``) is not shown again. Raises ``WebhookForbidden`` or ``WebhookError`` (bad or private URL,
    bad event types, description over 200 characters, more than ``WEBHOOK_MAX_ENDPOINTS``); nothing written."""
    _require_manager(organization, user)
    url = endpoint_url_validate(url)
    types = event_types_validate(event_types)
    description = (description or "").strip()
    if len(description) > MAX_DESCRIPTION_LENGTH or "\x00" in description:
        raise WebhookError(_("The description has at most %(n)d characters.") % {"n": MAX_DESCRIPTION_LENGTH})
    secret = _new_secret()
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=organization.pk).first()  # serializes the count
        if WebhookEndpoint.objects.filter(organization=organization).count() >= settings.WEBHOOK_MAX_ENDPOINTS:
            raise WebhookError(
                _("An organization has at most %(n)d webhook endpoints.") % {"n": settings.WEBHOOK_MAX_ENDPOINTS}
            )
        endpoint = WebhookEndpoint.objects.create(
            organization=organization,
            url=url,
            description=description,
            event_types=types,
            secret=secret,
            created_by=user,
        )
        audit_log(
            action="webhooks.endpoint_create",
            actor=user,
            organization=organization,
            obj=endpoint,
            extra={"url": url, "event_types": types},
        )
    return endpoint, secret


def webhook_endpoint_delete(*, endpoint: WebhookEndpoint, user: User | None) -> None:
    """Delete an endpoint (owners and admins only) with its deliveries: nothing more is sent to it."""
    _require_manager(endpoint.organization, user)
    with transaction.atomic():
        audit_log(
            action="webhooks.endpoint_delete",
            actor=user,
            organization=endpoint.organization,
            obj=endpoint,
            extra={"url": endpoint.url},
        )
        endpoint.delete()


def webhook_endpoint_rotate(
    *, endpoint: WebhookEndpoint, user: User | None, now: datetime | None = None
) -> tuple[WebhookEndpoint, str]:
    """Give the endpoint a new secret (owners and admins only); returns ``(endpoint, new secret)``, shown once.
    The secret it replaces keeps signing too (a second ``v1=``) for ``WEBHOOK_SECRET_OVERLAP_S`` (24 h); a
    secret replaced earlier stops at once."""
    _require_manager(endpoint.organization, user)
    now = now or timezone.now()
    secret = _new_secret()
    with transaction.atomic():
        current = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        WebhookEndpoint.objects.filter(pk=endpoint.pk).update(
            secret=secret,
            previous_secret=current.secret,
            rotated_at=now,
            previous_secret_expires_at=now + timedelta(seconds=settings.WEBHOOK_SECRET_OVERLAP_S),
        )
        audit_log(action="webhooks.endpoint_rotate", actor=user, organization=endpoint.organization, obj=endpoint)
    endpoint.refresh_from_db()
    return endpoint, secret


def endpoint_signing_secrets(endpoint: WebhookEndpoint, now: datetime) -> list[str]:
    """The secrets that sign a delivery at ``now``: the current one, and the previous one during the overlap."""
    keep_previous = (
        endpoint.previous_secret
        and endpoint.previous_secret_expires_at is not None
        and endpoint.previous_secret_expires_at > now
    )
    return [endpoint.secret, endpoint.previous_secret] if keep_previous else [endpoint.secret]


# --- emitting ---------------------------------------------------------------------------------------------------
def webhook_emit(*, organization: Organization | None, event_type: str, data: dict[str, Any]) -> None:
    """Record an event of ``organization`` and one delivery per endpoint subscribed to ``event_type``, in the
    caller's transaction (a rolled-back change sends nothing); the sending is enqueued after commit.

    Costs one query when no endpoint of the organization subscribes. Never raises: an unknown type or a
    failure is logged and the caller goes on (the event is then not sent). ``data`` must be JSON-serializable
    (``DjangoJSONEncoder``: decimals and times are written as strings)."""
    try:
        if organization is None or event_type not in EventType.values:
            log.error("webhook_emit: unknown event type %r or no organization", event_type)
            return
        endpoint_ids = [
            pk
            for pk, types in WebhookEndpoint.objects.filter(organization=organization).values_list("pk", "event_types")
            if event_type in types
        ]
        if not endpoint_ids:
            return
        now = timezone.now()
        window = timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S)
        with transaction.atomic():  # a savepoint when the caller has a transaction: a failure here stays here
            event = WebhookEvent.objects.create(
                organization=organization,
                public_id=f"evt_{secrets.token_hex(12)}",
                type=event_type,
                data=data,
                created_at=now,
            )
            ids = [
                WebhookDelivery.objects.create(
                    event=event, endpoint_id=pk, next_attempt_at=now, retry_until=now + window, created_at=now
                ).pk
                for pk in endpoint_ids
            ]
            transaction.on_commit(functools.partial(_enqueue, ids))
    except Exception:
        log.exception(
            "webhook_emit: %s for organization %s not recorded", event_type, getattr(organization, "pk", None)
        )


def _enqueue(delivery_ids: list[int]) -> None:
    """Send each delivery from a worker; a broker that is down only delays them (the sweep sends due ones)."""
    from portal.webhooks import tasks

    for pk in delivery_ids:
        try:
            tasks.webhook_deliver.delay(pk)
        except Exception:
            log.warning("webhooks: could not enqueue delivery %s; the sweep will send it", pk, exc_info=True)


# --- sending ------------------------------------------------------------------------------------------------------
def event_body(event: WebhookEvent) -> bytes:
    """The JSON body of every delivery of ``event`` (compact, keys sorted, UTF-8)."""
    envelope = {
        "id": event.public_id,
        "type": event.type,
        "created": int(event.created_at.timestamp()),
        "organization": event.organization.slug,
        "data": event.data,
    }
    return json.dumps(
        envelope, separators=(",", ":"), sort_keys=True, ensure_ascii=False, cls=DjangoJSONEncoder
    ).encode()


def retry_delay(round_attempts: int) -> timedelta:
    """Wait after the ``round_attempts``-th failed attempt: ``WEBHOOK_RETRY_BASE_S`` × 2^(n-1), at most
    ``WEBHOOK_RETRY_MAX_DELAY_S`` (defaults: 1 min, 2 min, 4 min … 6 h)."""
    base = int(settings.WEBHOOK_RETRY_BASE_S)
    seconds = min(base * 2 ** min(max(round_attempts - 1, 0), 30), int(settings.WEBHOOK_RETRY_MAX_DELAY_S))
    return timedelta(seconds=seconds)


def webhook_claim_lease() -> timedelta:
    """How long a claim keeps a delivery from other workers: the attempt's whole deadline
    (``WEBHOOK_TIMEOUT_S``, from the claim to the end of the answer, enforced by ``sender.post``) plus a margin
    as long again and at least 30 s (recording the attempt, clocks of workers that disagree). A claim can
    therefore only be taken over once the attempt that made it can no longer be sending."""
    deadline_s = float(settings.WEBHOOK_TIMEOUT_S)
    return timedelta(seconds=deadline_s + max(deadline_s, 30.0))


def webhook_delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> WebhookDelivery | None:
    """Make the next attempt of a due delivery: claim it (compare-and-set on ``next_attempt_at``, moved
    ``webhook_claim_lease`` ahead, so two workers never send it at once), POST the signed body within
    ``WEBHOOK_TIMEOUT_S`` counted from the claim, record the attempt and set what follows — ``succeeded`` on a
    2xx, else the next attempt after ``retry_delay``, or ``failed`` when that would fall after ``retry_until``.
    Returns the delivery, or None when it was not due (already sent, claimed by another worker, deleted).
    A worker that dies mid-attempt leaves the claim to expire, then the delivery is due again. The attempt is
    always recorded; the delivery's state is set only while the claim is still this attempt's (a worker that
    stalled past its lease does not overwrite the claim of the one that took over)."""
    now = now or timezone.now()
    started = time.perf_counter()
    claimed_until = now + webhook_claim_lease()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(next_attempt_at=claimed_until)
    if not claimed:
        return None
    delivery = WebhookDelivery.objects.select_related("event__organization", "endpoint").filter(pk=delivery_id).first()
    if delivery is None:
        return None
    endpoint, event = delivery.endpoint, delivery.event
    body = event_body(event)
    headers = {
        "Content-Type": "application/json",
        "Webhook-Id": event.public_id,
        "Webhook-Event": event.type,
        "Webhook-Signature": sender.signature_header(
            endpoint_signing_secrets(endpoint, now), body, int(now.timestamp())
        ),
    }
    result = sender.post(
        url=endpoint.url, body=body, headers=headers, timeout_s=float(settings.WEBHOOK_TIMEOUT_S), started=started
    )
    with transaction.atomic():
        current = WebhookDelivery.objects.select_for_update().filter(pk=delivery.pk).first()
        if current is None:  # deleted with its endpoint meanwhile
            return None
        number = current.attempt_count + 1
        WebhookAttempt.objects.create(
            delivery=current,
            number=number,
            started_at=now,
            status_code=result.status_code,
            response_ms=result.response_ms,
            error=result.error[:300],
            response_excerpt=result.excerpt,
        )
        fields: dict[str, Any] = {
            "attempt_count": number,
            "last_status_code": result.status_code,
            "last_error": result.error[:300],
        }
        if current.status == DeliveryStatus.PENDING and current.next_attempt_at == claimed_until:
            in_round = current.round_attempts + 1
            fields["round_attempts"] = in_round
            if result.ok:
                fields.update(status=DeliveryStatus.SUCCEEDED, next_attempt_at=None, delivered_at=now)
            elif now + retry_delay(in_round) > current.retry_until:
                fields.update(status=DeliveryStatus.FAILED, next_attempt_at=None)
            else:
                fields["next_attempt_at"] = now + retry_delay(in_round)
        WebhookDelivery.objects.filter(pk=current.pk).update(**fields)
    delivery.refresh_from_db()
    return delivery


def webhook_deliveries_due(*, now: datetime | None = None, limit: int = 500) -> list[int]:
    """Ids of pending deliveries whose next attempt is due, oldest due first (at most ``limit``)."""
    now = now or timezone.now()
    return list(
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "id")
        .values_list("pk", flat=True)[:limit]
    )


def webhook_delivery_redeliver(
    *, delivery: WebhookDelivery, user: User | None, now: datetime | None = None
) -> WebhookDelivery:
    """Send a delivery again now, whatever its status (owners and admins only): it becomes ``pending`` with a
    fresh 3-day retry window; the event keeps its id (receivers that have it dedupe). Its earlier attempts stay
    recorded. Raises ``WebhookForbidden``."""
    _require_manager(delivery.endpoint.organization, user)
    now = now or timezone.now()
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=delivery.pk).update(
            status=DeliveryStatus.PENDING,
            next_attempt_at=now,
            round_attempts=0,
            retry_until=now + timedelta(seconds=settings.WEBHOOK_RETRY_WINDOW_S),
        )
        audit_log(
            action="webhooks.delivery_redeliver",
            actor=user,
            organization=delivery.endpoint.organization,
            obj=delivery,
            extra={"event": delivery.event.public_id},
        )
        transaction.on_commit(functools.partial(_enqueue, [delivery.pk]))
    delivery.refresh_from_db()
    return delivery
