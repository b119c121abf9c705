"""App marketplace operations: create and publish apps, add versions, publish a training checkpoint as an app.

Calling an app and billing the call live in ``portal.marketplace.calls``; the errors of both are here.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from portal.audit import audit_log
from portal.lib import egress
from portal.lib.coded_text import CodedText, coded_fields
from portal.lib.slugs import ascii_slug
from portal.marketplace import deployments
from portal.marketplace.choices import APP_TRANSITIONS, AppState, AppVisibility, ServingKind, VersionStatus
from portal.marketplace.models import App, AppVersion
from portal.marketplace.reasons import app_reason, app_reason_display
from portal.models import Organization, User
from portal.permissions import Action, PermissionRefused, authorize


class MarketplaceError(Exception):
    """Base of marketplace refusals. ``code`` and ``status`` map to the API's error envelope."""

    code = "invalid"
    status = 400

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.details = details


class IllegalAppTransition(MarketplaceError):
    code = "illegal_transition"
    status = 409


class LicenseForbidsPublishing(MarketplaceError):
    code = "license_forbids"
    status = 409


class InputInvalid(MarketplaceError):
    code = "input_invalid"
    status = 422


class CallInProgress(MarketplaceError):
    code = "call_in_progress"
    status = 409


class IdempotencyConflict(MarketplaceError):
    code = "idempotency_key_reused"
    status = 409


class CallRefused(MarketplaceError):
    code = "insufficient_funds"
    status = 402


class MonthlyCapReached(MarketplaceError):
    code = "monthly_cap_reached"
    status = 402


class CallFailed(MarketplaceError):
    """The backend failed, timed out or answered invalid output; nothing was charged."""

    status = 502


#: Longest ``Idempotency-Key`` accepted (``AppCall`` and ``AppPublishRequest`` store at most 200 characters).
MAX_KEY_LENGTH = 200


def request_hash(payload: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of a request: a reused ``Idempotency-Key`` must carry the same one."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# Path segments that app URLs use for other pages (/apps/publish, /apps/calls, /apps/new/).
RESERVED_SLUGS = frozenset({"publish", "calls", "new"})


def _validate_schema(schema: dict[str, Any]) -> None:
    import jsonschema  # imported when used: with its format checkers it costs ~1.4 s of CPU (calls.validation_error)

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise MarketplaceError(_("Not a valid JSON Schema: %(m)s") % {"m": exc.message}) from exc


def app_create(
    *,
    publisher: Organization,
    user: User,
    name: str,
    category: str,
    description: str,
    input_schema: dict[str, Any],
    output_schema: dict[str, Any],
    price_per_call_micros: int,
    visibility: str = AppVisibility.PRIVATE,
    example_request: dict[str, Any] | None = None,
    example_response: dict[str, Any] | None = None,
    price_per_1k_tokens_micros: int = 0,
    price_per_1k_prompt_tokens_micros: int = 0,
) -> App:
    """Create a draft app. Raises ``MarketplaceError`` for an invalid schema or a negative price."""
    authorize(user=user, organization=publisher, action=Action.APPS_PUBLISH)
    _validate_schema(input_schema)
    _validate_schema(output_schema)
    if price_per_call_micros < 0 or price_per_1k_tokens_micros < 0 or price_per_1k_prompt_tokens_micros < 0:
        raise MarketplaceError(_("Prices cannot be negative."))
    base = ascii_slug(name, max_length=60, fallback="app")
    if base in RESERVED_SLUGS:
        base = f"{base}-app"
    slug, n = base, 1
    while App.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    with transaction.atomic():
        app = App.objects.create(
            publisher=publisher,
            name=name,
            slug=slug,
            category=category,
            description=description,
            input_schema=input_schema,
            output_schema=output_schema,
            price_per_call_micros=price_per_call_micros,
            price_per_1k_tokens_micros=price_per_1k_tokens_micros,
            price_per_1k_prompt_tokens_micros=price_per_1k_prompt_tokens_micros,
            visibility=visibility,
            example_request=example_request or {},
            example_response=example_response or {},
            publisher_share_bps=settings.APP_PUBLISHER_SHARE_BPS,
            created_by=user,
        )
        audit_log(action="marketplace.app_create", actor=user, organization=publisher, obj=app)
    return app


def app_version_add(
    *,
    app: App,
    user: User | None,
    kind: str,
    endpoint_url: str = "",
    checkpoint_ref: str = "",
    lineage: list[dict[str, Any]] | None = None,
    status: str = VersionStatus.READY,
) -> tuple[AppVersion, str]:
    """Add a version and make it the active one when ready. Returns (version, hmac secret or "").

    External endpoints pass the guard of every outgoing call (``portal.lib.egress.url_check``: HTTPS — HTTP too
    with ``APP_ALLOW_HTTP_ENDPOINTS``, for local development — and a host that resolves only to addresses the
    portal may call; checked again at each call), else ``MarketplaceError`` with the guard's message.
    The HMAC secret is returned once; the publisher verifies ``X-Portal-Signature`` with it.
    """
    authorize(user=user, organization=app.publisher, action=Action.APPS_PUBLISH)
    if kind == ServingKind.EXTERNAL:
        try:
            egress.url_check(endpoint_url)
        except egress.EgressError as exc:
            raise MarketplaceError(str(exc)) from exc
    secret = secrets.token_urlsafe(32) if kind == ServingKind.EXTERNAL else ""
    with transaction.atomic():
        App.objects.select_for_update().get(pk=app.pk)
        number = (app.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
        if status == VersionStatus.READY:
            app.versions.filter(active=True).update(active=False)
        version = AppVersion.objects.create(
            app=app,
            number=number,
            kind=kind,
            endpoint_url=endpoint_url,
            hmac_secret=secret,
            checkpoint_ref=checkpoint_ref,
            lineage=lineage or [],
            status=status,
            progress=100 if status == VersionStatus.READY else 0,
            active=status == VersionStatus.READY,
        )
        attributions = sorted({d["attribution"] for d in lineage or [] if d.get("attribution")})
        if attributions:
            App.objects.filter(pk=app.pk).update(attributions=attributions)
        audit_log(
            action="marketplace.version_add", actor=user, organization=app.publisher, obj=version, extra={"kind": kind}
        )
    return version, secret


def app_version_activate(*, version: AppVersion) -> AppVersion:
    """Make a ready version the one that answers calls."""
    with transaction.atomic():
        AppVersion.objects.filter(app=version.app, active=True).update(active=False)
        AppVersion.objects.filter(pk=version.pk).update(active=True, status=VersionStatus.READY, progress=100)
    version.refresh_from_db()
    return version


class NotAManager(MarketplaceError):
    """Only owners and admins of the organization may do this."""

    code = "permission_denied"
    status = 403


def app_call_cap_set(*, organization: Organization, user: User, cap_micros: int | None) -> Organization:
    """Set the organization's monthly cap on app calls (``cap_micros`` > 0), or clear it (``None``: the platform
    default applies again). Owners and admins only (``NotAManager``); a cap must be positive
    (``MarketplaceError``). A cap below this month's spend stops further calls until the month ends. Audited."""
    try:
        authorize(user=user, organization=organization, action=Action.APPS_SET_CAP)
    except PermissionRefused as exc:
        raise NotAManager(str(exc)) from None
    if cap_micros is not None and cap_micros <= 0:
        raise MarketplaceError(_("A monthly cap must be positive; leave it empty for the platform default."))
    with transaction.atomic():
        previous = Organization.objects.select_for_update().get(pk=organization.pk).app_monthly_cap_micros
        Organization.objects.filter(pk=organization.pk).update(app_monthly_cap_micros=cap_micros)
        audit_log(
            action="marketplace.call_cap_set",
            actor=user,
            organization=organization,
            obj=organization,
            extra={"from_micros": previous, "to_micros": cap_micros},
        )
    organization.app_monthly_cap_micros = cap_micros
    return organization


def license_problems(lineage: list[dict[str, Any]]) -> list[CodedText]:
    """Reasons a model trained on ``lineage`` may not be offered publicly or for money (empty if none), each
    an English text with its code (``portal.marketplace.reasons``: ``license_no_derivatives`` /
    ``license_no_commercial``; shown with ``app_reason_display``).

    Each lineage entry carries the dataset and license version names and the terms
    ``commercial_use`` and ``derivative_models`` recorded when the checkpoint was published.
    """
    problems = []
    for entry in lineage:
        label = f"{entry.get('dataset', '?')} ({entry.get('license', '?')})"
        if not entry.get("derivative_models", False):
            problems.append(app_reason("license_no_derivatives", label=label))
        if not entry.get("commercial_use", False):
            problems.append(app_reason("license_no_commercial", label=label))
    return problems


def problems_display(problems: list[CodedText]) -> str:
    """``license_problems`` in the active language, joined with "; "."""
    return "; ".join(app_reason_display(p) for p in problems)


def app_transition(*, app: App, to: str, reason: str = "", acting_user: User | None, staff: bool = False) -> App:
    """Move ``app`` to state ``to`` if the transition table allows it. ``reason``: plain text (typed by staff)
    or a ``portal.marketplace.reasons.app_reason`` (its code and params are stored beside the text).

    A public app, or one with a price, is refused (``LicenseForbidsPublishing``, naming the licenses)
    when its active version's training data forbids commercial use or derivative models; a public app
    needs staff review (``in_review`` → ``published`` by staff only).
    """
    authorize(user=acting_user, organization=app.publisher, action=Action.APPS_PUBLISH, staff=staff)
    with transaction.atomic():
        app = App.objects.select_for_update().get(pk=app.pk)
        if to not in APP_TRANSITIONS.get(app.state, frozenset()):
            raise IllegalAppTransition(
                _("An app cannot go from %(a)s to %(b)s.") % {"a": AppState(app.state).label, "b": AppState(to).label}
            )
        if to in (AppState.IN_REVIEW, AppState.PUBLISHED):
            version = app.versions.filter(active=True).first()
            if version is None:
                raise MarketplaceError(_("The app has no ready version to serve calls."))
            commercial = app.visibility == AppVisibility.PUBLIC or app.is_paid
            problems = license_problems(version.lineage) if commercial else []
            if problems:
                raise LicenseForbidsPublishing(
                    _("A public or paid app cannot be published: %(p)s") % {"p": problems_display(problems)},
                    details=problems,
                )
            if to == AppState.PUBLISHED and app.visibility == AppVisibility.PUBLIC and not staff:
                raise IllegalAppTransition(_("A public app goes live after staff review: submit it for review."))
        code, params = coded_fields(reason)
        App.objects.filter(pk=app.pk).update(
            state=to, state_reason=reason[:300], state_reason_code=code, state_reason_params=params
        )
        audit_log(
            action="marketplace.app_transition",
            actor=acting_user,
            organization=app.publisher,
            obj=app,
            extra={"from": app.state, "to": to, "reason": reason},
            staff=staff,
        )
    app.refresh_from_db()
    return app


# --- publishing a training checkpoint as an app (issue 7, part 2) ---------------------------------------------

TEXT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["text"],
    "additionalProperties": False,
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": 8000},
        "max_new_tokens": {"type": "integer", "minimum": 1, "maximum": 256},
    },
}
TEXT_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["output", "tokens"],
    "properties": {"output": {"type": "string"}, "tokens": {"type": "integer", "minimum": 0}},
}
CHECKPOINT_REF = "instances.checkpoint:"


class CheckpointNotFound(MarketplaceError):
    """The job or checkpoint does not exist for this organization (or is not complete): a 404."""

    code = "not_found"
    status = 404


class BuildFailed(MarketplaceError):
    code = "build_failed"
    status = 500


def _set_progress(version_id: int, stage: str, progress: int, **deployment: Any) -> None:
    version = AppVersion.objects.get(pk=version_id)
    AppVersion.objects.filter(pk=version_id, status=VersionStatus.BUILDING).update(
        progress=progress, deployment={**version.deployment, **deployment, "stage": stage}
    )


def app_version_build(*, version_id: int) -> AppVersion:
    """Build a ``building`` checkpoint version: export the checkpoint (progress 0–70 %, stage ``export``) to
    ``DATA_DIR/apps/<app slug>/v<n>``, start its model server on the configured deployment backend (stage
    ``deploy``, 80 %: a local process, or a Kubernetes Deployment + Service) and, once it answers ``/healthz``,
    make the version the active one (``ready``, 100 %); the server of the version it supersedes is stopped
    after commit (``deployments.checkpoint_version_activate``).

    Safe to run twice: a version that is not ``building`` is returned untouched; the export is reused when
    complete; a live server of the version is reused. A failure marks the version ``failed`` with
    ``error = "<stage>: <cause>"`` (and ``deployment["failed_stage"]``), stops a started server, writes an
    audit row and raises ``BuildFailed``.
    """
    from instances.selectors import checkpoint_by_id
    from instances.serving import export_checkpoint

    version = AppVersion.objects.select_related("app").get(pk=version_id)
    if version.status != VersionStatus.BUILDING or version.kind != ServingKind.CHECKPOINT:
        return version
    stage = "export"
    deployment: dict[str, Any] = {}
    try:
        checkpoint = checkpoint_by_id(int(version.checkpoint_ref.removeprefix(CHECKPOINT_REF)))
        out_dir = Path(settings.DATA_DIR) / "apps" / version.app.slug / f"v{version.number}"
        _set_progress(version_id, stage, 5)
        export_checkpoint(
            checkpoint.location, out_dir, progress=lambda p: _set_progress(version_id, "export", 5 + p * 65 // 100)
        )
        AppVersion.objects.filter(pk=version_id).update(artifact_path=str(out_dir))
        stage = "deploy"
        _set_progress(version_id, stage, 80)
        started = version.deployment if version.deployment.get("backend") else None  # a retried build's server
        deployment = deployments.deployment_backend().start(
            name=f"app-version-{version_id}", model_dir=out_dir, deployment=started
        )
        _set_progress(version_id, stage, 90, **deployment)
        version = deployments.checkpoint_version_activate(version_id=version_id)
    except Exception as exc:
        if deployment:
            deployments.deployment_backend().stop(deployment)
        cause = f"{stage}: {type(exc).__name__}: {exc}"
        current = AppVersion.objects.get(pk=version_id)
        AppVersion.objects.filter(pk=version_id).update(
            status=VersionStatus.FAILED,
            error=cause[:4000],
            deployment={**current.deployment, "stage": stage, "failed_stage": stage, "pid": None},
        )
        audit_log(
            action="marketplace.version_build_failed",
            actor=None,
            organization=version.app.publisher,
            obj=version,
            extra={"stage": stage, "cause": cause[:500]},
        )
        raise BuildFailed(cause) from exc
    AppVersion.objects.filter(pk=version_id).update(deployment={**version.deployment, "stage": "serving"})
    audit_log(
        action="marketplace.version_ready",
        actor=None,
        organization=version.app.publisher,
        obj=version,
        extra={"url": deployment.get("url", "")},
    )
    version.refresh_from_db()
    return version


def app_version_undeploy(*, version: AppVersion, user: User | None = None) -> AppVersion:
    """Stop the model server of a checkpoint version (idempotent). The version stays as it is, so calls to it
    fail (nothing charged) until it is built again, and the health check leaves it stopped; the pid is cleared."""
    authorize(user=user, organization=version.app.publisher, action=Action.APPS_PUBLISH)
    deployment = dict(version.deployment)
    if deployment.get("name"):
        deployments.deployment_backend().stop(deployment)
    AppVersion.objects.filter(pk=version.pk).update(deployment={**deployment, "pid": None, "stage": "stopped"})
    audit_log(action="marketplace.version_undeploy", actor=user, organization=version.app.publisher, obj=version)
    version.refresh_from_db()
    return version


# Publishing a checkpoint lives in its own module; its names are part of this module's interface.
from portal.marketplace.publishing import (
    PublishKeyReused as PublishKeyReused,
)
from portal.marketplace.publishing import (
    PublishResult as PublishResult,
)
from portal.marketplace.publishing import (
    _checkpoint_of as _checkpoint_of,
)
from portal.marketplace.publishing import (
    _publish as _publish,
)
from portal.marketplace.publishing import (
    app_publish_from_checkpoint as app_publish_from_checkpoint,
)
from portal.marketplace.publishing import (
    app_publish_from_checkpoint_once as app_publish_from_checkpoint_once,
)
from portal.marketplace.publishing import (
    training_lineage as training_lineage,
)
