from enum import StrEnum


class VersionCreateKindEnum(StrEnum):
    ECHO = "echo"
    EXTERNAL = "external"

    def __str__(self) -> str:
        return str(self.value)
