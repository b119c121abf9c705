from django.urls import path

from portal.marketplace import api, openai_api

urlpatterns = [
    path("apps", api.AppList.as_view(), name="api-apps"),
    path("apps/calls", api.CallList.as_view(), name="api-app-calls"),
    path("apps/publish", api.AppPublish.as_view(), name="api-app-publish"),
    path("apps/<slug:slug>", api.AppDetail.as_view(), name="api-app"),
    path("apps/<slug:slug>/invoke", api.AppInvoke.as_view(), name="api-app-invoke"),
    path("apps/<slug:slug>/versions", api.PublisherVersions.as_view(), name="api-app-versions"),
    path("apps/<slug:slug>/revenue", api.PublisherRevenue.as_view(), name="api-app-revenue"),
    # the OpenAI-compatible API of model apps: base URL /api/v1/openai/v1 (portal.marketplace.openai_api)
    path("openai/v1/models", openai_api.Models.as_view(), name="openai-models"),
    path("openai/v1/models/<str:model>", openai_api.ModelDetail.as_view(), name="openai-model"),
    path("openai/v1/completions", openai_api.Completions.as_view(), name="openai-completions"),
    path("openai/v1/chat/completions", openai_api.ChatCompletions.as_view(), name="openai-chat-completions"),
]
