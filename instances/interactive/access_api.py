"""API of who may enter: the shares of an instance or a volume, as a mixin of ``InstanceViewSet`` and
``VolumeViewSet`` (``/api/v1/instances/{id}/shares``, ``/api/v1/volumes/{id}/shares``).

``GET`` lists the shares; ``POST {"email": …}`` shares with that member (201; an existing share: 200);
``DELETE …/shares/{user_id}`` withdraws one (204; none: 404 ``not_found``). The target is looked up inside the
request's organization (another organization's: 404); the rights and refusals are
``instances.interactive.access``'s (403 ``permission_denied`` for a member who neither made it nor manages,
400 ``not_a_member`` / ``own``)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from instances.interactive import access
from instances.interactive.access_models import AccessShare
from portal.api.errors import ApiError
from portal.lib.http import AuthedRequest


class ShareSerializer(serializers.ModelSerializer[AccessShare]):
    """One share: the member (``user_id``, ``email``) and when it was made."""

    user_id = serializers.IntegerField(read_only=True)
    email = serializers.EmailField(source="user.email", read_only=True)

    class Meta:
        model = AccessShare
        fields = ["user_id", "email", "created_at"]


class ShareCreateSerializer(serializers.Serializer[Any]):
    """Input of ``POST …/shares``: the e-mail address of a member of the organization who may launch."""

    email = serializers.EmailField(max_length=254)


class SharesMixin:
    """``shares`` and ``share_remove`` actions for a viewset whose ``get_object`` is the scoped target."""

    get_object: Any

    @extend_schema(request=ShareCreateSerializer, responses={200: ShareSerializer(many=True), 201: ShareSerializer})
    @action(detail=True, methods=["get", "post"], pagination_class=None)
    def shares(self, request: Request, pk: str) -> Response:
        """Who else may enter this instance (attach this volume): list, or share with a member."""
        target = self.get_object()
        if request.method == "GET":
            return Response(ShareSerializer(access.shares_of(target), many=True).data)
        data = ShareCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        before = access.shares_of(target).count()
        try:
            share = access.access_share_add(
                target=target,
                email=data.validated_data["email"],
                acting_user=request.user,  # type: ignore[arg-type]
            )
        except access.ShareError as exc:
            raise ApiError(exc.code, str(exc), 400, {"field": "email"}) from None
        created = access.shares_of(target).count() > before
        return Response(ShareSerializer(share).data, status=status.HTTP_201_CREATED if created else 200)

    @extend_schema(request=None, responses={204: None})
    @action(detail=True, methods=["delete"], url_path=r"shares/(?P<user_id>[0-9]{1,18})")
    def share_remove(self, request: AuthedRequest, pk: str, user_id: str) -> Response:
        """Withdraw the share with one member: their JupyterLab and SSH sessions end."""
        target = self.get_object()
        if not access.access_share_remove(target=target, user_id=int(user_id), acting_user=request.user):
            raise ApiError("not_found", "No share with this user.", 404)
        return Response(status=status.HTTP_204_NO_CONTENT)
