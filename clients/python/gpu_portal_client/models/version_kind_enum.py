from enum import StrEnum


class VersionKindEnum(StrEnum):
    CHECKPOINT = "checkpoint"
    ECHO = "echo"
    EXTERNAL = "external"

    def __str__(self) -> str:
        return str(self.value)
