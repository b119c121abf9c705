from enum import StrEnum


class DeidStatusEnum(StrEnum):
    DEIDENTIFIED = "deidentified"
    NOT_REQUIRED = "not_required"

    def __str__(self) -> str:
        return str(self.value)
