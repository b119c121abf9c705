from enum import StrEnum


class MixedPrecisionEnum(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    NONE = "none"

    def __str__(self) -> str:
        return str(self.value)
