"""``/api/v1/webhooks/…`` routes (included from ``portal/api/urls.py``)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from portal.webhooks.api import views

router = DefaultRouter(trailing_slash=False)
router.include_root_view = False
router.include_format_suffixes = False  # no ".json" twins of the routes
router.register("webhooks/endpoints", views.WebhookEndpointViewSet, basename="api-webhook-endpoint")
router.register("webhooks/deliveries", views.WebhookDeliveryViewSet, basename="api-webhook-delivery")

urlpatterns = [path("", include(router.urls))]
