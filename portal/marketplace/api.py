"""Partner API of the marketplace: list, detail, invoke, usage, publisher versions and revenue."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Sum
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing.money import from_micros, to_micros
from portal.api.errors import ApiError
from portal.api.parsers import loads_checked
from portal.api.throttling import TokenRateThrottle
from portal.api.views import ORG_PARAM
from portal.lib.http import AuthedRequest
from portal.marketplace import calls, services
from portal.marketplace.choices import AppCategory, AppVisibility, CallStatus, ServingKind
from portal.marketplace.models import App, AppCall, AppVersion
from portal.marketplace.selectors import app_for, app_of_publisher, apps_visible_to, calls_of_caller
from portal.scoping import request_organization


class AppSerializer(serializers.ModelSerializer[App]):
    publisher = serializers.CharField(source="publisher.slug")
    price_per_call = serializers.SerializerMethodField()
    price_per_1k_tokens = serializers.SerializerMethodField()
    price_per_1k_prompt_tokens = serializers.SerializerMethodField()

    class Meta:
        model = App
        fields = [
            "slug",
            "name",
            "category",
            "description",
            "publisher",
            "price_per_call",
            "price_per_1k_tokens",
            "price_per_1k_prompt_tokens",
            "visibility",
            "state",
            "input_schema",
            "output_schema",
            "example_request",
            "example_response",
            "attributions",
        ]

    def get_price_per_call(self, obj: App) -> str:
        return str(from_micros(obj.price_per_call_micros))

    def get_price_per_1k_tokens(self, obj: App) -> str:
        """CNY per 1,000 completion tokens (the ``tokens`` an invoke's output reports, the ``completion_tokens`` of
        the OpenAI-compatible API's usage), on top of the price per call."""
        return str(from_micros(obj.price_per_1k_tokens_micros))

    def get_price_per_1k_prompt_tokens(self, obj: App) -> str:
        """CNY per 1,000 prompt tokens of the OpenAI-compatible API (``usage.prompt_tokens``)."""
        return str(from_micros(obj.price_per_1k_prompt_tokens_micros))


class CallSerializer(serializers.ModelSerializer[AppCall]):
    app = serializers.CharField(source="app.slug")
    cost = serializers.SerializerMethodField()

    class Meta:
        model = AppCall
        fields = [
            "id",
            "app",
            "status",
            "cost",
            "price_micros",
            "billed_tokens",
            "prompt_tokens",
            "latency_ms",
            "error_code",
            "created_at",
        ]

    def get_cost(self, obj: AppCall) -> str:
        return str(from_micros(obj.price_micros if obj.status == CallStatus.SUCCEEDED else 0))


class VersionCreateSerializer(serializers.Serializer[dict[str, Any]]):
    kind = serializers.ChoiceField(choices=[ServingKind.EXTERNAL, ServingKind.ECHO])
    # No default: "" is not a valid default for an OpenAPI "uri" string (the schema would not validate).
    endpoint_url = serializers.URLField(required=False, allow_blank=True)


class VersionSerializer(serializers.ModelSerializer[AppVersion]):
    class Meta:
        model = AppVersion
        fields = ["number", "kind", "endpoint_url", "status", "progress", "active", "lineage", "error", "created_at"]


class InvokeThrottle(TokenRateThrottle):
    scope = "invoke"


class AppList(generics.ListAPIView):  # type: ignore[type-arg]
    """Published public apps and your organization's own; ``?q=`` searches, ``?category=`` filters."""

    serializer_class = AppSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return App.objects.none()
        qs = apps_visible_to(request_organization(self.request))
        if q := self.request.query_params.get("q"):
            qs = qs.filter(name__icontains=q) | qs.filter(description__icontains=q)
        if c := self.request.query_params.get("category"):
            qs = qs.filter(category=c)
        return qs


class AppDetail(APIView):
    @extend_schema(parameters=[ORG_PARAM], responses=AppSerializer)
    def get(self, request: Request, slug: str) -> Response:
        return Response(AppSerializer(app_for(request_organization(request), slug)).data)


class AppInvoke(APIView):
    """Call the app. Send the input as the JSON body; ``Idempotency-Key`` makes retries run and cost once.
    Errors: 422 ``input_invalid`` (with the JSON path), 413 body too large, 402 ``insufficient_funds``,
    409 ``call_in_progress`` / ``idempotency_key_reused``, 502 ``backend_error``, 504 ``backend_timeout``
    — nothing is charged on any error."""

    throttle_classes = [InvokeThrottle]

    @extend_schema(
        parameters=[ORG_PARAM, OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        request=dict[str, Any],
        responses=dict[str, Any],
    )
    def post(self, request: AuthedRequest, slug: str) -> Response:
        org = request_organization(request)
        app = app_for(org, slug)
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > settings.APP_MAX_REQUEST_BYTES:
            raise ApiError("body_too_large", f"the request body exceeds {settings.APP_MAX_REQUEST_BYTES} bytes", 413)
        try:  # the API parser's rules: strict JSON, no NUL, bounded depth (portal.api.parsers)
            payload = loads_checked(request.body or b"null")
        except ValueError as exc:
            raise ApiError("invalid_json", str(exc), 400) from exc
        try:
            result = calls.app_invoke(
                app=app,
                caller=org,
                user=request.user,
                payload=payload,
                idempotency_key=request.headers.get("Idempotency-Key") or None,
            )
        except services.MarketplaceError as exc:
            raise ApiError(exc.code, str(exc), exc.status, exc.details) from exc
        call = result.call
        return Response(
            {
                "call_id": call.pk,
                "output": result.output,
                "cost": str(from_micros(call.price_micros)),
                "billed_tokens": call.billed_tokens,
                "latency_ms": call.latency_ms,
                "replayed": result.replayed,
            },
            status=status.HTTP_200_OK,
        )


class CallList(generics.ListAPIView):  # type: ignore[type-arg]
    """Your organization's calls with their cost (failed calls cost 0), newest first."""

    serializer_class = CallSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return AppCall.objects.none()
        return calls_of_caller(request_organization(self.request))


class PublisherVersions(APIView):
    """Publisher: list versions or add one (external endpoint or echo). The HMAC secret is shown once."""

    @extend_schema(responses=VersionSerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        app = app_of_publisher(request_organization(request), slug)
        return Response(VersionSerializer(app.versions.all(), many=True).data)

    @extend_schema(request=VersionCreateSerializer, responses={201: VersionSerializer})
    def post(self, request: AuthedRequest, slug: str) -> Response:
        app = app_of_publisher(request_organization(request), slug)
        s = VersionCreateSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        try:
            version, secret = services.app_version_add(
                app=app,
                user=request.user,
                kind=s.validated_data["kind"],
                endpoint_url=s.validated_data.get("endpoint_url", ""),
            )
        except services.MarketplaceError as exc:
            raise ApiError(exc.code, str(exc), exc.status) from exc
        return Response({**VersionSerializer(version).data, "hmac_secret": secret}, status=status.HTTP_201_CREATED)


class RevenueSerializer(serializers.Serializer[dict[str, Any]]):
    app = serializers.CharField()
    calls = serializers.IntegerField()
    gross_micros = serializers.IntegerField()
    revenue_micros = serializers.IntegerField()


class PublisherRevenue(APIView):
    """Publisher: successful calls and revenue share of one of your apps."""

    @extend_schema(parameters=[ORG_PARAM], responses=RevenueSerializer)
    def get(self, request: Request, slug: str) -> Response:
        app = app_of_publisher(request_organization(request), slug)
        agg = app.calls.filter(status=CallStatus.SUCCEEDED).aggregate(
            revenue=Sum("publisher_share_micros"), gross=Sum("price_micros")
        )
        return Response(
            {
                "app": app.slug,
                "calls": app.calls.filter(status=CallStatus.SUCCEEDED).count(),
                "gross_micros": agg["gross"] or 0,
                "revenue_micros": agg["revenue"] or 0,
            }
        )


class PublishSerializer(serializers.Serializer[dict[str, Any]]):
    job_id = serializers.IntegerField(min_value=1)
    checkpoint_id = serializers.IntegerField(min_value=1)
    app = serializers.SlugField(required=False, help_text="add a version to this app of yours instead of creating one")
    name = serializers.CharField(required=False, default="", allow_blank=True, max_length=100)
    category = serializers.ChoiceField(choices=AppCategory.choices, default=AppCategory.GENERAL)
    description = serializers.CharField(required=False, default="", allow_blank=True)
    price_per_call = serializers.DecimalField(max_digits=12, decimal_places=6, min_value=0, default="0")  # type: ignore[arg-type]
    price_per_1k_tokens = serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        min_value=0,
        default="0",  # type: ignore[arg-type]
        help_text="CNY per 1,000 generated tokens, on top of the price per call",
    )
    price_per_1k_prompt_tokens = serializers.DecimalField(
        max_digits=12,
        decimal_places=6,
        min_value=0,
        default="0",  # type: ignore[arg-type]
        help_text="CNY per 1,000 prompt tokens of the OpenAI-compatible API, on top of the price per call",
    )
    visibility = serializers.ChoiceField(choices=AppVisibility.choices, default=AppVisibility.PRIVATE)


class AppPublish(APIView):
    """Publish a checkpoint of one of your training jobs as an app (or as a new version of ``app``).

    Answers 202 with the app and its new version in state ``building``: the checkpoint is exported and served
    by a background task; poll ``GET /apps/{slug}/versions`` for ``progress`` (and ``error`` naming the failed
    stage). The version records the training datasets and their licenses; making the app public or paid is
    refused later (409 ``license_forbids``) when a license forbids commercial use or derivative models.
    A job or checkpoint of another organization is a 404.

    ``Idempotency-Key``: a retry with the same key and body answers 200 with the same app and version (as they
    are now) and ``"replayed": true``, publishing and building nothing again; the same key with another body
    is a 409 ``idempotency_key_reused``. Keys are per organization."""

    @extend_schema(
        parameters=[
            ORG_PARAM,
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="A retried publish with the same key and body returns the first result.",
            ),
        ],
        request=PublishSerializer,
        responses={202: dict[str, Any], 200: dict[str, Any]},
    )
    def post(self, request: AuthedRequest) -> Response:
        org = request_organization(request)
        s = PublishSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        try:
            result = services.app_publish_from_checkpoint_once(
                organization=org,
                user=request.user,
                idempotency_key=request.headers.get("Idempotency-Key") or "",
                job_id=d["job_id"],
                checkpoint_id=d["checkpoint_id"],
                name=d["name"],
                category=d["category"],
                description=d["description"],
                price_per_call_micros=to_micros(d["price_per_call"]),
                price_per_1k_tokens_micros=to_micros(d["price_per_1k_tokens"]),
                price_per_1k_prompt_tokens_micros=to_micros(d["price_per_1k_prompt_tokens"]),
                visibility=d["visibility"],
                app_slug=d.get("app", ""),
            )
        except services.MarketplaceError as exc:
            raise ApiError(exc.code, str(exc), exc.status, exc.details) from exc
        return Response(
            {
                "app": AppSerializer(result.app).data,
                "version": VersionSerializer(result.version).data,
                "replayed": result.replayed,
            },
            status=status.HTTP_200_OK if result.replayed else status.HTTP_202_ACCEPTED,
        )
