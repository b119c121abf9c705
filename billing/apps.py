from django.apps import AppConfig
from django.db.models.signals import post_migrate


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing and ledger"

    def ready(self) -> None:
        # The ground floor's hooks (portal.hooks): a new organization's wallet, a verified address's trial credit.
        from billing import receivers
        from portal import hooks

        hooks.organization_created.connect(receivers.wallet_for_new_organization, dispatch_uid="billing.wallet")
        hooks.trial_claimed.connect(receivers.trial_credit_for_claim, dispatch_uid="billing.trial_credit")

        from billing.call_sql import install

        # the app-call billing functions of PostgreSQL, from the current table names (billing.call_sql)
        post_migrate.connect(install, sender=self, dispatch_uid="billing.call_sql.install")
