from enum import StrEnum


class FormatEnum(StrEnum):
    CSV = "csv"
    JSONL = "jsonl"
    TXT = "txt"

    def __str__(self) -> str:
        return str(self.value)
