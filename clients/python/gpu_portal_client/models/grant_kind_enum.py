from enum import StrEnum


class GrantKindEnum(StrEnum):
    PROMOTIONAL = "promotional"
    STAFF = "staff"
    TRIAL = "trial"

    def __str__(self) -> str:
        return str(self.value)
