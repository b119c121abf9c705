from django.apps import AppConfig


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = "GPU instances and training jobs"

    def ready(self) -> None:
        from instances.interactive.access import connect_signals

        connect_signals()  # who may enter instances follows users, memberships, keys, shares
