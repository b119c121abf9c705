from enum import StrEnum


class EngineEnum(StrEnum):
    DDP = "ddp"
    DEEPSPEED = "deepspeed"
    FSDP = "fsdp"

    def __str__(self) -> str:
        return str(self.value)
