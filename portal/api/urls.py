"""``/api/v1/`` routes. Other apps add their routers here as they grow."""

from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from portal.api import views

router = DefaultRouter(trailing_slash=False)
router.include_root_view = False
router.register("tokens", views.ApiTokenViewSet, basename="api-token")

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("instances.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("datasets.api.urls")),
    path("", include("portal.marketplace.urls_api")),
    path("", include(router.urls)),
]
