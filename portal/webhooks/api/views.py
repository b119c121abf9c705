"""``/api/v1/webhooks/endpoints`` (list, create, delete, rotate) and ``/api/v1/webhooks/deliveries`` (list,
show, redeliver), scoped to the request's organization: another organization's endpoint or delivery is a 404.
Only owners and admins create, delete, rotate and redeliver (403 ``permission_denied``)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.errors import ApiError
from portal.api.views import ORG_PARAM
from portal.scoping import request_organization, scoped_get_or_404
from portal.webhooks import services
from portal.webhooks.api.serializers import (
    WebhookDeliverySerializer,
    WebhookEndpointCreateSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointWithSecretSerializer,
)
from portal.webhooks.choices import DeliveryStatus
from portal.webhooks.models import WebhookDelivery, WebhookEndpoint
from portal.webhooks.selectors import webhook_deliveries_of, webhook_endpoints_of


def _refusal(exc: services.WebhookError) -> ApiError:
    return ApiError(exc.code, str(exc), exc.status)


class WebhookEndpointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Your organization's webhook endpoints (never their secrets). ``POST`` registers one and answers its
    secret once; ``POST …/{id}/rotate`` replaces the secret (the old one keeps signing for 24 h)."""

    serializer_class = WebhookEndpointSerializer
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return WebhookEndpoint.objects.none()
        return webhook_endpoints_of(request_organization(self.request))

    def get_object(self) -> WebhookEndpoint:
        return scoped_get_or_404(
            WebhookEndpoint.objects.all(), organization=request_organization(self.request), pk=int(self.kwargs["pk"])
        )

    @extend_schema(parameters=[ORG_PARAM])
    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[ORG_PARAM])
    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        parameters=[ORG_PARAM],
        request=WebhookEndpointCreateSerializer,
        responses={201: WebhookEndpointWithSecretSerializer},
    )
    def create(self, request: Request) -> Response:
        org = request_organization(request)
        data = WebhookEndpointCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            endpoint, secret = services.webhook_endpoint_create(
                organization=org,
                user=request.user,  # type: ignore[arg-type]
                url=data.validated_data["url"],
                event_types=data.validated_data["event_types"],
                description=data.validated_data["description"],
            )
        except services.WebhookError as exc:
            raise _refusal(exc) from exc
        endpoint.secret = secret
        return Response(WebhookEndpointWithSecretSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[ORG_PARAM], responses={204: None})
    def destroy(self, request: Request, pk: str) -> Response:
        endpoint = self.get_object()
        try:
            services.webhook_endpoint_delete(endpoint=endpoint, user=request.user)  # type: ignore[arg-type]
        except services.WebhookError as exc:
            raise _refusal(exc) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(parameters=[ORG_PARAM], request=None, responses=WebhookEndpointWithSecretSerializer)
    @action(detail=True, methods=["post"])
    def rotate(self, request: Request, pk: str) -> Response:
        endpoint = self.get_object()
        try:
            endpoint, secret = services.webhook_endpoint_rotate(endpoint=endpoint, user=request.user)  # type: ignore[arg-type]
        except services.WebhookError as exc:
            raise _refusal(exc) from exc
        endpoint.secret = secret
        return Response(WebhookEndpointWithSecretSerializer(endpoint).data)


class WebhookDeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Deliveries to your organization's endpoints, newest first, with every attempt; ``?endpoint=<id>`` and
    ``?status=pending|succeeded|failed`` filter. ``POST …/{id}/redeliver`` sends one again now."""

    serializer_class = WebhookDeliverySerializer
    lookup_value_regex = "[0-9]{1,18}"

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return WebhookDelivery.objects.none()
        params = self.request.query_params
        endpoint, state = params.get("endpoint"), params.get("status")
        if endpoint is not None and not (endpoint.isascii() and endpoint.isdigit() and len(endpoint) <= 18):
            raise ApiError("invalid", "endpoint must be an endpoint id", 400)
        if state is not None and state not in DeliveryStatus.values:
            raise ApiError("invalid", f"status must be one of {', '.join(DeliveryStatus.values)}", 400)
        return webhook_deliveries_of(
            request_organization(self.request),
            endpoint_id=int(endpoint) if endpoint is not None else None,
            status=state,
        )

    def get_object(self) -> WebhookDelivery:
        return scoped_get_or_404(
            webhook_deliveries_of(request_organization(self.request)),
            organization=request_organization(self.request),
            org_field="endpoint__organization",
            pk=int(self.kwargs["pk"]),
        )

    @extend_schema(
        parameters=[
            ORG_PARAM,
            OpenApiParameter("endpoint", int, description="only deliveries to this endpoint"),
            OpenApiParameter("status", str, enum=DeliveryStatus.values),
        ]
    )
    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().list(request, *args, **kwargs)

    @extend_schema(parameters=[ORG_PARAM])
    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(parameters=[ORG_PARAM], request=None, responses={202: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def redeliver(self, request: Request, pk: str) -> Response:
        delivery = self.get_object()
        try:
            services.webhook_delivery_redeliver(delivery=delivery, user=request.user)  # type: ignore[arg-type]
        except services.WebhookError as exc:
            raise _refusal(exc) from exc
        return Response(WebhookDeliverySerializer(self.get_object()).data, status=status.HTTP_202_ACCEPTED)
