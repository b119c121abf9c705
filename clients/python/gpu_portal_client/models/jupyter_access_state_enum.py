from enum import StrEnum


class JupyterAccessStateEnum(StrEnum):
    READY = "ready"
    STARTING = "starting"
    UNAVAILABLE = "unavailable"

    def __str__(self) -> str:
        return str(self.value)
