from enum import StrEnum


class AppStateEnum(StrEnum):
    DRAFT = "draft"
    IN_REVIEW = "in_review"
    PUBLISHED = "published"
    SUSPENDED = "suspended"

    def __str__(self) -> str:
        return str(self.value)
