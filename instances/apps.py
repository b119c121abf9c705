from django.apps import AppConfig


class InstancesConfig(AppConfig):
    name = "instances"
    verbose_name = "GPU instances and training jobs"

    def ready(self) -> None:
        from instances.interactive.ssh import connect_signals

        connect_signals()  # authorized keys follow SSH keys and memberships
