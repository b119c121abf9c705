from enum import StrEnum


class InstanceStatusEnum(StrEnum):
    FAILED = "failed"
    PENDING = "pending"
    PREEMPTED = "preempted"
    PROVISIONING = "provisioning"
    RUNNING = "running"
    SCHEDULING = "scheduling"
    STOPPED = "stopped"
    STOPPING = "stopping"

    def __str__(self) -> str:
        return str(self.value)
