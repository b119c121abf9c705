from django.urls import path

from portal.marketplace import api

urlpatterns = [
    path("apps", api.AppList.as_view(), name="api-apps"),
    path("apps/calls", api.CallList.as_view(), name="api-app-calls"),
    path("apps/publish", api.AppPublish.as_view(), name="api-app-publish"),
    path("apps/<slug:slug>", api.AppDetail.as_view(), name="api-app"),
    path("apps/<slug:slug>/invoke", api.AppInvoke.as_view(), name="api-app-invoke"),
    path("apps/<slug:slug>/versions", api.PublisherVersions.as_view(), name="api-app-versions"),
    path("apps/<slug:slug>/revenue", api.PublisherRevenue.as_view(), name="api-app-revenue"),
]
