"""Root URLconf: console, auth, admin, partner API, i18n switcher."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from django.views.generic import RedirectView

from portal import sshkey_views, views
from portal.forms import LoginForm

admin.site.site_header = _("gpu-portal back office")

urlpatterns = [
    path("", views.home, name="home"),
    path("signup/", views.signup, name="signup"),
    path("verify/<str:token>/", views.verify_email, name="verify_email"),
    path("verify-resend/", views.resend_verification, name="resend_verification"),
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="portal/login.html", authentication_form=LoginForm),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "password-reset/",
        auth_views.PasswordResetView.as_view(
            template_name="portal/password_reset.html", email_template_name="portal/password_reset_email.txt"
        ),
        name="password_reset",
    ),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name="portal/password_reset_done.html"),
        name="password_reset_done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(template_name="portal/password_reset_confirm.html"),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/complete/",
        auth_views.PasswordResetCompleteView.as_view(template_name="portal/password_reset_complete.html"),
        name="password_reset_complete",
    ),
    path("tokens/", views.api_tokens, name="api_tokens"),
    path("tokens/<int:pk>/revoke/", views.api_token_revoke_view, name="api_token_revoke"),
    path("ssh-keys/", sshkey_views.ssh_keys, name="ssh_keys"),
    path("ssh-keys/<int:pk>/revoke/", sshkey_views.ssh_key_revoke_view, name="ssh_key_revoke"),
    path("o/<slug:org>/", views.dashboard, name="dashboard"),
    path("o/<slug:org>/members/", views.members, name="members"),
    path("o/<slug:org>/members/<int:pk>/remove/", views.member_remove, name="member_remove"),
    path("teams/new/", views.organization_new, name="organization_new"),
    path("o/<slug:org>/", include("instances.urls")),
    path("o/<slug:org>/datasets/", include("datasets.urls")),
    path("o/<slug:org>/apps/", include("portal.marketplace.urls")),
    path("o/<slug:org>/webhooks/", include("portal.webhooks.urls")),
    path("", include("billing.urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("admin/", admin.site.urls),
    path("favicon.ico", RedirectView.as_view(url=settings.STATIC_URL + "portal/favicon.svg", permanent=True)),
    path("api/v1/", include("portal.api.urls")),
]

handler404 = "portal.api.errors.not_found_handler"
handler500 = "portal.api.errors.server_error_handler"
