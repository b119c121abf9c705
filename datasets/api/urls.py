"""``/api/v1/`` routes of the datasets app (included from ``portal.api.urls``)."""

from django.urls import path

from datasets.api import views

urlpatterns = [
    path("datasets", views.DatasetListView.as_view(), name="api-dataset-list"),
    path("datasets/<int:pk>", views.DatasetDetailView.as_view(), name="api-dataset-detail"),
    path("datasets/<int:pk>/versions", views.DatasetVersionListView.as_view(), name="api-dataset-versions"),
    path("datasets/<int:pk>/agreements", views.AgreementListCreateView.as_view(), name="api-dataset-agreements"),
    path("datasets/mounts", views.MountCreateView.as_view(), name="api-dataset-mounts"),
    path("uploads", views.UploadListCreateView.as_view(), name="api-upload-list"),
    path("uploads/<int:pk>", views.UploadDetailView.as_view(), name="api-upload-detail"),
    path("uploads/<int:pk>/retry", views.UploadRetryView.as_view(), name="api-upload-retry"),
]
