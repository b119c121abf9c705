"""Publishing a training checkpoint as an app: the training data's lineage, the checkpoint lookup, and the
publish request (optionally under an ``Idempotency-Key``). Re-exported by ``portal.marketplace.services``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from portal.audit import audit_log
from portal.marketplace.choices import AppVisibility, ServingKind, VersionStatus
from portal.marketplace.models import App, AppPublishRequest, AppVersion
from portal.marketplace.services import (  # the app operations a publish builds on
    CHECKPOINT_REF,
    MAX_KEY_LENGTH,
    TEXT_INPUT_SCHEMA,
    TEXT_OUTPUT_SCHEMA,
    CheckpointNotFound,
    LicenseForbidsPublishing,
    MarketplaceError,
    app_create,
    app_version_add,
    license_problems,
    problems_display,
    request_hash,
)
from portal.models import Organization, User
from portal.permissions import Action, authorize


def training_lineage(*, job_id: int) -> list[dict[str, Any]]:
    """The dataset versions training job ``job_id`` mounted, with their license terms, oldest mount first.

    One entry per dataset version: ``dataset`` (name), ``dataset_slug``, ``dataset_version`` (number),
    ``dataset_version_id``, ``license`` (name), ``license_version`` (number), ``commercial_use``,
    ``derivative_models``, ``attribution`` (the license version's attribution text, else the dataset's).
    Source: ``datasets.selectors.mounts_for_consumer("instances.trainingjob:<id>")``.
    """
    from datasets.selectors import mounts_for_consumer

    lineage: dict[int, dict[str, Any]] = {}
    for mount in mounts_for_consumer(f"instances.trainingjob:{job_id}"):
        version = mount.version
        lv = version.license_version
        lineage.setdefault(
            version.pk,
            {
                "dataset": version.dataset.name,
                "dataset_slug": version.dataset.slug,
                "dataset_version": version.number,
                "dataset_version_id": version.pk,
                "license": lv.license.name,
                "license_version": lv.number,
                "commercial_use": bool(lv.commercial_use),
                "derivative_models": bool(lv.derivative_models),
                "attribution": lv.attribution_text or version.dataset.attribution,
            },
        )
    return list(lineage.values())


def _checkpoint_of(organization: Organization, job_id: int, checkpoint_id: int) -> Any:
    """The organization's checkpoint ``checkpoint_id`` of job ``job_id`` if it may be published: the one check
    a rollback makes too (``instances.checkpoints.checkpoint_for_action``: the job's list re-read from storage
    first; complete, not set aside, not deleted). 404-style ``CheckpointNotFound`` for another organization's
    or job's checkpoint (it looks exactly like a missing one); ``MarketplaceError`` naming the reason and the
    steps that can be published otherwise."""
    from instances.checkpoints import CheckpointUnavailable, checkpoint_for_action
    from instances.selectors import jobs_for_org

    job = jobs_for_org(organization).filter(pk=job_id).first()
    if job is None:
        raise CheckpointNotFound("no such checkpoint of this job in your organization")
    try:
        return checkpoint_for_action(job=job, checkpoint_id=checkpoint_id)
    except CheckpointUnavailable as exc:
        if exc.not_found:
            raise CheckpointNotFound("no such checkpoint of this job in your organization") from None
        raise MarketplaceError(str(exc)) from None


class PublishKeyReused(MarketplaceError):
    """The publish request's ``Idempotency-Key`` was used before by this organization for another request."""

    code = "idempotency_key_reused"
    status = 409


@dataclass(frozen=True)
class PublishResult:
    app: App
    version: AppVersion
    replayed: bool  # True when an earlier request with the same Idempotency-Key was answered again


def app_publish_from_checkpoint(
    *,
    organization: Organization,
    user: User | None,
    job_id: int,
    checkpoint_id: int,
    name: str = "",
    category: str = "general",
    description: str = "",
    price_per_call_micros: int = 0,
    visibility: str = AppVisibility.PRIVATE,
    app_slug: str = "",
    price_per_1k_tokens_micros: int = 0,
    price_per_1k_prompt_tokens_micros: int = 0,
) -> App:
    """Publish checkpoint ``checkpoint_id`` of the organization's job ``job_id`` as an app served by the model.

    Creates an app (text in, generated text out: ``TEXT_INPUT_SCHEMA`` / ``TEXT_OUTPUT_SCHEMA``; a draft until
    its first version is built, when a private one is published by itself — ``deployments.
    checkpoint_version_activate``; a public one is submitted for review by its publisher) — or,
    with ``app_slug``, adds a version to that app of the organization — whose new version is ``building``,
    records the training data's lineage on it (``training_lineage``; it feeds ``license_problems`` when the
    app is made public or paid) and, after commit, enqueues ``portal.marketplace.tasks.app_version_build``
    (export → deploy → activate). Returns the app.

    Raises ``CheckpointNotFound`` (404: not the organization's job or checkpoint, or an unknown ``app_slug``),
    ``MarketplaceError`` (incomplete checkpoint, bad name, price or schema); nothing is written then.
    """
    app, _version = _publish(
        organization=organization,
        user=user,
        job_id=job_id,
        checkpoint_id=checkpoint_id,
        name=name,
        category=category,
        description=description,
        price_per_call_micros=price_per_call_micros,
        visibility=visibility,
        app_slug=app_slug,
        price_per_1k_tokens_micros=price_per_1k_tokens_micros,
        price_per_1k_prompt_tokens_micros=price_per_1k_prompt_tokens_micros,
    )
    return app


def app_publish_from_checkpoint_once(
    *,
    organization: Organization,
    user: User | None,
    idempotency_key: str,
    job_id: int,
    checkpoint_id: int,
    name: str = "",
    category: str = "general",
    description: str = "",
    price_per_call_micros: int = 0,
    visibility: str = AppVisibility.PRIVATE,
    app_slug: str = "",
    price_per_1k_tokens_micros: int = 0,
    price_per_1k_prompt_tokens_micros: int = 0,
) -> PublishResult:
    """``app_publish_from_checkpoint`` under an ``Idempotency-Key`` (the API's publish endpoint).

    The first request with a key publishes and records ``(organization, key)`` with the SHA-256 of the
    request's arguments and the version it created (``AppPublishRequest``, unique per organization and key)
    in the same transaction. A later request with the same key and the same arguments creates nothing and
    enqueues no build: it returns that app and version with ``replayed=True`` (also when two requests race:
    the loser's transaction rolls back on the unique constraint and it answers as a replay). The same key
    with other arguments raises ``PublishKeyReused`` (409). Keys are scoped to the organization; an empty
    key publishes as ``app_publish_from_checkpoint`` does. Raises ``MarketplaceError`` for a key longer than
    200 characters, and what ``app_publish_from_checkpoint`` raises (a refused request records nothing, so
    retrying it with the key runs it again).
    """
    authorize(user=user, organization=organization, action=Action.APPS_PUBLISH)
    arguments = {
        "job_id": job_id,
        "checkpoint_id": checkpoint_id,
        "name": name,
        "category": category,
        "description": description,
        "price_per_call_micros": price_per_call_micros,
        "price_per_1k_tokens_micros": price_per_1k_tokens_micros,
        "price_per_1k_prompt_tokens_micros": price_per_1k_prompt_tokens_micros,
        "visibility": visibility,
        "app_slug": app_slug,
    }
    key = idempotency_key.strip()
    if not key:
        app, version = _publish(organization=organization, user=user, **arguments)  # type: ignore[arg-type]
        return PublishResult(app=app, version=version, replayed=False)
    if len(key) > MAX_KEY_LENGTH:
        raise MarketplaceError(f"an Idempotency-Key has at most {MAX_KEY_LENGTH} characters")
    digest = request_hash(arguments)

    def replay() -> PublishResult | None:
        prior = (
            AppPublishRequest.objects.select_related("version__app__publisher")
            .filter(organization=organization, idempotency_key=key)
            .first()
        )
        if prior is None:
            return None
        if prior.request_sha256 != digest:
            raise PublishKeyReused("this Idempotency-Key was already used for a different publish request")
        return PublishResult(app=prior.version.app, version=prior.version, replayed=True)

    if (earlier := replay()) is not None:
        return earlier
    try:
        with transaction.atomic():
            app, version = _publish(organization=organization, user=user, **arguments)  # type: ignore[arg-type]
            AppPublishRequest.objects.create(
                organization=organization, idempotency_key=key, request_sha256=digest, version=version
            )
    except IntegrityError:
        if (earlier := replay()) is not None:  # a concurrent request with the key committed first
            return earlier
        raise
    return PublishResult(app=app, version=version, replayed=False)


def _publish(
    *,
    organization: Organization,
    user: User | None,
    job_id: int,
    checkpoint_id: int,
    name: str,
    category: str,
    description: str,
    price_per_call_micros: int,
    visibility: str,
    app_slug: str,
    price_per_1k_tokens_micros: int = 0,
    price_per_1k_prompt_tokens_micros: int = 0,
) -> tuple[App, AppVersion]:
    authorize(user=user, organization=organization, action=Action.APPS_PUBLISH)
    checkpoint = _checkpoint_of(organization, job_id, checkpoint_id)
    lineage = training_lineage(job_id=checkpoint.job_id)
    with transaction.atomic():
        if app_slug:
            app = App.objects.filter(publisher=organization, slug=app_slug).first()
            if app is None:
                raise CheckpointNotFound("no such app of your organization")
            commercial = app.visibility == AppVisibility.PUBLIC or app.is_paid
            problems = license_problems(lineage) if commercial else []
            if problems:  # the new version would serve a public or paid app: the same rule as app_transition
                raise LicenseForbidsPublishing(
                    _("This model cannot become a version of a public or paid app: %(p)s")
                    % {"p": problems_display(problems)},
                    details=problems,
                )
        else:
            if not name.strip():
                raise MarketplaceError(_("An app needs a name."))
            app = app_create(
                publisher=organization,
                user=user,  # type: ignore[arg-type]
                name=name.strip(),
                category=category,
                description=description,
                input_schema=TEXT_INPUT_SCHEMA,
                output_schema=TEXT_OUTPUT_SCHEMA,
                price_per_call_micros=price_per_call_micros,
                visibility=visibility,
                price_per_1k_tokens_micros=price_per_1k_tokens_micros,
                price_per_1k_prompt_tokens_micros=price_per_1k_prompt_tokens_micros,
                example_request={"text": "第一条", "max_new_tokens": 32},
                example_response={"output": "…", "tokens": 32},
            )
        version, _secret = app_version_add(
            app=app,
            user=user,
            kind=ServingKind.CHECKPOINT,
            checkpoint_ref=f"{CHECKPOINT_REF}{checkpoint.pk}",
            lineage=lineage,
            status=VersionStatus.BUILDING,
        )
        # a new private app goes live by itself when its first version is built (one step: no second
        # "Publish"); a public app still goes through review, a version added to an app keeps the app's state
        deployment: dict[str, Any] = {"stage": "queued"}
        if not app_slug and app.visibility == AppVisibility.PRIVATE:
            deployment["publish_when_ready"] = True
        AppVersion.objects.filter(pk=version.pk).update(deployment=deployment)
        audit_log(
            action="marketplace.publish_from_checkpoint",
            actor=user,
            organization=organization,
            obj=version,
            extra={
                "job": checkpoint.job_id,
                "checkpoint": checkpoint.pk,
                "step": checkpoint.step,
                "datasets": [d["dataset_version_id"] for d in lineage],
            },
        )
        from portal.marketplace import tasks  # tasks import calls, which imports this module

        transaction.on_commit(lambda: tasks.app_version_build.delay(version.pk))
    app.refresh_from_db()
    version.refresh_from_db()
    return app, version
