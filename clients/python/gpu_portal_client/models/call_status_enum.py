from enum import StrEnum


class CallStatusEnum(StrEnum):
    FAILED = "failed"
    RESERVED = "reserved"
    SUCCEEDED = "succeeded"

    def __str__(self) -> str:
        return str(self.value)
