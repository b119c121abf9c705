"""Console routes of the datasets app, under ``o/<org>/datasets/`` (included from ``portal.urls``)."""

from django.urls import path

from datasets import views

urlpatterns = [
    path("", views.catalog, name="datasets"),
    path("<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("<int:pk>/agreement/", views.agreement_modal, name="dataset_agreement"),
    path("<int:pk>/mount/", views.dataset_mount, name="dataset_mount"),
    path("uploads/", views.upload_list, name="uploads"),
    path("uploads/<int:pk>/", views.upload_detail, name="upload_detail"),
    path("deid-settings/", views.deid_settings, name="deid_settings"),
]
