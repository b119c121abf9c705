from enum import StrEnum


class DatasetVisibilityEnum(StrEnum):
    PRIVATE = "private"
    PUBLIC = "public"

    def __str__(self) -> str:
        return str(self.value)
