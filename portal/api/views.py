"""Partner API views of the portal: me and API tokens; the wallet's views are in ``billing.api.views``.

The organization every API view acts for is ``portal.scoping.request_organization`` (re-exported here for
modules written before it moved)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import generics, mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.serializers import ApiTokenSerializer, MeSerializer
from portal.models import ApiToken
from portal.scoping import request_organization
from portal.services import api_token_revoke

__all__ = ["ORG_PARAM", "ApiTokenViewSet", "MeView", "request_organization"]

ORG_PARAM = OpenApiParameter(
    "organization",
    str,
    description="Organization slug (console sessions). An API token acts only for its own organization: "
    "another slug is a 404.",
)


class MeView(generics.RetrieveAPIView):  # type: ignore[type-arg]
    """The authenticated user, their memberships, and the token's organization and scope."""

    serializer_class = MeSerializer

    def get_object(self):  # type: ignore[no-untyped-def]
        return self.request.user


class ApiTokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):  # type: ignore[type-arg]
    """Your own API tokens (never the secret). ``DELETE`` revokes a token; another user's is a 404."""

    serializer_class = ApiTokenSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return ApiToken.objects.none()
        qs = ApiToken.objects.filter(user=self.request.user).select_related("organization")
        if isinstance(self.request.auth, ApiToken):  # a token sees only its own organization's tokens
            qs = qs.filter(organization=self.request.auth.organization)
        return qs

    def perform_destroy(self, instance: ApiToken) -> None:
        api_token_revoke(token=instance, acting_user=self.request.user)  # type: ignore[arg-type]

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        token = self.get_object()
        self.perform_destroy(token)
        token.refresh_from_db()
        return Response(ApiTokenSerializer(token).data)
