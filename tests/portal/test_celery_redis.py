"""A real Celery worker on a real Redis broker runs a periodic task against the real database.

Needs PostgreSQL (the worker is another process and must see the test database) and ``REDIS_TEST_URL``
(``.ci/run`` starts Redis and sets both). What production adds: many worker replicas and beat.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.conf import settings
from django.db import connection
from django.utils import timezone

from billing.choices import GrantKind
from billing.models import CreditGrant, LedgerTransaction
from billing.selectors import wallet_balance
from billing.services import credit_grant_create

REDIS = os.environ.get("REDIS_TEST_URL", "")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql" or not REDIS, reason="needs PostgreSQL and REDIS_TEST_URL (set by .ci/run)"
    ),
]


@pytest.fixture
def worker(tmp_path):
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.base",
        "CELERY_BROKER_URL": REDIS,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "PORTAL_DATA_DIR": str(tmp_path),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "portal",
            "worker",
            "--pool",
            "solo",
            "-Q",
            "control",
            "--loglevel",
            "INFO",
            "--hostname",
            f"test-{os.getpid()}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=(tmp_path / "worker.log").open("w"),  # a file: an unread pipe would block the worker when full
        stderr=subprocess.STDOUT,
        text=True,
    )
    proc.log_path = tmp_path / "worker.log"  # read when an assertion fails
    yield proc
    proc.terminate()
    proc.wait(20)


def test_a_worker_on_redis_expires_a_grant_once_even_when_the_task_is_sent_twice(alice_org, worker):
    grant = credit_grant_create(
        organization=alice_org,
        amount_micros=10_000_000,
        expires_at=timezone.now() + timedelta(days=1),
        kind=GrantKind.TRIAL,
        idempotency_key="trial",
    )
    # an expired grant is posted once it is older than the metering lookback (late ticks may still use it)
    long_ago = timezone.now() - timedelta(hours=settings.METERING_LOOKBACK_HOURS, seconds=1)
    CreditGrant.objects.filter(pk=grant.pk).update(expires_at=long_ago)
    sender = Celery(broker=REDIS, set_as_current=False)  # the portal's app stays the current one for other tests
    sender.send_task("billing.tasks.expire_credit_grants", queue="control")  # control-plane work (settings)
    sender.send_task("billing.tasks.expire_credit_grants", queue="control")
    deadline = time.monotonic() + 60
    expired = CreditGrant.objects.filter(pk=grant.pk, expired_at__isnull=False)
    while time.monotonic() < deadline and not expired.exists():
        time.sleep(0.2)
    time.sleep(1.0)  # let the second delivery run too
    grant.refresh_from_db()
    assert grant.expired_at is not None, "the worker did not run the task:\n" + worker.log_path.read_text()[-3000:]
    assert LedgerTransaction.objects.filter(kind="grant_expiry").count() == 1
    assert wallet_balance(organization=alice_org).total_micros == 0
