"""``/api/v1/`` routes. Other apps add their routers here as they grow."""

from django.urls import include, path

from portal.api import docs, sshkeys, views
from portal.api.routers import ApiRouter

router = ApiRouter()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("ssh-keys", sshkeys.SshKeyViewSet, basename="api-ssh-key")

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    path("schema", docs.SchemaView.as_view(), name="api-schema"),
    path("docs", docs.SwaggerDocsView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc", docs.RedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("", include("instances.api.urls")),
    path("", include("billing.api.urls")),
    path("", include("datasets.api.urls")),
    path("", include("portal.marketplace.urls_api")),
    path("", include("portal.webhooks.api.urls")),
    path("", include(router.urls)),
]
