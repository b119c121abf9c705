"""``/api/v1/`` routes of the instances app (included from ``portal/api/urls.py``)."""

from django.urls import include, path

from instances.api import views
from instances.interactive import jupyter_views, volume_api
from portal.api.routers import ApiRouter

router = ApiRouter()
router.register("instances", views.InstanceViewSet, basename="api-instance")
router.register("jobs", views.JobViewSet, basename="api-job")
router.register("volumes", volume_api.VolumeViewSet, basename="api-volume")

urlpatterns = [
    path("runtime/jobs/<int:job_id>/events", views.runtime_events, name="api-runtime-events"),
    path(
        "runtime/instances/<int:pk>/jupyter-access",
        jupyter_views.jupyter_access_check,
        name="api-runtime-jupyter-access",
    ),
    path("", include(router.urls)),
]
