"""Console routes of outgoing webhooks, under ``o/<org>/webhooks/`` (included from ``portal/urls.py``)."""

from django.urls import path

from portal.webhooks import views

urlpatterns = [
    path("", views.webhooks, name="webhooks"),
    path("endpoints/<int:pk>/delete/", views.endpoint_delete, name="webhook_endpoint_delete"),
    path("endpoints/<int:pk>/rotate/", views.endpoint_rotate, name="webhook_endpoint_rotate"),
    path("deliveries/<int:pk>/redeliver/", views.delivery_redeliver, name="webhook_delivery_redeliver"),
]
