"""Every task the code sends by name is registered with the Celery app a worker runs."""

from portal.celery import app

EXPECTED = {
    "billing.tasks.expire_credit_grants",
    "billing.tasks.metering_tick",
    "datasets.tasks.import_corpus",
    "datasets.tasks.upload_stage",
    "instances.tasks.reconcile",
    "instances.tasks.launch_attempt",
    "instances.tasks.stop_instance",
    "instances.tasks.preempt_instance",
    "instances.tasks.checkpoint_timers",
    "instances.tasks.sync_inventory",
    "portal.marketplace.tasks.app_version_build",
    "portal.webhooks.tasks.webhook_deliver",
    "portal.webhooks.tasks.webhook_deliveries_sweep",
}


def test_the_worker_registers_every_task_and_beat_entry():
    from django.conf import settings

    app.loader.import_default_modules()
    registered = set(app.tasks)
    assert registered >= EXPECTED, EXPECTED - registered
    assert {e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()} <= registered
