from enum import StrEnum


class OutcomeEnum(StrEnum):
    FAILED = "failed"
    FINISHED = "finished"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return str(self.value)
