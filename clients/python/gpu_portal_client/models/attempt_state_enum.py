from enum import StrEnum


class AttemptStateEnum(StrEnum):
    FAILED = "failed"
    PENDING = "pending"
    PREEMPTED = "preempted"
    RUNNING = "running"
    STOPPED = "stopped"
    SUCCEEDED = "succeeded"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
