"""Billing API: usage records, monthly statements, top-up creation — all scoped to the organization."""

from __future__ import annotations

from dataclasses import asdict

from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from billing import stripe_gateway
from billing.api.serializers import (
    LedgerLineSerializer,
    StatementSerializer,
    TopUpCreateSerializer,
    TopUpSerializer,
    UsageRecordSerializer,
    WalletSerializer,
)
from billing.models import CreditGrant, LedgerEntry, UsageRecord
from billing.money import from_micros
from billing.payments import TopUpError, TopUpKeyReused, topup_create_once
from billing.selectors import ledger_lines, wallet_balance
from billing.statement_months import StatementBeforeFirstMonth, statement_month_check
from billing.statements import statement_build
from portal.api.errors import ApiError
from portal.api.views import ORG_PARAM
from portal.lib.http import AuthedRequest
from portal.scoping import request_organization


class UsageRecordList(generics.ListAPIView):  # type: ignore[type-arg]
    """Charged instance-minutes, newest first; filter by ``instance`` id and ``since`` / ``until`` (ISO 8601)."""

    serializer_class = UsageRecordSerializer

    @extend_schema(
        parameters=[
            ORG_PARAM,
            OpenApiParameter("instance", int),
            OpenApiParameter("since", str),
            OpenApiParameter("until", str),
        ]
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return UsageRecord.objects.none()
        qs = UsageRecord.objects.filter(organization=request_organization(self.request))
        params = self.request.query_params
        if "instance" in params:
            if not params["instance"].isdigit():
                raise ApiError("invalid", "instance must be an integer id", 400)
            qs = qs.filter(instance_id=int(params["instance"]))
        for name, lookup in (("since", "minute__gte"), ("until", "minute__lt")):
            if name in params:
                when = parse_datetime(params[name])
                if when is None or when.tzinfo is None:
                    raise ApiError("invalid", f"{name} must be an ISO 8601 time with a zone", 400)
                qs = qs.filter(**{lookup: when})
        return qs


class StatementView(APIView):
    """One month's statement (time zone of the user); totals equal the ledger."""

    @extend_schema(parameters=[ORG_PARAM], responses=StatementSerializer)
    def get(self, request: Request, year: int, month: int) -> Response:
        org = request_organization(request)
        try:
            tz_name = getattr(request.user, "timezone", "Asia/Shanghai")
            statement_month_check(organization=org, year=year, month=month, tz_name=tz_name)
            st = statement_build(organization=org, year=year, month=month, tz_name=tz_name)
        except StatementBeforeFirstMonth as exc:
            raise ApiError("no_statement", str(exc), 404) from exc
        except ValueError as exc:
            raise ApiError("invalid", str(exc), 400) from exc
        data = {
            **asdict(st),
            "by_kind": [asdict(k) for k in st.by_kind],
            "usage": [asdict(u) for u in st.usage],
            "write_offs": [asdict(x) for x in st.write_offs],
        }
        return Response(StatementSerializer(data).data)


class TopUpCreate(APIView):
    """Create a top-up; the response's ``checkout_url`` is Stripe Checkout. Credited by webhook only.

    ``Idempotency-Key`` (per organization, at most 200 characters): a retry with the same key and body answers
    200 with the same top-up and creates no second Checkout Session; the same key with another body is a 409
    ``idempotency_key_reused``."""

    @extend_schema(
        parameters=[ORG_PARAM, OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER)],
        request=TopUpCreateSerializer,
        responses={201: TopUpSerializer, 200: TopUpSerializer},
    )
    def post(self, request: AuthedRequest) -> Response:
        org = request_organization(request)
        serializer = TopUpCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        d = serializer.validated_data
        try:
            result = topup_create_once(
                organization=org,
                user=request.user,
                amount=d["amount"],
                success_url=d["success_url"],
                cancel_url=d["cancel_url"],
                idempotency_key=request.headers.get("Idempotency-Key") or "",
            )
        except TopUpKeyReused as exc:
            raise ApiError("idempotency_key_reused", str(exc), 409) from exc
        except TopUpError as exc:
            raise ApiError("invalid_amount", str(exc), 400) from exc
        except stripe_gateway.StripeNotConfigured as exc:
            raise ApiError(
                "payments_not_configured", "Online top-up is not configured on this installation.", 503
            ) from exc
        except stripe_gateway.StripeUnavailable as exc:
            raise ApiError("payment_provider_error", str(exc), 502) from exc
        code = status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED
        return Response(TopUpSerializer(result.topup).data, status=code)


class WalletView(APIView):
    """The organization's wallet: total, trial (unexpired grants) and paid balance, and grants."""

    @extend_schema(parameters=[ORG_PARAM], responses=WalletSerializer)
    def get(self, request: Request) -> Response:
        org = request_organization(request)
        bal = wallet_balance(organization=org)
        grants = CreditGrant.objects.filter(wallet__organization=org).select_related("account").order_by("-id")
        data = {
            "organization": org.slug,
            "currency": "CNY",
            "balance": str(from_micros(bal.total_micros)),
            "trial_balance": str(from_micros(bal.trial_micros)),
            "paid_balance": str(from_micros(bal.paid_micros)),
            "balance_micros": bal.total_micros,
            "trial_expires_at": bal.next_expiry,
            "grants": grants,
        }
        return Response(WalletSerializer(data).data)


class LedgerView(generics.ListAPIView):  # type: ignore[type-arg]
    """The organization's wallet ledger lines, newest first, cursor-paginated."""

    serializer_class = LedgerLineSerializer

    @extend_schema(parameters=[ORG_PARAM])
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self):  # type: ignore[no-untyped-def]
        if getattr(self, "swagger_fake_view", False):
            return LedgerEntry.objects.none()
        return ledger_lines(organization=request_organization(self.request))
