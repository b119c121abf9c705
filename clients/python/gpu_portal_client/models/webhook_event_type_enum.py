from enum import StrEnum


class WebhookEventTypeEnum(StrEnum):
    APP_CALL_FAILED = "app_call.failed"
    INSTANCE_STATE_CHANGED = "instance.state_changed"
    JOB_CHECKPOINT_COMMITTED = "job.checkpoint_committed"
    JOB_FAILED = "job.failed"
    JOB_FINISHED = "job.finished"
    JOB_PREEMPTED = "job.preempted"
    JOB_RESUMED = "job.resumed"
    WALLET_BALANCE_LOW = "wallet.balance_low"
    WALLET_TOP_UP_CREDITED = "wallet.top_up_credited"

    def __str__(self) -> str:
        return str(self.value)
