"""Console routes of the instances app, under ``o/<org>/`` (included from ``portal/urls.py``)."""

from django.urls import path

from instances import views
from instances.interactive import access_views, jupyter_views, volume_views
from instances.interactive import views as interactive_views

urlpatterns = [
    path("instances/", views.instance_list, name="instances"),
    path("instances/new/", views.instance_new, name="instance_new"),
    path("instances/quote/", views.launch_quote, name="launch_quote"),
    path("instances/idle-autostop/", views.idle_autostop_settings, name="idle_autostop_settings"),
    path("instances/access/", access_views.access_settings, name="instance_access_settings"),
    path("instances/<int:pk>/", views.instance_detail, name="instance_detail"),
    path("instances/<int:pk>/stop/", views.instance_stop, name="instance_stop"),
    path("instances/<int:pk>/jupyter/", jupyter_views.jupyter_open, name="instance_jupyter"),
    path("instances/<int:pk>/jupyter/panel/", jupyter_views.jupyter_panel, name="instance_jupyter_panel"),
    path("volumes/", volume_views.volume_list, name="volumes"),
    path("volumes/quote/", volume_views.volume_quote, name="volume_quote"),
    path("volumes/<int:pk>/delete/", volume_views.volume_delete, name="volume_delete"),
    path("instances/<int:pk>/access/", interactive_views.instance_access, name="instance_access"),
    path("instances/<int:pk>/shares/", access_views.shares, {"kind": "instance"}, name="instance_shares"),
    path(
        "instances/<int:pk>/shares/<int:user_id>/remove/",
        access_views.share_remove,
        {"kind": "instance"},
        name="instance_share_remove",
    ),
    path("volumes/<int:pk>/shares/", access_views.shares, {"kind": "volume"}, name="volume_shares"),
    path(
        "volumes/<int:pk>/shares/<int:user_id>/remove/",
        access_views.share_remove,
        {"kind": "volume"},
        name="volume_share_remove",
    ),
    path("instances/<int:pk>/keep-running/", views.instance_keep_running, name="instance_keep_running"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/new/", views.job_new, name="job_new"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/stop/", views.job_stop, name="job_stop"),
    path("jobs/<int:pk>/restart/", views.job_restart, name="job_restart"),
    path("jobs/<int:pk>/checkpoint/", views.job_checkpoint_now, name="job_checkpoint_now"),
    path("jobs/<int:pk>/logs/", views.job_logs, name="job_logs"),
    path("jobs/<int:pk>/rollback/<int:checkpoint>/", views.job_rollback, name="job_rollback"),
    path("jobs/<int:pk>/checkpoints/<int:checkpoint>/pin/", views.job_checkpoint_pin, name="job_checkpoint_pin"),
]
