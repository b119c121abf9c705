from enum import StrEnum


class TierEnum(StrEnum):
    INTERRUPTIBLE = "interruptible"
    ON_DEMAND = "on_demand"

    def __str__(self) -> str:
        return str(self.value)
