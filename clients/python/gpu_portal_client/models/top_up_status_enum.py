from enum import StrEnum


class TopUpStatusEnum(StrEnum):
    CHECKOUT_OPEN = "checkout_open"
    CREATED = "created"
    EXPIRED = "expired"
    FAILED = "failed"
    PAID = "paid"

    def __str__(self) -> str:
        return str(self.value)
