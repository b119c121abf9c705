from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Billing and ledger"

    def ready(self) -> None:
        # The ground floor's hooks (portal.hooks): a new organization's wallet, a verified address's trial credit.
        from billing import receivers
        from portal import hooks

        hooks.organization_created.connect(receivers.wallet_for_new_organization, dispatch_uid="billing.wallet")
        hooks.trial_claimed.connect(receivers.trial_credit_for_claim, dispatch_uid="billing.trial_credit")
