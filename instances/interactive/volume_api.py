"""``/api/v1/volumes``: list, create, read and delete your organization's persistent volumes (attach one at
launch with the ``volumes`` field of ``POST /instances`` and ``POST /jobs``). Scoped to the request's
organization: another organization's volume is a 404. Changes go through ``instances.interactive.volumes``."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from instances.interactive import volumes as svc
from instances.interactive.access_api import SharesMixin
from instances.models import Volume
from portal.api.errors import ApiError
from portal.api.views import ORG_PARAM, request_organization
from portal.lib.http import AuthedRequest

VOLUME_ERROR_STATUS = {"exceeds_quota": 403, "in_use": 409, "name_taken": 409}


class VolumeSerializer(serializers.ModelSerializer[Volume]):
    """A volume: ``size_gb`` GB, ``used_bytes`` as last measured, ``attached_to`` (the instance holding it —
    active, or preempted / in its crash back-off and resuming on it — or null), ``cost_micros`` (storage
    charged so far, micro-CNY), ``price_per_hour_micros``."""

    attached_to = serializers.SerializerMethodField()
    cost_micros = serializers.SerializerMethodField()
    price_per_hour_micros = serializers.SerializerMethodField()

    class Meta:
        model = Volume
        fields = [
            "id",
            "name",
            "size_gb",
            "used_bytes",
            "measured_at",
            "created_at",
            "attached_to",
            "cost_micros",
            "price_per_hour_micros",
        ]

    def _row(self, obj: Volume) -> dict[str, Any]:
        rows: dict[int, dict[str, Any]] = self.__dict__.setdefault("_rows", {})  # one read per response
        if obj.pk not in rows:
            rows.update({r["volume"].pk: r for r in svc.volume_rows(obj.organization)})
        return rows.get(obj.pk) or {"attached_to": None, "cost_micros": 0}

    def get_attached_to(self, obj: Volume) -> int | None:
        instance = self._row(obj)["attached_to"]
        return instance.pk if instance is not None else None

    def get_cost_micros(self, obj: Volume) -> int:
        return int(self._row(obj)["cost_micros"])

    def get_price_per_hour_micros(self, obj: Volume) -> int:
        return svc.volume_price_per_hour_micros(size_gb=obj.size_gb)


class VolumeCreateSerializer(serializers.Serializer[Any]):
    """Input of ``POST /volumes``."""

    name = serializers.CharField(max_length=40)
    size_gb = serializers.IntegerField(min_value=1, max_value=svc.MAX_SIZE_GB)


def _error(exc: svc.VolumeError) -> ApiError:
    details: dict[str, Any] = {"field": exc.field}
    if exc.holder_id is not None:
        details["holder"] = exc.holder_id  # the instance holding the volume
    return ApiError(exc.code, str(exc), VOLUME_ERROR_STATUS.get(exc.code, 400), details)


class VolumeViewSet(
    SharesMixin,  # /volumes/{id}/shares: who else may attach it (instances.interactive.access_api)
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,  # type: ignore[type-arg]
):
    """Your organization's persistent volumes, billed per started GB-hour until deleted. ``DELETE`` removes the
    volume and its data (refused with 409 ``in_use`` while an instance holds it: active, or waiting to resume
    on it; ``details.holder`` is that instance's id)."""

    serializer_class = VolumeSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return Volume.objects.none()
        return svc.volumes_for_org(request_organization(self.request)).select_related("organization")

    @extend_schema(parameters=[ORG_PARAM], request=VolumeCreateSerializer, responses=VolumeSerializer)
    def create(self, request: Request) -> Response:
        data = VolumeCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            volume = svc.volume_create(
                organization=request_organization(request),
                user=request.user,  # type: ignore[arg-type]
                **data.validated_data,
            )
        except svc.VolumeError as exc:
            raise _error(exc) from None
        return Response(VolumeSerializer(volume).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[ORG_PARAM], responses={204: None})
    def destroy(self, request: AuthedRequest, pk: str) -> Response:
        volume = self.get_object()
        try:
            svc.volume_delete(volume=volume, user=request.user)
        except svc.VolumeError as exc:
            raise _error(exc) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
