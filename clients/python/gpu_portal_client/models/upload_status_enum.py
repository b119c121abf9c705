from enum import StrEnum


class UploadStatusEnum(StrEnum):
    FAILED = "failed"
    PROCESSING = "processing"
    READY = "ready"
    RECEIVED = "received"

    def __str__(self) -> str:
        return str(self.value)
