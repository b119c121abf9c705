from django.urls import path

from billing.api import views

urlpatterns = [
    path("wallet", views.WalletView.as_view(), name="api-wallet"),
    path("wallet/ledger", views.LedgerView.as_view(), name="api-wallet-ledger"),
    path("usage", views.UsageRecordList.as_view(), name="api-usage"),
    path("statements/<int:year>/<int:month>", views.StatementView.as_view(), name="api-statement"),
    path("wallet/top-ups", views.TopUpCreate.as_view(), name="api-topup-create"),
]
