"""Partner API of the datasets app: catalog, versions, agreements, mounts and uploads, org-scoped.

Every view calls ``datasets.selectors`` / ``datasets.services``; ``DatasetError`` subclasses become the
API's error envelope (not found 404, agreement required 403, unpaid fee 402, other refusals 400).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from datasets import selectors, services
from datasets.api.serializers import (
    AgreementCreateSerializer,
    AgreementSerializer,
    DatasetSerializer,
    DatasetVersionSerializer,
    MountCreateSerializer,
    MountSerializer,
    UploadCreateSerializer,
    UploadSerializer,
)
from datasets.errors import (
    AgreementRequired,
    DatasetError,
    DatasetNotFound,
    LicenseFeeUnpaid,
)
from datasets.models import Agreement, Dataset, DatasetVersion, LicenseVersion, Upload
from portal.api.errors import ApiError
from portal.api.views import ORG_PARAM
from portal.lib.http import AuthedRequest
from portal.scoping import request_organization


def api_error(exc: DatasetError) -> ApiError:
    """The API form of a datasets refusal."""
    if isinstance(exc, DatasetNotFound):
        return ApiError("not_found", "Not found.", status.HTTP_404_NOT_FOUND)
    if isinstance(exc, AgreementRequired):
        return ApiError(exc.code, str(exc), status.HTTP_403_FORBIDDEN)
    if isinstance(exc, LicenseFeeUnpaid):
        return ApiError(exc.code, str(exc), status.HTTP_402_PAYMENT_REQUIRED)
    return ApiError(exc.code, str(exc), status.HTTP_400_BAD_REQUEST)


def client_ip(request: Any) -> str | None:
    """The client address as the server saw it (``REMOTE_ADDR``; a proxy must set it, e.g. gunicorn's
    ``--forwarded-allow-ips``)."""
    return request.META.get("REMOTE_ADDR") or None


def catalog_queryset(request: Request) -> QuerySet[Dataset]:
    """Visible datasets filtered by ``?domain=``, ``?language=``, ``?q=`` and license terms
    ``?commercial_use=true``, ``?derivative_models=true``, ``?free=true``."""
    from datasets.views import filter_catalog

    org = request_organization(request)
    qs = filter_catalog(selectors.datasets_visible_to(org), request.query_params)
    return qs.prefetch_related(
        Prefetch("versions", queryset=DatasetVersion.objects.select_related("license_version__license"))
    )


FILTER_PARAMS = [
    ORG_PARAM,
    OpenApiParameter("domain", str, enum=["finance", "medical", "legal", "other"]),
    OpenApiParameter("language", str, description="e.g. zh, en"),
    OpenApiParameter("q", str, description="search in name and description"),
    OpenApiParameter("commercial_use", bool),
    OpenApiParameter("derivative_models", bool),
    OpenApiParameter("free", bool),
]


class DatasetListView(generics.ListAPIView):  # type: ignore[type-arg]
    """Datasets visible to the organization (public ones and its own private ones), newest first."""

    serializer_class = DatasetSerializer

    @extend_schema(parameters=FILTER_PARAMS)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Dataset]:
        if getattr(self, "swagger_fake_view", False):
            return Dataset.objects.none()
        return catalog_queryset(self.request)


class DatasetDetailView(generics.RetrieveAPIView):  # type: ignore[type-arg]
    """One dataset; another organization's private dataset is a 404."""

    serializer_class = DatasetSerializer

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_object(self) -> Dataset:
        try:
            return selectors.dataset_for_org(request_organization(self.request), self.kwargs["pk"])
        except DatasetNotFound as exc:
            raise api_error(exc) from None


class DatasetVersionListView(generics.ListAPIView):  # type: ignore[type-arg]
    """The versions of one visible dataset, newest first."""

    serializer_class = DatasetVersionSerializer

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[DatasetVersion]:
        if getattr(self, "swagger_fake_view", False):
            return DatasetVersion.objects.none()
        try:
            dataset = selectors.dataset_for_org(request_organization(self.request), self.kwargs["pk"])
        except DatasetNotFound as exc:
            raise api_error(exc) from None
        return dataset.versions.select_related("license_version__license")


class AgreementListCreateView(generics.ListCreateAPIView):  # type: ignore[type-arg]
    """``GET``: the organization's agreements for this dataset's license (every version), newest first.
    ``POST {"text_sha256", "license_version"?}``: accept the license on behalf of the organization; the
    fee of a paid license is charged once (402 ``insufficient_funds`` when the wallet cannot cover it)."""

    serializer_class = AgreementSerializer

    def _dataset(self) -> Dataset:
        try:
            return selectors.dataset_for_org(request_organization(self.request), self.kwargs["pk"])
        except DatasetNotFound as exc:
            raise api_error(exc) from None

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Agreement]:
        if getattr(self, "swagger_fake_view", False):
            return Agreement.objects.none()
        dataset = self._dataset()
        newest = dataset.latest_version
        if newest is None:
            return Agreement.objects.none()
        return Agreement.objects.filter(
            organization=request_organization(self.request), license_version__license=newest.license_version.license
        ).select_related("organization", "user")

    @extend_schema(
        parameters=[ORG_PARAM],
        request=AgreementCreateSerializer,
        responses={201: AgreementSerializer, 200: AgreementSerializer},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = AgreementCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        org = request_organization(request)
        dataset = self._dataset()
        newest = dataset.latest_version
        if newest is None:
            raise ApiError("not_ready", "This dataset has no version yet.", status.HTTP_409_CONFLICT)
        lv_id = body.validated_data.get("license_version")
        license_ = newest.license_version.license
        lv = (
            license_.current_version
            if lv_id is None
            else LicenseVersion.objects.filter(pk=lv_id, license=license_).first()
        )
        if lv is None:
            raise ApiError("not_found", "Not found.", status.HTTP_404_NOT_FOUND)
        try:
            agreement, created = services.agreement_accept_once(
                organization=org,
                user=request.user,  # type: ignore[arg-type]
                license_version=lv,  # type: ignore[arg-type]
                shown_text_sha256=body.validated_data["text_sha256"],
                ip=client_ip(request),
                user_agent=request.META.get("HTTP_USER_AGENT", ""),
                dataset=dataset,
            )
        except DatasetError as exc:
            raise api_error(exc) from None
        # accepted again while the agreement holds: the same agreement, 200, nothing recorded
        return Response(
            AgreementSerializer(agreement).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )


class MountCreateView(generics.GenericAPIView):  # type: ignore[type-arg]
    """``POST {"version", "consumer"}``: record a read-only mount of a version (refused with 403
    ``agreement_required`` without a current agreement). Instances and jobs mount through their launch."""

    serializer_class = MountSerializer

    @extend_schema(parameters=[ORG_PARAM], request=MountCreateSerializer, responses={201: MountSerializer})
    def post(self, request: AuthedRequest, *args: Any, **kwargs: Any) -> Response:
        body = MountCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            mount = services.mount_attach(
                organization=request_organization(request),
                user=request.user,
                version_id=body.validated_data["version"],
                consumer=body.validated_data["consumer"],
            )
        except DatasetError as exc:
            raise api_error(exc) from None
        return Response(MountSerializer(mount).data, status=status.HTTP_201_CREATED)


class UploadListCreateView(generics.ListCreateAPIView):  # type: ignore[type-arg]
    """``GET``: the organization's uploads with status, stage and percent. ``POST`` (multipart): ``file``,
    ``format`` (jsonl/txt/csv), ``text_column`` (CSV), ``name``, ``keep_original``, ``domain``."""

    serializer_class = UploadSerializer
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[Upload]:
        if getattr(self, "swagger_fake_view", False):
            return Upload.objects.none()
        return selectors.uploads_for_org(request_organization(self.request))

    @extend_schema(parameters=[ORG_PARAM], request=UploadCreateSerializer, responses={201: UploadSerializer})
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = UploadCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            upload = services.upload_create(
                organization=request_organization(request),
                user=request.user,  # type: ignore[arg-type]
                file=data["file"],
                name=data.get("name", ""),
                fmt=data["format"],
                text_column=data.get("text_column", ""),
                keep_original=data["keep_original"],
                domain=data["domain"],
                original_filename=data["file"].name,
            )
        except DatasetError as exc:
            raise api_error(exc) from None
        return Response(UploadSerializer(upload).data, status=status.HTTP_201_CREATED)


class UploadDetailView(generics.RetrieveAPIView):  # type: ignore[type-arg]
    """One upload of the organization (another organization's is a 404)."""

    serializer_class = UploadSerializer

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    def get_object(self) -> Upload:
        try:
            return selectors.upload_for_org(request_organization(self.request), self.kwargs["pk"])
        except DatasetNotFound as exc:
            raise api_error(exc) from None


class UploadRetryView(generics.GenericAPIView):  # type: ignore[type-arg]
    """``POST``: run a failed upload again from the failed stage."""

    serializer_class = UploadSerializer

    @extend_schema(parameters=[ORG_PARAM], request=None, responses=UploadSerializer)
    def post(self, request: AuthedRequest, *args: Any, **kwargs: Any) -> Response:
        try:
            upload = selectors.upload_for_org(request_organization(request), kwargs["pk"])
            upload = services.upload_retry(upload=upload, user=request.user)
        except DatasetError as exc:
            raise api_error(exc) from None
        return Response(UploadSerializer(upload).data)
