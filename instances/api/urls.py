"""``/api/v1/`` routes of the instances app (included from ``portal/api/urls.py``)."""

from django.urls import include, path
from rest_framework.routers import DefaultRouter

from instances.api import views

router = DefaultRouter(trailing_slash=False)
router.include_root_view = False
router.register("instances", views.InstanceViewSet, basename="api-instance")
router.register("jobs", views.JobViewSet, basename="api-job")

urlpatterns = [
    path("runtime/jobs/<int:job_id>/events", views.runtime_events, name="api-runtime-events"),
    path("", include(router.urls)),
]
