from enum import StrEnum


class InstanceKindEnum(StrEnum):
    INTERACTIVE = "interactive"
    TRAINING = "training"

    def __str__(self) -> str:
        return str(self.value)
