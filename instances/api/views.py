"""Partner API of the instances app (``/api/v1/instances``, ``/api/v1/jobs``) and the runtime callback
(``/api/v1/runtime/jobs/<id>/events``, authenticated by the job attempt's token only).

Every lookup is scoped to the request's organization (another organization's object is a 404, actions
included); state changes go through ``instances.services``.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from instances import checkpoints, joblogs, selectors, services
from instances.api.serializers import (
    CheckpointSerializer,
    InstanceCostsSerializer,
    InstanceLaunchSerializer,
    InstanceSerializer,
    JobLaunchSerializer,
    JobLogSerializer,
    JobSerializer,
    LogsQuerySerializer,
    PinSerializer,
    RollbackSerializer,
)
from instances.choices import InstanceKind
from instances.interactive.access_api import SharesMixin
from instances.interactive.utilization_api import InstanceUtilizationSerializer, utilization_payload
from instances.models import Instance, TrainingJob
from instances.reasons import Reason
from portal.api.errors import ApiError
from portal.api.parsers import loads_checked
from portal.api.views import ORG_PARAM
from portal.lib.http import AuthedRequest
from portal.scoping import request_organization

IDEMPOTENCY_PARAM = OpenApiParameter(
    "Idempotency-Key",
    str,
    location=OpenApiParameter.HEADER,
    required=False,
    description="A retried create with the same key returns the first result.",
)
LAUNCH_ERROR_STATUS = {
    "insufficient_funds": 402,
    "exceeds_quota": 403,
    "volume_not_found": 404,
    "volume_in_use": 409,
    "volume_deleted": 409,
    "volume_not_allowed": 403,
}


def _launch_refused(exc: services.LaunchError) -> ApiError:
    """A launch (or a restart taking its volumes back) refused: the envelope with the error's code."""
    return ApiError(exc.code, str(exc), LAUNCH_ERROR_STATUS.get(exc.code, 400), {"field": exc.field})


def _launch(request: Request, spec: services.LaunchSpec) -> tuple[Instance, bool]:
    key = (request.headers.get("Idempotency-Key") or "").strip()[:200]
    org = request_organization(request)
    spec.idempotency_key = key
    replay = bool(key) and Instance.objects.filter(organization=org, idempotency_key=key).exists()
    try:
        instance = services.instance_launch(
            organization=org,
            user=request.user,  # type: ignore[arg-type]
            spec=spec,
        )
    except services.LaunchError as exc:
        raise _launch_refused(exc) from None
    return instance, replay


class InstanceViewSet(SharesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Your organization's instances. ``POST`` launches an interactive instance (``command`` optional);
    ``POST /instances/{id}/stop`` stops one (final checkpoint first for training jobs);
    ``/instances/{id}/shares`` lets other members enter one (``instances.interactive.access_api``)."""

    serializer_class = InstanceSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return Instance.objects.none()
        return selectors.instances_for_org(request_organization(self.request))

    @extend_schema(
        parameters=[ORG_PARAM, IDEMPOTENCY_PARAM], request=InstanceLaunchSerializer, responses=InstanceSerializer
    )
    def create(self, request: Request) -> Response:
        data = InstanceLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        spec = services.LaunchSpec(kind=InstanceKind.INTERACTIVE, **data.validated_data)
        instance, replay = _launch(request, spec)
        return Response(InstanceSerializer(instance).data, status=status.HTTP_200_OK if replay else 201)

    @extend_schema(request=None, responses=InstanceSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request: AuthedRequest, pk: str) -> Response:
        instance = self.get_object()
        instance = services.instance_stop(
            instance=instance, reason=Reason("stopped_through_api"), acting_user=request.user
        )
        return Response(InstanceSerializer(instance).data)

    @extend_schema(request=None, responses=InstanceCostsSerializer)
    @action(detail=True, methods=["get"])
    def costs(self, request: AuthedRequest, pk: str) -> Response:
        """The tier, preemptions and what they cost, and idle autostop's minutes saved."""
        from instances.interactive.idle import autostop_at, minutes_saved

        instance = self.get_object()
        data = {
            **selectors.preemption_summary(instance),
            "autostop_at": autostop_at(instance) if instance.status == "running" else None,
            "idle_minutes_saved": minutes_saved(instance),
        }
        return Response(InstanceCostsSerializer(data).data)

    @extend_schema(request=None, responses=InstanceUtilizationSerializer)
    @action(detail=True, methods=["get"], pagination_class=None)
    def utilization(self, request: AuthedRequest, pk: str) -> Response:
        """The instance's kept utilization samples (CPU, memory, GPUs; units in the schema), oldest first."""
        data, context = utilization_payload(self.get_object())
        return Response(InstanceUtilizationSerializer(data, context=context).data)


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Your organization's training jobs: create, stop, restart, roll back, checkpoint now, checkpoints,
    logs, metrics."""

    serializer_class = JobSerializer

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return TrainingJob.objects.none()
        return selectors.jobs_for_org(request_organization(self.request)).prefetch_related("attempts")

    @extend_schema(parameters=[ORG_PARAM, IDEMPOTENCY_PARAM], request=JobLaunchSerializer, responses=JobSerializer)
    def create(self, request: Request) -> Response:
        data = JobLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        spec = services.LaunchSpec(kind=InstanceKind.TRAINING, **data.validated_data)
        instance, replay = _launch(request, spec)
        return Response(JobSerializer(instance.job).data, status=status.HTTP_200_OK if replay else 201)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request: AuthedRequest, pk: str) -> Response:
        job = self.get_object()
        services.instance_stop(instance=job.instance, reason=Reason("stopped_through_api"), acting_user=request.user)
        job.refresh_from_db()
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def restart(self, request: AuthedRequest, pk: str) -> Response:
        """Restart the job from its newest checkpoint. A resting job takes its volumes back first: 409
        ``volume_in_use`` (another instance holds one now; the message names it) or ``volume_deleted``."""
        try:
            job = services.job_restart(job=self.get_object(), acting_user=request.user)
        except services.LaunchError as exc:
            raise _launch_refused(exc) from None
        return Response(JobSerializer(job).data)

    @extend_schema(request=RollbackSerializer, responses=JobSerializer)
    @action(detail=True, methods=["post"])
    def rollback(self, request: AuthedRequest, pk: str) -> Response:
        job = self.get_object()
        data = RollbackSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            job = services.job_rollback(
                job=job, checkpoint_id=data.validated_data["checkpoint"], acting_user=request.user
            )
        except services.RollbackError as exc:  # nothing stopped; the message names the usable steps
            details: dict[str, Any] = {"field": "checkpoint"}
            if exc.available_steps:
                details["available_steps"] = exc.available_steps
            raise ApiError("unknown_checkpoint", str(exc), 400, details) from None
        except services.LaunchError as exc:  # its volumes, as for a restart
            raise _launch_refused(exc) from None
        return Response(JobSerializer(job).data)

    @extend_schema(request=None, responses=JobSerializer)
    @action(detail=True, methods=["post"], url_path="checkpoint")
    def checkpoint_now(self, request: AuthedRequest, pk: str) -> Response:
        try:
            job = services.job_checkpoint_now(job=self.get_object(), acting_user=request.user)
        except services.NotRunning as exc:
            raise ApiError("not_running", str(exc), 409) from None
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=CheckpointSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None)
    def checkpoints(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        rows = selectors.checkpoints_of(job).select_related("attempt")
        return Response(CheckpointSerializer(rows, many=True).data)

    @extend_schema(parameters=[LogsQuerySerializer], responses=JobLogSerializer)
    @action(detail=True, methods=["get"], pagination_class=None)
    def logs(self, request: Request, pk: str) -> Response:
        """One node rank's log: live from its pod (local: its log file), else the portal's archived copy.
        Without ``after`` the last ``lines`` lines; with ``after`` (the ``cursor`` of an earlier answer, with
        its ``attempt``) up to ``lines`` lines from that offset on, oldest first, ``more`` when others are
        waiting, ``dropped`` counting the lines the portal no longer has. An unknown rank or attempt is a 404
        ``unknown_rank``."""
        job = self.get_object()
        query = LogsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        q = query.validated_data
        try:
            found = joblogs.job_log(
                job=job,
                rank=q["rank"],
                attempt_number=q.get("attempt"),
                lines=q["lines"],
                after=q.get("after"),
                positions=True,
            )
        except joblogs.UnknownRank as exc:
            raise ApiError("unknown_rank", str(exc), 404, {"field": "rank"}) from None
        return Response(
            {
                "job": job.pk,
                "attempt": found.attempt,
                "next_attempt": found.next_attempt,
                "rank": found.rank,
                "ranks": found.ranks,
                "source": found.source,
                "lines": found.lines,
                "first": found.first,
                "cursor": found.cursor,
                "dropped": found.dropped,
                "more": found.more,
            }
        )

    @extend_schema(request=PinSerializer, responses=CheckpointSerializer)
    @action(detail=True, methods=["post"], url_path=r"checkpoints/(?P<checkpoint_id>[0-9]+)/pin")
    def pin(self, request: AuthedRequest, pk: str, checkpoint_id: str) -> Response:
        """Pin (never deleted by keep-last-K, not counted in K) or unpin (``{"pinned": false}``) a checkpoint.
        Another job's or organization's checkpoint is a 404; a deleted one a 409."""
        job = self.get_object()
        data = PinSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            cp = checkpoints.checkpoint_pin(
                job=job, checkpoint_id=checkpoint_id, pinned=data.validated_data["pinned"], acting_user=request.user
            )
        except checkpoints.CheckpointUnavailable as exc:
            if exc.not_found:
                raise ApiError("not_found", str(exc), 404) from None
            raise ApiError("checkpoint_unavailable", str(exc), 409) from None
        return Response(CheckpointSerializer(cp).data)

    @extend_schema(responses={200: dict})
    @action(detail=True, methods=["get"], pagination_class=None)
    def metrics(self, request: Request, pk: str) -> Response:
        job = self.get_object()
        points = selectors.loss_curve(job)
        return Response(
            {
                "job": job.pk,
                "points": [
                    {"step": p.step, "loss": p.loss, "lr": p.lr, "tokens_per_s": p.tokens_per_s} for p in points
                ],
            }
        )


@csrf_exempt
def runtime_events(request: HttpRequest, job_id: int) -> JsonResponse:
    """The runtime's progress callback (contract: ``instances/runtime/reporting.py``). Authenticated by the
    job attempt's bearer token only (no session, no API token); idempotent per ``(job, attempt, seq)``.
    Other methods than POST: 405 in the API's error envelope."""
    if request.method != "POST":
        response = JsonResponse(
            {"error": {"code": "method_not_allowed", "message": "Use POST.", "details": None}}, status=405
        )
        response["Allow"] = "POST"
        return response
    header = request.headers.get("Authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else ""
    try:
        body: Any = loads_checked(request.body or b"null")
    except ValueError as exc:
        return JsonResponse({"error": {"code": "invalid", "message": str(exc), "details": None}}, status=400)
    try:
        answer = services.job_events_receive(job_id=job_id, token=token, body=body)
    except services.CallbackRefused as exc:
        code = "authentication_failed" if exc.status == 401 else "invalid"
        return JsonResponse({"error": {"code": code, "message": str(exc), "details": None}}, status=exc.status)
    return JsonResponse(answer)
