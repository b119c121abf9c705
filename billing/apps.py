from django.apps import AppConfig
from django.db.models.signals import post_migrate


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing and ledger"

    def ready(self) -> None:
        from billing.call_sql import install

        # the app-call billing functions of PostgreSQL, from the current table names (billing.call_sql)
        post_migrate.connect(install, sender=self, dispatch_uid="billing.call_sql.install")
