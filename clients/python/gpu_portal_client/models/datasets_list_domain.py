from enum import StrEnum


class DatasetsListDomain(StrEnum):
    FINANCE = "finance"
    LEGAL = "legal"
    MEDICAL = "medical"
    OTHER = "other"

    def __str__(self) -> str:
        return str(self.value)
