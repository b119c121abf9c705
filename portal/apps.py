from django.apps import AppConfig


class PortalConfig(AppConfig):
    name = "portal"
    verbose_name = "Accounts and organizations"

    def ready(self) -> None:
        from django.db.models.signals import post_save

        from portal.models import User
        from portal.signals import revoke_tokens_of_inactive_user

        post_save.connect(revoke_tokens_of_inactive_user, sender=User, dispatch_uid="portal.revoke_inactive")
