"""Read queries of the app marketplace; every lookup is scoped (a foreign private app is a 404)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import Http404
from django.utils import timezone

from portal.marketplace.choices import AppState, AppVisibility, CallStatus
from portal.marketplace.models import App, AppCall
from portal.models import Organization
from portal.scoping import scoped_get_or_404


def apps_visible_to(organization: Organization | None) -> QuerySet[App]:
    """Published public apps, plus every app (any state) of the viewer's own organization."""
    public = Q(visibility=AppVisibility.PUBLIC, state=AppState.PUBLISHED)
    own = Q(publisher=organization) if organization is not None else Q(pk__in=[])
    return App.objects.filter(public | own).select_related("publisher")


def app_for(organization: Organization | None, slug: str) -> App:
    """The app named ``slug`` if the organization may see it, else 404."""
    app = apps_visible_to(organization).filter(slug=slug).first()
    if app is None:
        raise Http404("app not found")
    return app


def app_of_publisher(organization: Organization, slug: str) -> App:
    """An app the organization publishes (publisher pages: versions, revenue), else 404."""
    return scoped_get_or_404(App, organization=organization, org_field="publisher", slug=slug)


def calls_of_caller(organization: Organization) -> QuerySet[AppCall]:
    return AppCall.objects.filter(caller=organization).select_related("app")


def usage_per_day(app: App, days: int = 30) -> list[tuple[str, int, int]]:
    """(day, successful calls, publisher revenue in micro-CNY) for the last ``days`` days, oldest first."""
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    rows = {
        r["day"]: r
        for r in AppCall.objects.filter(app=app, status=CallStatus.SUCCEEDED, created_at__date__gte=first)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"), revenue=Sum("publisher_share_micros"))
    }
    out = []
    for i in range(days):
        d = first + timedelta(days=i)
        r: dict[str, Any] = dict(rows.get(d, {}))
        out.append((d.isoformat(), r.get("n", 0), r.get("revenue", 0) or 0))
    return out


def revenue_summary(app: App, days: int = 30) -> dict[str, int]:
    """The publisher's revenue of ``app`` over the last ``days`` days (the window of :func:`usage_per_day`), in
    micro-CNY, split by who called: ``calls`` and ``revenue_micros`` (successful calls by other organizations
    and the shares credited for them — the same amounts the ledger credited to the publisher, in the same
    transaction); ``own_calls`` and ``own_charged_micros`` (the publisher's own successful calls and what they
    were charged: the price less the publisher's share, so they earn no revenue)."""
    first = timezone.localdate() - timedelta(days=days - 1)
    rows = AppCall.objects.filter(app=app, status=CallStatus.SUCCEEDED, created_at__date__gte=first)
    own = Q(caller_id=app.publisher_id)
    agg = rows.aggregate(
        calls=Count("id", filter=~own),
        revenue=Sum("publisher_share_micros", filter=~own),
        own_calls=Count("id", filter=own),
        own_charged=Sum("price_micros", filter=own),
    )
    return {
        "calls": agg["calls"],
        "revenue_micros": agg["revenue"] or 0,
        "own_calls": agg["own_calls"],
        "own_charged_micros": agg["own_charged"] or 0,
    }
