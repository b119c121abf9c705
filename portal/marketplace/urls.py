from django.urls import path

from portal.marketplace import views

urlpatterns = [
    path("", views.app_list, name="apps"),
    path("new/", views.app_create, name="app_create"),
    path("calls/", views.call_list, name="app_calls"),
    path("publish/<int:job_id>/<int:checkpoint_id>/", views.app_publish, name="app_publish"),
    path("<slug:slug>/", views.app_detail, name="app_detail"),
    path("<slug:slug>/try/", views.app_try, name="app_try"),
    path("<slug:slug>/state/", views.app_state, name="app_state"),
]
