from enum import StrEnum


class CategoryEnum(StrEnum):
    FINANCE = "finance"
    GENERAL = "general"
    LEGAL = "legal"
    MEDICAL = "medical"

    def __str__(self) -> str:
        return str(self.value)
