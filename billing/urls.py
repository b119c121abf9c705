from django.urls import path

from billing import views

urlpatterns = [
    path("o/<slug:org>/wallet/", views.wallet, name="wallet"),
    path("o/<slug:org>/wallet/top-up/", views.topup_start, name="topup_start"),
    path("billing/stripe/webhook/", views.stripe_webhook, name="stripe_webhook"),
    path("pricing/", views.pricing, name="pricing"),
    path("o/<slug:org>/statements/<int:year>/<int:month>/", views.statement, name="statement"),
]
