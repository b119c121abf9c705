from enum import StrEnum


class ModeEnum(StrEnum):
    BARE_METAL = "bare_metal"
    CONTAINER = "container"

    def __str__(self) -> str:
        return str(self.value)
