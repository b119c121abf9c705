from enum import StrEnum


class SourceEnum(StrEnum):
    ARCHIVE = "archive"
    LIVE = "live"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
