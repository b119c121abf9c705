from enum import StrEnum


class ModelPresetEnum(StrEnum):
    GPT2_SMALL = "gpt2-small"
    TINY = "tiny"
    VALUE_2 = "1b"
    VALUE_3 = "7b"

    def __str__(self) -> str:
        return str(self.value)
