"""Apps, app versions, app calls and publish requests of the ``marketplace`` app.

The tables keep the names they were created with under the ``portal`` label (``db_table``), so moving the
models to this app moved no data."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from portal.marketplace.choices import (
    AppCategory,
    AppState,
    AppVisibility,
    CallStatus,
    DeploymentStage,
    ServingKind,
    VersionStatus,
)
from portal.marketplace.reasons import APP_REASONS, app_reason_display


class App(models.Model):
    """An AI app a publisher organization offers per call; prices in micro-CNY.

    The price book of a call: ``price_per_call_micros``, plus ``price_per_1k_tokens_micros`` per 1,000 completion
    (generated) tokens and ``price_per_1k_prompt_tokens_micros`` per 1,000 prompt tokens (the OpenAI-compatible
    API counts both; ``portal.marketplace.calls.token_price_micros`` is the one rule).
    ``publisher_share_bps`` is the publisher's revenue share in basis points (7000 = 70 %), credited to
    the publisher's wallet in the same ledger transaction as the caller's charge.
    """

    publisher = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="apps")
    name = models.CharField(_("name"), max_length=100)
    slug = models.SlugField(max_length=80, unique=True)
    category = models.CharField(_("category"), max_length=20, choices=AppCategory.choices)
    description = models.TextField(_("description"), blank=True)
    input_schema = models.JSONField(default=dict)
    output_schema = models.JSONField(default=dict)
    example_request = models.JSONField(default=dict, blank=True)
    example_response = models.JSONField(default=dict, blank=True)
    price_per_call_micros = models.BigIntegerField(default=0)
    price_per_1k_tokens_micros = models.BigIntegerField(default=0, help_text="per 1,000 completion tokens")
    price_per_1k_prompt_tokens_micros = models.BigIntegerField(default=0, help_text="per 1,000 prompt tokens")
    publisher_share_bps = models.PositiveIntegerField(default=7000)
    visibility = models.CharField(max_length=10, choices=AppVisibility.choices, default=AppVisibility.PRIVATE)
    state = models.CharField(max_length=12, choices=AppState.choices, default=AppState.DRAFT)
    state_reason = models.CharField(max_length=300, blank=True)  # English (API, admin)
    # the reason as a code of portal.marketplace.reasons.APP_REASONS and its parameters ("" for typed text)
    state_reason_code = models.CharField(max_length=64, blank=True)
    state_reason_params = models.JSONField(default=dict, blank=True)
    attributions = models.JSONField(default=list, blank=True, help_text="attribution texts of training datasets")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "portal_app"
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def state_reason_display(self) -> str:
        """Why the app is in its state, in the reader's language (``portal.marketplace.reasons``)."""
        return app_reason_display(self.state_reason, code=self.state_reason_code, params=self.state_reason_params)

    @property
    def is_paid(self) -> bool:
        """Whether a call costs anything (the licenses of a paid app's training data must allow commercial use)."""
        return bool(
            self.price_per_call_micros > 0
            or self.price_per_1k_tokens_micros > 0
            or self.price_per_1k_prompt_tokens_micros > 0
        )


class AppVersion(models.Model):
    """One servable version of an app. Exactly one version per app is ``active``.

    ``lineage`` lists the dataset versions (and their license terms) a checkpoint model was trained on.
    ``hmac_secret`` signs requests to an external endpoint; it is needed in clear to sign, so it is
    shown once to the publisher and readable only by the serving code.
    """

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=ServingKind.choices)
    endpoint_url = models.URLField(max_length=500, blank=True)
    hmac_secret = models.CharField(max_length=100, blank=True)
    checkpoint_ref = models.CharField(max_length=100, blank=True, help_text="instances.checkpoint:<id>")
    artifact_path = models.CharField(max_length=500, blank=True)
    deployment = models.JSONField(default=dict, blank=True)
    lineage = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=10, choices=VersionStatus.choices, default=VersionStatus.READY)
    progress = models.PositiveSmallIntegerField(default=100)
    error = models.TextField(blank=True)
    active = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "portal_appversion"
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["app", "number"], name="uniq_app_version"),
            models.UniqueConstraint(fields=["app"], condition=models.Q(active=True), name="one_active_version"),
        ]

    def __str__(self) -> str:
        return f"{self.app} v{self.number}"

    def deployment_problem(self) -> tuple[str, str]:
        """What went wrong with this version, as ``(summary, detail)``: the summary in the reader's language
        (``portal.marketplace.reasons``; "" when there is none), the detail the technical error as recorded
        (English, shown apart as code): an unhealthy model server, a server that is down, a failed build."""
        d = self.deployment or {}
        if d.get("unhealthy_reason"):
            n = int(d.get("restart_failures") or 0)
            if d.get("unhealthy_code") in APP_REASONS and n:
                summary = APP_REASONS.render(code="restarts_failed_summary", params={"n": n}, fallback="")
                return summary, str(d.get("last_error") or "")
            return "", str(d["unhealthy_reason"])
        if d.get("stage") == "down":
            return gettext("The model server is down; the last error:"), str(d.get("last_error") or "")
        if self.error:
            return gettext("The build failed:"), self.error
        return "", ""

    def deployment_stage_display(self) -> str:
        """The model server's stage in words ("" when the version has no server record)."""
        stage = str(self.deployment.get("stage") or "")
        return str(DeploymentStage(stage).label) if stage in DeploymentStage.values else stage


class AppCall(models.Model):
    """One call of an app: reserved before the backend is called, charged only when it succeeds.

    ``(caller, app, idempotency_key)`` is unique, so a retried call with the same key runs and costs once.
    """

    app = models.ForeignKey(App, on_delete=models.PROTECT, related_name="calls")
    version = models.ForeignKey(AppVersion, null=True, on_delete=models.SET_NULL, related_name="calls")
    caller = models.ForeignKey("portal.Organization", on_delete=models.PROTECT, related_name="app_calls")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)
    request_sha256 = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=CallStatus.choices, default=CallStatus.RESERVED)
    price_micros = models.BigIntegerField(help_text="held while reserved; what was charged once succeeded")
    publisher_share_micros = models.BigIntegerField(default=0)
    billed_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="completion tokens charged at the app's price per 1,000 tokens"
    )
    prompt_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="prompt tokens charged at the app's price per 1,000 prompt tokens"
    )
    attempts = models.PositiveIntegerField(default=1)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    response = models.JSONField(null=True, blank=True)
    ledger_transaction_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    reserved_at = models.DateTimeField(null=True, blank=True, help_text="when the last attempt was reserved")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "portal_appcall"
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["caller", "app", "idempotency_key"], name="uniq_call_key")]
        indexes = [models.Index(fields=["app", "created_at"]), models.Index(fields=["caller", "status"])]

    def __str__(self) -> str:
        return f"call {self.pk} of {self.app}"


class AppPublishRequest(models.Model):
    """One ``POST /api/v1/apps/publish`` made with an ``Idempotency-Key``, recorded in the transaction that
    created its version. ``(organization, idempotency_key)`` is unique, so a retried request answers with the
    version it created instead of publishing (and building) again; ``request_sha256`` (of the request's
    arguments) tells a retry from another request that reuses the key."""

    organization = models.ForeignKey(
        "portal.Organization", on_delete=models.CASCADE, related_name="app_publish_requests"
    )
    idempotency_key = models.CharField(max_length=200)
    request_sha256 = models.CharField(max_length=64)
    version = models.ForeignKey(AppVersion, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "portal_apppublishrequest"
        constraints = [
            models.UniqueConstraint(fields=["organization", "idempotency_key"], name="uniq_publish_request_key"),
        ]

    def __str__(self) -> str:
        return f"publish {self.idempotency_key} → {self.version_id}"
