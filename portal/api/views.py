"""Partner API views of the portal: me, API tokens, and the organization every API view acts for
(``request_organization``); the wallet's views are in ``billing.api.views``."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import generics, mixins, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from portal.api.errors import ApiError
from portal.api.serializers import ApiTokenSerializer, MeSerializer
from portal.models import ApiToken, Organization
from portal.selectors import organization_for_user
from portal.services import api_token_revoke

ORG_PARAM = OpenApiParameter(
    "organization",
    str,
    description="Organization slug (console sessions). An API token acts only for its own organization: "
    "another slug is a 404.",
)


def request_organization(request: Request) -> Organization:
    """The organization a request acts for.

    With an API token: the token's organization, always — a token is a credential of one membership, so
    ``?organization=`` naming any other organization is refused with 404 ``not_found`` (as for an outsider)
    before anything is read. With a console session: ``?organization=<slug>`` if the user is a member (else
    404, indistinguishable from a missing one), or the user's personal organization.
    """
    slug = request.query_params.get("organization")
    if isinstance(request.auth, ApiToken):
        token_org = request.auth.organization
        if slug is not None and slug != token_org.slug:
            raise ApiError(
                "not_found",
                "Organization not found for this API token: a token acts only for the "
                f"organization it was created for ({token_org.slug}).",
                404,
            )
        return token_org
    return organization_for_user(user=request.user, slug=slug)  # type: ignore[arg-type]


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
